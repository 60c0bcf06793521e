"""Trying again: doubling waits between attempts, and a rest after a failure.

Every part that retries uses these two, so a wait schedule or a cool-down reads the same
everywhere and a test moves the injected clock (`clock.Monotonic`) instead of sleeping.
Work retried through a database outage says so with `OutageNotice`: once, not per try.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from memory_core.base.clock import Monotonic
from memory_core.base.errors import DatabaseUnreachable


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits that double from `first` up to `most` (then stay there)."""

    first: float
    most: float

    def after(self, wait: float) -> float:
        """The wait after `wait`."""
        return min(wait * 2, self.most)

    def waits(self) -> Iterator[float]:
        """`first`, then each wait after the last, without end."""
        wait = self.first
        while True:
            yield wait
            wait = self.after(wait)


class CoolDown:
    """A part that failed rests for `seconds` on the monotonic clock before it is tried
    again: one probe after the rest, not one on every call (a circuit breaker)."""

    def __init__(self, seconds: float, monotonic: Monotonic = time.monotonic) -> None:
        self.seconds = seconds
        self._monotonic = monotonic
        self._until = 0.0

    def start(self) -> None:
        """The part just failed: rest from now."""
        self._until = self._monotonic() + self.seconds

    def resting(self) -> bool:
        """Whether the rest is still on."""
        return self._monotonic() < self._until

    def clear(self) -> None:
        """The part works again."""
        self._until = 0.0


def unreachable(exc: BaseException) -> DatabaseUnreachable | None:
    """The `DatabaseUnreachable` that `exc` is, or that caused it; None for any other
    failure."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DatabaseUnreachable):
            return seen
        seen = seen.__cause__
    return None


class OutageNotice:
    """Work that is tried again through a database outage says so in one warning when it
    first fails for want of the database, and in one line when it works again: an
    outage is an expected condition, not a traceback per try."""

    def __init__(self, logger: logging.Logger, work: str) -> None:
        self._log = logger
        self._work = work
        self._down = False

    @property
    def down(self) -> bool:
        """Whether the last try failed for want of the database."""
        return self._down

    def failed(self, exc: BaseException) -> bool:
        """True when `exc` is the database being away (said once per outage); False for
        any other failure, which is the caller's to report."""
        reason = unreachable(exc)
        if reason is None:
            return False
        if not self._down:
            self._down = True
            self._log.warning(
                "%s paused while the database is unreachable (%s); tried again as it comes due",
                self._work,
                reason,
            )
        return True

    def worked(self) -> None:
        """A try succeeded: the outage, if there was one, is over."""
        if self._down:
            self._down = False
            self._log.info("%s resumed: the database answers again", self._work)
