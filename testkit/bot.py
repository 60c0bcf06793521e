"""A running Telegram bot over the fakes: the real python-telegram-bot client polling
`FakeTelegramAPI`, the real core on a fresh workspace, the model `FakeOpenAI` when given.

The Telegram tests drive it, and so does the load driver (`testkit.load`) that a test
asserts on and a bench measures with. Configs come from an explicit environment, never the
process's, so a caller picks the storage backend by passing its settings in `env`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from telegram.ext import Application

from adapters.settings import AppConfig, load_app_config
from adapters.telegram_bot import build_telegram_app
from memory_core.engine import MemoryCore
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI, SentMessage
from testkit.waiting import until

TOKEN = "123456:TEST-token-for-the-fake"
BOT_USERNAME = "chatmem_bot"

REPLY_TIMEOUT = 10.0
"""Seconds a caller waits for a reply: generous, for a busy CI machine."""

AnyApp = Application[Any, Any, Any, Any, Any, Any]


def isolated_config(
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
    telegram: Mapping[str, Any] | None = None,
    dingtalk: Mapping[str, Any] | None = None,
    **top: Any,
) -> AppConfig:
    """`load_app_config` from an explicit env (never the process's) and an empty file (never a
    ./chatmem.toml of whoever runs it), then field overrides."""
    empty = workspace.parent / "empty-chatmem.toml"
    empty.parent.mkdir(parents=True, exist_ok=True)
    empty.touch()
    config = load_app_config(empty, env=dict(env or {}), workspace=workspace)
    if telegram:
        config = config.model_copy(update={"telegram": config.telegram.model_copy(update=telegram)})
    if dingtalk:
        config = config.model_copy(update={"dingtalk": config.dingtalk.model_copy(update=dingtalk)})
    return config.model_copy(update=top) if top else config


def llm_env(fake: FakeOpenAI) -> dict[str, str]:
    """The environment that points chatmem at the fake model."""
    return {
        "CHATMEM_MODEL": "gpt-fake",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-test",
    }


@asynccontextmanager
async def running_app(core: MemoryCore, config: AppConfig) -> AsyncIterator[AnyApp]:
    """The application `build_telegram_app` makes, polling the fake with no delay."""
    app = build_telegram_app(core, config.telegram)
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=timedelta(seconds=1))
        try:
            yield app
        finally:
            await app.updater.stop()
            await app.stop()


async def wait_until(
    predicate: Callable[[], bool],
    what: str = "condition",
    timeout: float = 5.0,  # noqa: ASYNC109 - a plain deadline reads best in tests
) -> None:
    """`waiting.until`, failing with TimeoutError as the bot tests expect."""
    try:
        await until(predicate, within=timeout, what=what)
    except AssertionError:
        raise TimeoutError(f"timed out waiting for {what}") from None


@dataclass
class TelegramBot:
    """A running bot over the fake Bot API, with the core behind it."""

    fake: FakeTelegramAPI
    core: MemoryCore
    config: AppConfig
    app: AnyApp
    llm: FakeOpenAI | None = None

    async def dm(
        self, user: int, text: str, *, expect: int = 1, first_name: str = "Alice", **kw: Any
    ) -> list[SentMessage]:
        """Send a private message and wait for `expect` new messages in that chat."""
        before = len(self.fake.sent_to(user))
        self.fake.add_private_message(user, text, first_name=first_name, **kw)
        sent = await self.fake.wait_for_sent(before + expect, timeout=REPLY_TIMEOUT, chat_id=user)
        return sent[before:]

    async def group(
        self,
        chat: int,
        user: int,
        text: str,
        *,
        expect: int = 1,
        thread_id: int | None = None,
        **kw: Any,
    ) -> list[SentMessage]:
        """Send a group message and wait for `expect` new messages in that chat/topic."""

        def mine() -> list[SentMessage]:
            return [
                m
                for m in self.fake.sent_to(chat)
                if thread_id is None or m.message_thread_id == thread_id
            ]

        before = len(mine())
        self.fake.add_group_message(chat, user, text, thread_id=thread_id, **kw)
        await wait_until(
            lambda: len(mine()) >= before + expect, f"{expect} replies in {chat}", REPLY_TIMEOUT
        )
        return mine()[before:]


@asynccontextmanager
async def telegram_bot(
    tmp_path: Path,
    fake: FakeTelegramAPI,
    *,
    llm: FakeOpenAI | None = None,
    env: Mapping[str, str] | None = None,
    telegram: Mapping[str, Any] | None = None,
    **top: Any,
) -> AsyncIterator[TelegramBot]:
    """A core on a fresh workspace (`tmp_path / "ws"`) plus the running bot."""
    settings: dict[str, Any] = {"bot_token": fake.token, "api_base_url": fake.base_url}
    settings.update(telegram or {})
    full_env = {**(llm_env(llm) if llm is not None else {}), **(env or {})}
    config = isolated_config(tmp_path / "ws", env=full_env, telegram=settings, **top)
    async with MemoryCore.open(config) as core, running_app(core, config) as app:
        yield TelegramBot(fake, core, config, app, llm)


def last_user_text(body: Mapping[str, Any]) -> str:
    """The newest user message of a recorded chat request."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""
