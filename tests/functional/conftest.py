"""Fixtures of the end-to-end adapter tests: fake servers, a core per test, a running bot.

Everything talks HTTP on 127.0.0.1: the real python-telegram-bot client polls
`FakeTelegramAPI`, the real openai client calls `FakeOpenAI`, DingTalk callbacks are
signed like DingTalk signs them and replies land in a `WebhookSink`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import AppConfig
from memory_core.engine import MemoryCore
from testkit import bot as testkit_bot
from testkit.bot import BOT_USERNAME, TOKEN, TelegramBot, isolated_config
from testkit.dingtalk import WebhookSink
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from tests.postgres import with_storage
from tests.support import sql

ALICE = 42
BOB = 43
STRANGER = 666
GROUP = -1001000
FORUM = -1002000


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
) -> AppConfig:
    """`testkit.bot.isolated_config` on the running test's storage backend."""
    return isolated_config(
        workspace, env=with_storage(env), telegram=telegram, dingtalk=dingtalk, **top
    )


@pytest.fixture
async def fake_tg() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI(token=TOKEN, bot_username=BOT_USERNAME) as fake:
        yield fake


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


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
    """`testkit.bot.telegram_bot` on the running test's storage backend; ALICE and BOB are
    allowlisted unless `telegram` says otherwise."""
    settings = {"allowed_users": [ALICE, BOB], **(telegram or {})}
    async with testkit_bot.telegram_bot(
        tmp_path, fake, llm=llm, env=with_storage(env), telegram=settings, **top
    ) as running:
        yield running


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


@pytest.fixture
async def sink() -> AsyncIterator[WebhookSink]:
    async with WebhookSink() as running:
        yield running
