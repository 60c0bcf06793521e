"""Typed settings from one TOML file plus environment overrides.

Every field carries its documentation, and `config.example.toml` is generated from these
classes (a test keeps them equal), so the example can never fall behind the code. Unknown
keys and wrong types are errors that name the key and the file: a typo must not silently
fall back to a default.
"""

from __future__ import annotations

import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_data_dir

from memory_core.errors import ConfigError
from memory_core.scope import DmScope
from memory_core.scoring import ScoringPolicy


def doc(text: str, *, secret: bool = False, env: str | None = None) -> dict[str, Any]:
    return {"doc": text, "secret": secret, "env": env}


@dataclass(frozen=True)
class ScoringSettings:
    """Lifecycle of long-term memories."""

    reinforce_rate: float = field(
        default=0.2, metadata=doc("Reinforcement gain: score + (1 - score) * rate.")
    )
    contradict_factor: float = field(
        default=0.5, metadata=doc("A contradicted entry's score is multiplied by this.")
    )
    daily_decay: float = field(
        default=0.99, metadata=doc("Daily decay factor after the grace period.")
    )
    grace_days: int = field(default=7, metadata=doc("Days after an activation with no decay."))
    archive_below: float = field(
        default=0.2, metadata=doc("Entries scoring below this move to Archived (recall only).")
    )
    forget_below: float = field(
        default=0.05,
        metadata=doc("Entries scoring below this are forgotten (audit log keeps them)."),
    )
    category_decay: dict[str, float] = field(
        default_factory=dict,
        metadata=doc("Per-category daily decay factors overriding daily_decay, e.g. todo = 0.97."),
    )

    def policy(self) -> ScoringPolicy:
        return ScoringPolicy(
            reinforce_rate=self.reinforce_rate,
            contradict_factor=self.contradict_factor,
            daily_decay=self.daily_decay,
            grace_days=self.grace_days,
            archive_below=self.archive_below,
            forget_below=self.forget_below,
            category_decay=dict(self.category_decay),
        )


@dataclass(frozen=True)
class LongTermSettings:
    """How captures reach MEMORY.md."""

    write_delay_seconds: float = field(
        default=0.05,
        metadata=doc(
            "A capture returns once journalled; MEMORY.md is rewritten this long after the "
            "first unwritten one, with every capture made meanwhile (any read or other "
            "write of the scope writes them first)."
        ),
    )
    journal: bool = field(
        default=True,
        metadata=doc(
            "Journal captures and write MEMORY.md in groups; false writes the file on every "
            "capture before it returns."
        ),
    )


@dataclass(frozen=True)
class PromptSettings:
    """What of long-term memory rides in every system prompt."""

    min_score: float = field(default=0.5, metadata=doc("Only Active entries at or above this."))
    top_k: int = field(default=20, metadata=doc("At most this many entries."))
    max_tokens: int = field(
        default=1500, metadata=doc("Token cap of the memory block; lower ranks shrink first.")
    )
    daily_max_chars: int = field(
        default=4000,
        metadata=doc(
            "Cap on today's + yesterday's daily notes injected on a session's first turn."
        ),
    )


@dataclass(frozen=True)
class RecallSettings:
    """Keyword recall over the scope's files and messages."""

    k1: float = field(default=1.2, metadata=doc("BM25 term-frequency saturation."))
    b: float = field(default=0.75, metadata=doc("BM25 length normalisation."))
    min_score: float = field(default=0.2, metadata=doc("Hits scoring below this are dropped."))
    rank_budget: int = field(
        default=1500,
        metadata=doc(
            "Postings FTS5 may rank for the recall of one chat turn before only the rarest "
            "terms pick candidates (explicit searches allow 2000): lower is faster in "
            "very large scopes and a little less exact."
        ),
    )
    max_hits: int = field(default=5, metadata=doc("At most this many hits are injected."))
    token_budget: int = field(default=2048, metadata=doc("Token budget of the injected block."))
    hit_chars: int = field(default=300, metadata=doc("Each injected hit is cut at this length."))
    keywords: int = field(default=6, metadata=doc("Keywords taken from input and recent messages."))
    recent_days: int = field(
        default=5, metadata=doc("Files this many days old or newer rank above summaries.")
    )
    sync_min_interval_seconds: float = field(
        default=2.0,
        metadata=doc("Minimum seconds between checks for hand-edited files before a search."),
    )


