"""A PostgreSQL outage is an expected condition: the background work that fails for want
of the server (caps and archive checks after turns, the schedules) says so in one
warning per outage and one line when it works again, never a traceback per try.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.reliability.support import past_cool_downs
from tests.reliability.test_postgres_outage import pg_config

pytestmark = pytest.mark.timeout(180)

PAUSED = "background memory work (caps, archive, schedules) paused"
RESUMED = "background memory work (caps, archive, schedules) resumed"


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


async def turns_in_new_scopes(core: MemoryCore, prefix: str, count: int) -> None:
    """A turn in each of `count` new scopes (a scope's first turn checks its caps in the
    background), then that background work done."""
    for n in range(count):
        await core.conversation.turn(ScopeKey(f"peer:{prefix}{n}"), f"{prefix} turn {n}")
    await core.conversation.quiet()


async def test_an_outage_is_one_warning_and_no_traceback(
    own_postgres: PostgresServer,
    tmp_path: Path,
    monotonic: ManualMonotonic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with MemoryCore.open(
        pg_config(own_postgres, tmp_path / "ws"), clock=ManualClock(START), monotonic=monotonic
    ) as core:
        await turns_in_new_scopes(core, "before", 2)
        assert not lines(caplog, PAUSED)
        tries = itertools.count()

        for outage in (1, 2):
            await asyncio.to_thread(own_postgres.pause)
            await turns_in_new_scopes(core, f"during{outage}-", 12)
            with pytest.raises(Exception, match="unreachable"):
                await core.conversation.tick()  # the schedules meet it too
            assert len(lines(caplog, PAUSED)) == outage
            assert len(lines(caplog, RESUMED)) == outage - 1

            await asyncio.to_thread(own_postgres.resume)

            async def resumed(outage: int = outage) -> bool:
                await turns_in_new_scopes(core, f"after{next(tries)}-", 1)
                return len(lines(caplog, RESUMED)) == outage

            await past_cool_downs(monotonic, resumed)
    warnings = [r for r in lines(caplog, PAUSED) if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # one per outage
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert not [
        r for r in caplog.records if r.levelno >= logging.ERROR and "unreachable" in r.getMessage()
    ]
