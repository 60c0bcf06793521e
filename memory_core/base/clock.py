"""Time is injected everywhere decay or archiving depends on it, so tests and the
TUI's what-if view can move it without touching the system clock.

Two clocks: the wall clock (`Clock`, aware UTC datetimes) for what is stored and scored,
and a monotonic one (`Monotonic`, seconds) for what only measures waiting: TTLs,
backoffs, cool-downs. Both are parameters, so a test moves time instead of sleeping."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

Clock = Callable[[], datetime]
Monotonic = Callable[[], float]
"""Seconds that never go back (`time.monotonic` by default): a cache's age, a backoff's
end, how long a database counts as down."""


def system_clock() -> datetime:
    """Aware UTC now; every stored timestamp is UTC."""
    return datetime.now(UTC)


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
    fresh cache or cool-down takes for "long ago"."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back")
        self._now += seconds


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
