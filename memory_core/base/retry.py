"""Trying again: doubling waits between attempts, and a rest after a failure.

Every part that retries uses these two, so a wait schedule or a cool-down reads the same
everywhere and a test moves the injected clock (`clock.Monotonic`) instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from memory_core.base.clock import Monotonic


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
