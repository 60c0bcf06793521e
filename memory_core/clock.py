"""Time is injected everywhere decay or archiving depends on it, so tests and the
TUI's what-if view can move it without touching the system clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


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


def ensure_aware(when: datetime) -> datetime:
    """Treat naive datetimes (hand-edited files, CLI input) as UTC."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_when(text: str) -> datetime:
    """Parse an ISO-8601 date or datetime, naive meaning UTC; raise ValueError otherwise."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    return ensure_aware(datetime.fromisoformat(value))


def format_when(when: datetime) -> str:
    """Second-precision ISO-8601 in UTC, the one form written to files."""
    return ensure_aware(when).replace(microsecond=0).isoformat().replace("+00:00", "Z")