@dataclass(frozen=True)
class HistorySettings:
    """Session history kept in SQLite and injected into prompts."""

    token_budget: int = field(default=4096, metadata=doc("Token budget of injected history."))
    min_messages: int = field(default=5, metadata=doc("Inject at least this many messages."))
    max_messages: int = field(default=20, metadata=doc("Inject at most this many messages."))
    message_chars: int = field(default=500, metadata=doc("Each injected message is cut here."))
    soft_cap: int = field(default=200, metadata=doc("Messages kept per scope before trimming."))
    hard_cap: int = field(default=300, metadata=doc("Hard cap on messages per scope."))
    hard_cap_bytes: int = field(
        default=10 * 1024 * 1024, metadata=doc("Hard cap on stored message bytes per scope.")
    )
    idle_minutes: int = field(
        default=120, metadata=doc("A session idle this long is closed and extracted.")
    )


@dataclass(frozen=True)
class ArchiveSettings:
    """Moving old session history into files and summaries."""

    trigger_unarchived: int = field(
        default=100, metadata=doc("Archive when more unarchived messages than this.")
    )
    interval_hours: float = field(default=6.0, metadata=doc("Archive at least this often."))
    raw_days: int = field(default=5, metadata=doc("Messages this young are copied verbatim."))
    backoff_minutes: list[int] = field(
        default_factory=lambda: [10, 30, 120, 360, 720],
        metadata=doc("Retry delays after failed summaries."),
    )
    max_attempts: int = field(
        default=5, metadata=doc("After this many failures an archive_backlog event is recorded.")
    )


@dataclass(frozen=True)
class ScheduleSettings:
    """In-process schedules of a running bot."""

    quiet_minutes: int = field(
        default=20, metadata=doc("Consolidate after this many minutes without messages (daily).")
    )
    daily_archive_at: str = field(
        default="04:00", metadata=doc("Local time (HH:MM) of the daily archive job.")
    )


@dataclass(frozen=True)
class LLMSettings:
    """Any OpenAI-compatible chat completions server."""

    model: str = field(
        default="", metadata=doc("Model name; empty runs offline.", env="CHATMEM_MODEL")
    )
    base_url: str = field(
        default="",
        metadata=doc("Server base URL; empty means the openai default.", env="OPENAI_BASE_URL"),
    )
    api_key: str = field(
        default="",
        repr=False,
        metadata=doc(
            "API key. Prefer the environment variable.", secret=True, env="OPENAI_API_KEY"
        ),
    )
    timeout_seconds: float = field(default=60.0, metadata=doc("Per-request timeout."))
    max_retries: int = field(default=3, metadata=doc("Retries on rate limits and 5xx."))
    max_tool_steps: int = field(default=4, metadata=doc("Tool-call rounds per turn."))
    temperature: float = field(default=0.3, metadata=doc("Sampling temperature."))
    context_tokens: int = field(
        default=32000, metadata=doc("Context window; sessions flush and compact near it.")
    )
    flush_at_ratio: float = field(
        default=0.75,
        metadata=doc(
            "Flush and compact a session when its history reaches this share of the window."
        ),
    )
    keep_after_compaction: int = field(
        default=6, metadata=doc("Newest messages kept verbatim when a session is compacted.")
    )


@dataclass(frozen=True)
class TelegramSettings:
    """The Telegram bot (python-telegram-bot)."""

    bot_token: str = field(
        default="",
        repr=False,
        metadata=doc("Bot token from @BotFather.", secret=True, env="TELEGRAM_BOT_TOKEN"),
    )
    api_base_url: str = field(
        default="",
        metadata=doc(
            "Bot API base URL for a self-hosted server, e.g. http://127.0.0.1:8081/bot.",
            env="TELEGRAM_API_BASE_URL",
        ),
    )
    allowed_users: list[int] = field(
        default_factory=list,
        metadata=doc(
            "User ids allowed to talk to the bot; nobody else is.",
            env="CHATMEM_TELEGRAM_ALLOWED_USERS",
        ),
    )
    allowed_chats: list[int] = field(
        default_factory=list, metadata=doc("Group chat ids where anyone may talk to the bot.")
    )
    mode: Literal["polling", "webhook"] = field(
        default="polling", metadata=doc("polling or webhook.")
    )
    webhook_url: str = field(default="", metadata=doc("Public URL Telegram posts updates to."))
    webhook_listen: str = field(default="127.0.0.1", metadata=doc("Address the webhook binds."))
    webhook_port: int = field(default=8443, metadata=doc("Port the webhook binds."))
    webhook_secret: str = field(
        default="", repr=False, metadata=doc("Secret token Telegram echoes back.", secret=True)
    )
    group_requires_mention: bool = field(
        default=True,
        metadata=doc("In groups, answer only when mentioned, replied to or commanded."),
    )


