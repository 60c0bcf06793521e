"""The one retry helper: doubling waits, and a rest on the injected monotonic clock."""

from __future__ import annotations

import asyncio
import logging
from itertools import islice

import pytest

from memory_core.base.clock import ManualMonotonic
from memory_core.base.errors import DatabaseUnreachable, MemoryFileError
from memory_core.base.retry import Backoff, CoolDown, OutageNotice, Steps, retrying, unreachable
from testkit.waiting import turns, until


def test_waits_double_up_to_the_most() -> None:
    assert list(islice(Backoff(0.5, 3.0).waits(), 6)) == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert Backoff(1.0, 30.0).after(20.0) == 30.0


def test_a_cool_down_rests_its_seconds_then_lets_one_probe_through() -> None:
    clock = ManualMonotonic()
    rest = CoolDown(5.0, clock)
    assert not rest.resting()
    rest.start()
    clock.advance(4.9)
    assert rest.resting()
    clock.advance(0.1)
    assert not rest.resting()
    rest.start()  # the probe failed: rest again
    assert rest.resting()
    rest.clear()
    assert not rest.resting()


def test_an_outage_is_said_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    notice = OutageNotice(logging.getLogger("test.outage"), "the work")
    notice.worked()
    for _ in range(5):
        assert notice.failed(DatabaseUnreachable("the database is unreachable"))
    assert notice.down
    notice.worked()
    notice.worked()
    assert notice.failed(DatabaseUnreachable("again"))
    said = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert said == [
        ("WARNING", "the work paused while the database is unreachable"),
        ("INFO", "the work resumed: the database answers again"),
        ("WARNING", "the work paused while the database is unreachable"),
    ]
    assert not [r for r in caplog.records if r.exc_info]


def test_only_the_database_being_away_is_an_outage() -> None:
    notice = OutageNotice(logging.getLogger("test.outage"), "the work")
    assert not notice.failed(ValueError("a bug"))
    assert not notice.down
    away = DatabaseUnreachable("gone")
    wrapped = MemoryFileError("not saved")
    wrapped.__cause__ = away
    assert unreachable(wrapped) is away
    assert notice.failed(wrapped)


def test_a_table_of_waits_repeats_its_last_and_doubles_past_its_limit() -> None:
    schedule = Steps((10.0, 30.0, 120.0), double_after=4)
    assert [schedule.wait(n) for n in range(1, 7)] == [10.0, 30.0, 120.0, 120.0, 240.0, 240.0]
    assert list(islice(Steps((1.0, 2.0)).waits(), 3)) == [1.0, 2.0, 2.0]
    assert [Backoff(0.5, 3.0).wait(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="at least one wait"):
        Steps(())


async def test_retrying_waits_on_the_injected_clock_between_tries() -> None:
    clock = ManualMonotonic()
    tries: list[float] = []
    heard: list[tuple[str, float]] = []

    async def flaky() -> str:
        tries.append(clock())
        if len(tries) < 3:
            raise OSError(f"try {len(tries)}")
        return "done"

    result = asyncio.ensure_future(
        retrying(
            flaky,
            Backoff(1.0, 10.0),
            sleep=clock.sleep,
            on_retry=lambda exc, wait: heard.append((str(exc), wait)),
        )
    )
    await until(lambda: clock.sleeping == 1, what="the first wait")
    clock.advance(0.5)
    await turns()
    assert len(tries) == 1  # not before its wait
    clock.advance(0.5)
    await until(lambda: len(tries) == 2 and clock.sleeping == 1, what="the second wait")
    clock.advance(2.0)
    assert await result == "done"
    assert tries == [1000.0, 1001.0, 1003.0]
    assert heard == [("try 1", 1.0), ("try 2", 2.0)]


async def test_retrying_gives_up_after_its_tries_or_its_time() -> None:
    clock = ManualMonotonic()
    calls: list[int] = []

    async def away() -> None:
        calls.append(1)
        clock.advance(0.1)  # each try takes a moment
        raise DatabaseUnreachable(f"away {len(calls)}")

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    with pytest.raises(DatabaseUnreachable, match="away 3"):
        await retrying(away, Backoff(1.0, 1.0), sleep=sleep, tries=3)
    calls.clear()
    # 5 s: tries begin at 0, 1.1, 2.2, 3.3 and 4.4; a wait after the 5th would end past it.
    with pytest.raises(DatabaseUnreachable, match="away 5"):
        await retrying(away, Backoff(1.0, 1.0), sleep=sleep, within=5.0, monotonic=clock)


async def test_retrying_lets_other_failures_through_at_once() -> None:
    calls: list[int] = []

    async def broken() -> None:
        calls.append(1)
        raise ValueError("a bug")

    async def never(seconds: float) -> None:
        raise AssertionError("no wait for a failure that is not retried")

    with pytest.raises(ValueError, match="a bug"):
        await retrying(broken, Backoff(1.0, 1.0), sleep=never, retry_on=(OSError,))
    assert calls == [1]


async def test_a_manual_sleep_ends_when_the_clock_passes_it_and_can_be_cancelled() -> None:
    clock = ManualMonotonic()
    short = asyncio.ensure_future(clock.sleep(1.0))
    long = asyncio.ensure_future(clock.sleep(5.0))
    await turns()
    assert clock.sleeping == 2
    clock.advance(1.0)
    await short
    assert not long.done() and clock.sleeping == 1
    long.cancel()
    await asyncio.gather(long, return_exceptions=True)
    assert clock.sleeping == 0
    await clock.sleep(0)  # a yield, not a wait
