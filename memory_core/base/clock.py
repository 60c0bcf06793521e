"""Time is injected everywhere decay or archiving depends on it, so tests and the
TUI's what-if view can move it without touching the system clock.

Two clocks: the wall clock (`Clock`, aware UTC datetimes) for what is stored and scored,
and a monotonic one (`Monotonic`, seconds) for what only measures waiting: TTLs,
backoffs, cool-downs. Waiting itself is a third parameter (`Sleep`), so a retry or a
poll waits on the clock a test moves (`ManualMonotonic.sleep`) instead of sleeping.

This module is the only one that reads the system's time or sleeps on it
(tests/unit/test_rule_clock.py holds every other to that): product code takes a
`Clock`, a `Monotonic` or a `Sleep`, with the system ones below as defaults."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # asyncio is imported where a sleep runs: `--version` loads no loop
    import asyncio

Clock = Callable[[], datetime]
Monotonic = Callable[[], float]
"""Seconds that never go back (`time.monotonic` by default): a cache's age, a backoff's
end, how long a database counts as down."""
Sleep = Callable[[float], Awaitable[None]]
"""Waiting from the event loop for a number of seconds: `system_sleep`, or a
`ManualMonotonic`'s `sleep` in tests."""

system_monotonic: Monotonic = time.monotonic
"""The system's monotonic seconds."""


def system_clock() -> datetime:
    """Aware UTC now; every stored timestamp is UTC."""
    return datetime.now(UTC)


async def system_sleep(seconds: float) -> None:
    """Wait `seconds` from the event loop (0 or less: let the other tasks run once)."""
    import asyncio

    await asyncio.sleep(max(seconds, 0.0))


def epoch_seconds() -> float:
    """Seconds since 1970 on the system clock, the scale of file times: a stamp in the
    name of a file set aside, the age of a leftover temporary directory. Never stored
    or scored (that is `Clock`'s)."""
    return time.time()


def epoch_ns() -> int:
    """`epoch_seconds` in nanoseconds, to compare with a file's `st_mtime_ns` (whether a
    file changed after it was read)."""
    return time.time_ns()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime) -> None:
        self._now = ensure_aware(start)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta

    def set(self, when: datetime) -> None:
        self._now = ensure_aware(when)


class ManualMonotonic:
    """A monotonic clock that only moves when told to: a test lets a TTL or a backoff
    pass with `advance` instead of waiting it out. It starts well after 0.0, the time a
    fresh cache or cool-down takes for "long ago".

    Its `sleep` (a `Sleep`) returns once `advance` has moved the clock past the sleep's
    end, so a part that waits on it (a retry, a poll) is driven by the test; `sleeping`
    tells the test that a part is waiting."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back")
        self._now += seconds
        waiting = []
        for end, woken in self._sleepers:
            if woken.done():
                continue
            if end <= self._now:
                woken.set_result(None)
            else:
                waiting.append((end, woken))
        self._sleepers = waiting

    @property
    def sleeping(self) -> int:
        """How many sleeps wait for the clock to move."""
        return sum(1 for _, woken in self._sleepers if not woken.done())

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock reaches now + `seconds` (0 or less: one turn of the loop)."""
        import asyncio

        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + seconds, woken))
        await woken


def ensure_aware(when: datetime) -> datetime:
    """Treat naive datetimes (hand-edited files, CLI input) as UTC."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
LATEST = datetime(8999, 12, 31, 23, 59, 59, tzinfo=UTC)
"""The span of times read from files and databases. A time outside it (a hand edit, a
file written with a far `--now`) is moved to its edge: a thousand years from the ends of
what `datetime` can hold, no sum of a time and a keep or decay period overflows."""


def clamp_when(when: datetime) -> datetime:
    """`when` moved into [EARLIEST, LATEST] (aware, UTC)."""
    try:
        aware = ensure_aware(when)
    except OverflowError:  # an offset that takes it past what datetime holds
        return EARLIEST if when.year < LATEST.year // 2 else LATEST
    return EARLIEST if aware < EARLIEST else LATEST if aware > LATEST else aware


def parse_when(text: str) -> datetime:
    """Parse an ISO-8601 date or datetime, naive meaning UTC; raise ValueError otherwise.
    A time outside [EARLIEST, LATEST] comes back at the nearer edge (`clamp_when`), so
    every reader can compute with what it read."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return clamp_when(datetime.fromisoformat(value))


def parse_day(text: str) -> date:
    """A `YYYY-MM-DD` day read from a file's name; ValueError for a day that is no date or
    lies outside [EARLIEST, LATEST] (such a file is not one of the memory's own)."""
    day = date.fromisoformat(text)
    if not EARLIEST.date() <= day <= LATEST.date():
        raise ValueError(f"day {text} is out of range")
    return day


def format_when(when: datetime) -> str:
    """Second-precision ISO-8601 in UTC, the one form written to files."""
    return ensure_aware(when).replace(microsecond=0).isoformat().replace("+00:00", "Z")