@dataclass(frozen=True)
class DingTalkSettings:
    """The DingTalk robot (HTTP callback or Stream mode)."""

    app_key: str = field(default="", metadata=doc("Robot AppKey.", env="DINGTALK_APP_KEY"))
    app_secret: str = field(
        default="",
        repr=False,
        metadata=doc("Robot AppSecret; signs callbacks.", secret=True, env="DINGTALK_APP_SECRET"),
    )
    mode: Literal["callback", "stream"] = field(
        default="callback", metadata=doc("callback or stream.")
    )
    listen_host: str = field(default="127.0.0.1", metadata=doc("Callback server address."))
    listen_port: int = field(default=8090, metadata=doc("Callback server port."))
    callback_path: str = field(default="/dingtalk/callback", metadata=doc("Callback URL path."))
    group_requires_mention: bool = field(
        default=True, metadata=doc("In groups, answer only when the robot is @-mentioned.")
    )
    reply_format: Literal["text", "markdown"] = field(
        default="markdown", metadata=doc("Reply message type.")
    )


@dataclass(frozen=True)
class Config:
    """Everything chatmem reads from `chatmem.toml` and the environment."""

    workspace: str = field(
        default="",
        metadata=doc(
            "Workspace directory; empty means the platform's user data directory.",
            env="CHATMEM_WORKSPACE",
        ),
    )
    dm_scope: Literal["main", "per-peer", "per-channel-peer", "per-account-channel-peer"] = field(
        default="main", metadata=doc("How direct chats are separated.", env="CHATMEM_DM_SCOPE")
    )
    topic_scope: bool = field(
        default=False, metadata=doc("Give each forum topic of a group its own scope.")
    )
    timezone: str = field(
        default="UTC", metadata=doc("IANA time zone for daily-note dates and schedules.")
    )
    log_level: str = field(default="INFO", metadata=doc("Logging level."))
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    long_term: LongTermSettings = field(default_factory=LongTermSettings)
    prompt: PromptSettings = field(default_factory=PromptSettings)
    recall: RecallSettings = field(default_factory=RecallSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    archive: ArchiveSettings = field(default_factory=ArchiveSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    telegram: TelegramSettings = field(default_factory=TelegramSettings)
    dingtalk: DingTalkSettings = field(default_factory=DingTalkSettings)

    @property
    def workspace_path(self) -> Path:
        return Path(self.workspace or user_data_dir("chatmem", appauthor=False)).expanduser()

    @property
    def dm_scope_mode(self) -> DmScope:
        return DmScope(self.dm_scope)

    def with_workspace(self, path: Path | str) -> Config:
        return replace(self, workspace=str(path))


DEFAULT_CONFIG_NAME = "chatmem.toml"


def load_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    workspace: Path | str | None = None,
) -> Config:
    """File (explicit, else ./chatmem.toml when present), then env, then `workspace` arg."""
    env = os.environ if env is None else env
    source = "defaults"
    data: dict[str, Any] = {}
    if path is None and Path(DEFAULT_CONFIG_NAME).is_file():
        path = DEFAULT_CONFIG_NAME
    if path is not None:
        source = str(path)
        try:
            with open(path, "rb") as handle:
                data = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"{source}: config file not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    config = _build(Config, data, "", source)
    config = _apply_env(config, env)
    if workspace is not None:
        config = config.with_workspace(workspace)
    _validate(config, source)
    return config


# --- generic typed loading --------------------------------------------------------------


def _build(cls: type[Any], data: Mapping[str, Any], prefix: str, source: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: '{prefix.rstrip('.')}' must be a table")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in data.items():
        if key not in known:
            raise ConfigError(f"{source}: unknown key '{prefix}{key}'")
        hint = hints[key]
        if is_dataclass(hint):
            values[key] = _build(typing.cast(type[Any], hint), raw, f"{prefix}{key}.", source)
        else:
            values[key] = _coerce(hint, raw, f"{prefix}{key}", source)
    return cls(**values)


def _coerce(hint: Any, raw: Any, key: str, source: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        if raw not in args:
            allowed = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{source}: '{key}' must be one of {allowed}, not {raw!r}")
        return raw
    if origin is list:
        if not isinstance(raw, list):
            raise ConfigError(f"{source}: '{key}' must be a list")
        return [_coerce(args[0], item, f"{key}[]", source) for item in raw]
    if origin is dict:
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{source}: '{key}' must be a table")
        return {str(k): _coerce(args[1], v, f"{key}.{k}", source) for k, v in raw.items()}
    if origin in (types.UnionType, typing.Union):
        raise ConfigError(f"{source}: '{key}' has an unsupported type")
    if hint is bool:
        if not isinstance(raw, bool):
            raise ConfigError(f"{source}: '{key}' must be true or false, not {raw!r}")
        return raw
    if hint is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ConfigError(f"{source}: '{key}' must be a whole number, not {raw!r}")
        return raw
    if hint is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ConfigError(f"{source}: '{key}' must be a number, not {raw!r}")
        return float(raw)
    if hint is str:
        if not isinstance(raw, str):
            raise ConfigError(f"{source}: '{key}' must be a string, not {raw!r}")
        return raw
    raise ConfigError(f"{source}: '{key}' has an unsupported type")


def env_bindings() -> list[tuple[str, str]]:
    """(ENV_NAME, dotted key) pairs: the public environment contract."""
    pairs: list[tuple[str, str]] = []

    def walk(cls: type[Any], prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            if is_dataclass(hints[f.name]):
                walk(hints[f.name], f"{prefix}{f.name}.")
            elif f.metadata.get("env"):
                pairs.append((f.metadata["env"], f"{prefix}{f.name}"))

    walk(Config, "")
    return pairs


def _apply_env(config: Config, env: Mapping[str, str]) -> Config:
    for name, dotted in env_bindings():
        value = env.get(name)
        if value is None or value == "":
            continue
        source = f"environment variable {name}"
        section, _, key = dotted.rpartition(".")
        target = getattr(config, section) if section else config
        hint = typing.get_type_hints(type(target))[key]
        parsed: Any = value
        if typing.get_origin(hint) is list:
            try:
                parsed = [int(part) for part in value.replace(" ", "").split(",") if part]
            except ValueError:
                raise ConfigError(f"{source}: must be comma-separated whole numbers") from None
        coerced = _coerce(hint, parsed, dotted, source)
        updates: dict[str, Any] = (
            {section: replace(target, **{key: coerced})} if section else {key: coerced}
        )
        config = replace(config, **updates)
    return config


def _validate(config: Config, source: str) -> None:
    s = config.scoring
    checks: list[tuple[bool, str]] = [
        (0 < s.daily_decay <= 1, "scoring.daily_decay must be in (0, 1]"),
        (config.recall.rank_budget >= 1, "recall.rank_budget must be >= 1"),
        (
            0 <= s.forget_below <= s.archive_below <= 1,
            "scoring thresholds must satisfy 0 <= forget_below <= archive_below <= 1",
        ),
        (0 < s.reinforce_rate < 1, "scoring.reinforce_rate must be in (0, 1)"),
        (
            0 <= config.long_term.write_delay_seconds <= 60,
            "long_term.write_delay_seconds must be in [0, 60]",
        ),
        (0 < s.contradict_factor < 1, "scoring.contradict_factor must be in (0, 1)"),
        (s.grace_days >= 0, "scoring.grace_days must be >= 0"),
        (
            all(0 < v <= 1 for v in s.category_decay.values()),
            "scoring.category_decay values must be in (0, 1]",
        ),
        (
            config.history.min_messages <= config.history.max_messages,
            "history.min_messages must be <= history.max_messages",
        ),
        (
            config.history.soft_cap <= config.history.hard_cap,
            "history.soft_cap must be <= history.hard_cap",
        ),
        (bool(config.archive.backoff_minutes), "archive.backoff_minutes must not be empty"),
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
    hh, _, mm = config.schedule.daily_archive_at.partition(":")
    if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
        raise ConfigError(f"{source}: 'schedule.daily_archive_at' must be HH:MM")


# --- the generated example --------------------------------------------------------------


def render_example() -> str:
    """config.example.toml, generated from the classes above (tests keep the file equal)."""
    lines = [
        "# chatmem configuration. Copy to chatmem.toml (or pass --config FILE).",
        "# Every key is optional; the values shown are the defaults.",
        "# Secrets belong in the environment, not in this file.",
        "",
    ]
    _example_section(Config, Config(), "", lines)
    return "\n".join(lines).rstrip("\n") + "\n"


def _example_section(cls: type[Any], value: Any, name: str, lines: list[str]) -> None:
    hints = typing.get_type_hints(cls)
    nested: list[tuple[str, Any, Any]] = []
    if name:
        lines.append(f"[{name}]")
        if cls.__doc__:
            lines.append(f"# {cls.__doc__.strip().splitlines()[0]}")
    for f in fields(cls):
        hint = hints[f.name]
        current = getattr(value, f.name)
        if is_dataclass(hint):
            nested.append((f"{name}.{f.name}" if name else f.name, hint, current))
            continue
        meta = f.metadata
        comment = meta.get("doc", "")
        if meta.get("env"):
            comment += f" Env: {meta['env']}."
        lines.append(f"# {comment}")
        lines.append(f"{f.name} = {_toml_value(current)}")
    lines.append("")
    for sub_name, sub_cls, sub_value in nested:
        _example_section(sub_cls, sub_value, sub_name, lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(type(value))
