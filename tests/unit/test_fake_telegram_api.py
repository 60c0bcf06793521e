"""The one property of testkit/telegram_api.py checked on its own, through the real PTB
client: it holds a long poll like Telegram. Everything else the fake does is relied on,
and so checked, by the adapter tests in tests/functional (a wrong token refused, topics,
mentions, injected failures, the command menu, chat actions)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from telegram.ext import ExtBot

from testkit.telegram_api import FakeTelegramAPI


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
async def bot() -> AsyncIterator[tuple[FakeTelegramAPI, ExtBot[None]]]:
    async with (
        FakeTelegramAPI(token="123:ABC") as api,
        ExtBot(api.token, base_url=api.base_url) as client,
    ):
        yield api, client


async def test_long_poll_waits_and_wakes(bot: tuple[FakeTelegramAPI, ExtBot[None]]) -> None:
    """Telegram holds getUpdates until an update comes or the timeout ends. No adapter test
    would fail if the fake answered at once (PTB would poll in a busy loop instead), yet
    only a held poll, woken by the next update, runs the adapter's replies and its stop as
    in production; so this is checked here."""
    fake, client = bot
    started = time.monotonic()
    assert await client.get_updates(timeout=1) == ()
    assert 0.9 <= time.monotonic() - started < 3

    poll = asyncio.create_task(client.get_updates(timeout=10))
    await fake.wait_for_held_poll()
    started = time.monotonic()
    fake.add_private_message(42, "wake up")
    updates = await asyncio.wait_for(poll, 2)
    assert time.monotonic() - started < 1
    assert [u.message.text for u in updates] == ["wake up"]  # type: ignore[union-attr]
