"""The replay of dead processes' captures at a start that meets the server going or
coming back: tried again with backoff, never a failed start."""

from __future__ import annotations

import logging

import pytest

from memory_core import services
from memory_core.base.clock import ManualClock
from memory_core.base.errors import DatabaseUnreachable
from memory_core.base.retry import Backoff
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.staging import Staging
from tests.conftest import START


def away_for(tries: int, calls: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """`Staging.recover` finds the server away for its first `tries` calls."""
    real = Staging.recover

    async def recover(self: Staging) -> int:
        calls.append(1)
        if len(calls) <= tries:
            raise DatabaseUnreachable("the database is unreachable: starting up")
        return await real(self)

    monkeypatch.setattr(Staging, "recover", recover)
    monkeypatch.setattr(services, "RECOVER_WAITS", Backoff(0.001, 0.002), raising=False)


async def test_a_replay_that_meets_the_server_coming_back_is_tried_again(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    away_for(2, calls, monkeypatch)
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        entry, _ = await core.memories.capture(MAIN, "the kayak is red")
        assert entry.id in {e.id for e in await core.memories.entries(MAIN)}
    assert len(calls) == 3


async def test_a_replay_that_never_reaches_the_server_leaves_the_rows_and_opens(
    config: Config, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    away_for(1000, calls, monkeypatch)
    caplog.set_level(logging.WARNING, logger="memory_core")
    async with MemoryCore.open(config, clock=ManualClock(START)) as core:
        await core.memories.capture(MAIN, "the kayak is red")
    assert len(calls) == services.RECOVER_TRIES
    said = [r for r in caplog.records if "not replayed yet" in r.getMessage()]
    assert len(said) == 1 and not said[0].exc_info
