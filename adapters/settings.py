"""The front ends' own sections of chatmem.toml (`[mcp]`, `[telegram]`, `[dingtalk]`,
`[metrics]`) and `AppConfig`, the whole file: the core's `Config` plus these sections,
with their checks (`AppConfig.rules`). The core knows no
front end; what loads the config for a front end (the CLI, the test kits) loads it as an
`AppConfig` (`load_app_config`), so the file keeps one format, its keys are checked,
bound to their environment variables, kept out of logs when secret and written into
config.example.toml like every other section's.

A new front end adds its section here and one field to `AppConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

from adapters.webhook.origins import Origin, bad_origin_entry, webhook_origin
from memory_core.base.errors import ConfigError, ScopeError
from memory_core.base.scope import ScopeKey
from memory_core.config import Config, Where, load_config
from memory_core.config.fields import Section, part, setting

MIN_TOKEN_CHARS = 16
"""The shortest MCP bearer token accepted: a shorter one is guessable."""


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

    def problem(self, where: Where) -> str | None:
        """The first thing wrong as one error line, None when nothing is: a short token is
        guessable and a bad scope key would only fail at the first call. The line names
        where a bad token came from (`mcp.token`'s environment variable or the file),
        never the token itself."""
        token_from = where.of("mcp.token")
        tokens = [(self.token, token_from)] if self.token else []
        for token, scope in self.clients.items():
            try:
                ScopeKey.parse(scope)
            except ScopeError as exc:
                return f"{where.source}: 'mcp.clients': {exc}"
            tokens.append((token, f"{where.source}: 'mcp.clients'"))
        for token, origin in tokens:
            if len(token) < MIN_TOKEN_CHARS:
                return (
                    f"{origin}: an MCP bearer token must be at least {MIN_TOKEN_CHARS} characters"
                )
            if not (token.isascii() and token.isprintable() and " " not in token):
                return f"{origin}: an MCP bearer token must be printable ASCII without spaces"
        if self.token and self.token in self.clients:
            return f"{token_from}: the MCP token is also a key of mcp.clients: one token, one scope"
        if not self.path.startswith("/"):
            return f"{where.source}: 'mcp.path' must start with '/'"
        return None


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
        check=bad_origin_entry,
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

    def webhook_origins(self) -> frozenset[Origin]:
        """`webhook_hosts` as (scheme, host, port), the form a webhook URL is compared in.
        Checked again here: a settings object copied with new values skips validation."""
        try:
            return frozenset(webhook_origin(entry) for entry in self.webhook_hosts)
        except ValueError as exc:
            raise ConfigError(f"dingtalk.webhook_hosts: {exc}") from None


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

    def problem(self, where: Where) -> str | None:
        """`address`'s error as one line naming where the value came from, None if good."""
        try:
            self.address()
        except ConfigError as exc:
            return f"{where.of('metrics.listen')}: {exc}"
        return None


class _WithMcp(Config, before="logging"):
    """The core's sections and `[mcp]`, whose table has always sat before `[logging]`
    (a class of its own: `before=` places one run of fields, and the others go last)."""

    mcp: McpSettings = part(McpSettings)


class AppConfig(_WithMcp):
    """The whole chatmem.toml: the core's sections and the front ends'. Their tables
    sit where they always have in the file (`[mcp]` before `[logging]`, the others
    last)."""

    telegram: TelegramSettings = part(TelegramSettings)
    dingtalk: DingTalkSettings = part(DingTalkSettings)
    metrics: MetricsSettings = part(MetricsSettings)

    def rules(self, where: Where) -> list[tuple[bool, str]]:
        metrics, mcp = self.metrics.problem(where), self.mcp.problem(where)
        return [
            *super().rules(where),
            (
                self.telegram.max_photo_bytes >= 1,
                f"{where.source}: telegram.max_photo_bytes must be >= 1",
            ),
            (
                self.telegram.describe_timeout_seconds > 0,
                f"{where.source}: telegram.describe_timeout_seconds must be > 0",
            ),
            (metrics is None, metrics or ""),
            (mcp is None, mcp or ""),
        ]

    @classmethod
    def of(cls, config: Config) -> Self:
        """`config` as the whole file's config: a front end is handed the core's config,
        which the CLI loaded as an `AppConfig`; a core opened on a bare `Config` has no
        front end's settings, said in one line."""
        if not isinstance(config, cls):
            raise ConfigError(
                "this config has no front end's sections (load it with load_app_config)"
            )
        return config


def load_app_config(
    path: Path | str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    workspace: Path | str | None = None,
) -> AppConfig:
    """`load_config` for the whole file, front ends' sections included."""
    return load_config(path, env=env, workspace=workspace, schema=AppConfig)
