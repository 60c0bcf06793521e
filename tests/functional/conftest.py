"""Fixtures of the end-to-end adapter tests: fake servers, a core per test, a running bot.

Everything talks HTTP on 127.0.0.1: the real python-telegram-bot client polls
`FakeTelegramAPI`, the real openai client calls `FakeOpenAI`, DingTalk callbacks are
signed like DingTalk signs them and replies land in a `WebhookSink`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from telegram.ext import Application

from adapters.telegram_bot import build_telegram_app
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage
from tests.postgres import with_storage
from tests.support import sql

TOKEN = "123456:TEST-token-for-the-fake"
BOT_USERNAME = "chatmem_bot"
ALICE = 42
BOB = 43
STRANGER = 666
GROUP = -1001000
FORUM = -1002000

REPLY_TIMEOUT = 10.0
"""Seconds a test waits for a reply: generous, for a busy CI machine."""

AnyApp = Application[Any, Any, Any, Any, Any, Any]


@pytest.fixture(autouse=True)
def _adapter_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """PTB durations as timedeltas (no deprecation warnings) and no proxy for the fakes.
    (Configs are built from an explicit env by `make_config`, never the process's.)"""
    monkeypatch.setenv("PTB_TIMEDELTA", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(autouse=True)
def _both_backends(storage_env: Mapping[str, str]) -> None:
    """Every functional test stores what a bot stores: it runs on each storage backend,
    which `make_config` picks up (`with_storage`)."""


def make_config(
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
    telegram: Mapping[str, Any] | None = None,
    dingtalk: Mapping[str, Any] | None = None,
    **top: Any,
) -> Config:
    """`load_config` from an explicit env (never the process's) and an empty file (never a
    ./chatmem.toml of whoever runs the tests), then field overrides."""
    empty = workspace.parent / "empty-chatmem.toml"
    empty.parent.mkdir(parents=True, exist_ok=True)
    empty.touch()
    config = load_config(empty, env=with_storage(env), workspace=workspace)
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


@pytest.fixture
async def fake_tg() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI(token=TOKEN, bot_username=BOT_USERNAME) as fake:
        yield fake


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@asynccontextmanager
async def running_app(core: MemoryCore, config: Config) -> AsyncIterator[AnyApp]:
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


@dataclass
class TelegramBot:
    """A running bot over the fake Bot API, with the core behind it."""

    fake: FakeTelegramAPI
    core: MemoryCore
    config: Config
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


async def wait_until(
    predicate: Callable[[], bool],
    what: str = "condition",
    timeout: float = 5.0,  # noqa: ASYNC109 - a plain deadline reads best in tests
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


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
    """A core on a fresh workspace plus the running bot; ALICE and BOB are allowlisted."""
    settings: dict[str, Any] = {
        "bot_token": fake.token,
        "api_base_url": fake.base_url,
        "allowed_users": [ALICE, BOB],
    }
    settings.update(telegram or {})
    full_env = {**(llm_env(llm) if llm is not None else {}), **(env or {})}
    config = make_config(tmp_path / "ws", env=full_env, telegram=settings, **top)
    async with MemoryCore.open(config) as core, running_app(core, config) as app:
        yield TelegramBot(fake, core, config, app, llm)


async def message_rows(core: MemoryCore, where: str = "TRUE", *args: Any) -> list[tuple[Any, ...]]:
    """(scope, role, speaker, content) of stored messages matching `where`."""
    rows = await sql(
        core, f"SELECT scope, role, speaker, content FROM messages WHERE {where} ORDER BY id", *args
    )
    return [tuple(r) for r in rows]


def workspace_files(root: Path) -> dict[str, bytes]:
    """Every memory file (not the SQLite state) with its content."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".chatmem" not in p.relative_to(root).parts
    }


def turn_prompts(fake: FakeOpenAI) -> list[str]:
    """Every chat request's messages flattened to text (turns, extraction, flushes)."""
    return [
        "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
        for body in fake.chat_requests()
    ]


def last_user_text(body: Mapping[str, Any]) -> str:
    """The newest user message of a recorded chat request."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""
