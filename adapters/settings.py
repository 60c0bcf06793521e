"""The front ends' own sections of chatmem.toml (`[telegram]`, `[dingtalk]`) and
`AppConfig`, the whole file: the core's `Config` plus these sections. The core knows no
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
from memory_core.base.errors import ConfigError
from memory_core.config import Config, load_config
from memory_core.config.fields import Section, part, setting


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


class AppConfig(Config, before="metrics"):
    """The whole chatmem.toml: the core's sections and the front ends'. Their tables
    sit where they always have in the file (before `[metrics]`)."""

    telegram: TelegramSettings = part(TelegramSettings)
    dingtalk: DingTalkSettings = part(DingTalkSettings)

    def rules(self) -> list[tuple[bool, str]]:
        return [
            *super().rules(),
            (self.telegram.max_photo_bytes >= 1, "telegram.max_photo_bytes must be >= 1"),
            (
                self.telegram.describe_timeout_seconds > 0,
                "telegram.describe_timeout_seconds must be > 0",
            ),
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
