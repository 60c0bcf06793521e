"""Trying again: the one place that says how long to wait between attempts, and how.

Every part that retries takes its waits from a `Schedule` here (`Backoff`: doubling;
`Steps`: a table, such as a setting's) and waits on the injected clock
(`clock.Sleep`, `clock.Monotonic`), through `retrying` or its own loop over `waits()`,
so a schedule reads the same everywhere and a test moves the clock instead of sleeping.
A part that failed rests with `CoolDown` (a circuit breaker); work retried through a
database outage says so with `OutageNotice`: once, not per try.

Not here: the retries of the LLM client (llm/client.py), which are the openai client's
own (`max_retries`, with its backoff honouring Retry-After), a setting of that client.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from memory_core.base.clock import Monotonic, Sleep, system_monotonic
from memory_core.base.errors import DatabaseUnreachable

T = TypeVar("T")


class Schedule(Protocol):
    """How long to wait after a number of failures in a row."""

    def wait(self, failures: int) -> float:
        """The wait after the `failures`-th failure in a row (1 for the first)."""
        ...


def waits(schedule: Schedule) -> Iterator[float]:
    """The schedule's waits after the 1st, 2nd, … failure, without end."""
    failures = 1
    while True:
        yield schedule.wait(failures)
        failures += 1


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits that double from `first` up to `most` (then stay there)."""

    first: float
    most: float

    def after(self, wait: float) -> float:
        """The wait after `wait`."""
        return min(wait * 2, self.most)

    def wait(self, failures: int) -> float:
        wait = self.first
        for _ in range(max(failures, 1) - 1):
            if wait >= self.most:
                break
            wait = self.after(wait)
        return min(wait, self.most)

    def waits(self) -> Iterator[float]:
        """`first`, then each wait after the last, without end."""
        return waits(self)


@dataclass(frozen=True, slots=True)
class Steps:
    """Waits read from a table: the n-th failure waits the n-th step, the last step
    repeats after the table ends, and past `double_after` failures (if given) the wait
    doubles once: a schedule a person writes down (a setting)."""

    steps: tuple[float, ...]
    double_after: int | None = None

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a schedule needs at least one wait")

    def wait(self, failures: int) -> float:
        index = min(max(failures, 1), len(self.steps)) - 1
        wait = self.steps[index]
        if self.double_after is not None and failures > self.double_after:
            wait *= 2
        return wait

    def waits(self) -> Iterator[float]:
        return waits(self)


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    schedule: Schedule,
    *,
    sleep: Sleep,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    tries: int | None = None,
    within: float | None = None,
    monotonic: Monotonic = system_monotonic,
    on_retry: Callable[[BaseException, float], None] | None = None,
) -> T:
    """`attempt()`, tried again after a failure of a `retry_on` type, waiting the
    schedule's waits with `sleep`. It gives up, raising the last failure, after `tries`
    attempts, or when the next wait would end more than `within` seconds (on
    `monotonic`) after the first attempt began. `on_retry(failure, wait)` hears of each
    failure that will be tried again (to log it). Other failures pass through at once."""
    deadline = None if within is None else monotonic() + within
    failures = 0
    while True:
        try:
            return await attempt()
        except retry_on as exc:
            failures += 1
            wait = schedule.wait(failures)
            if tries is not None and failures >= tries:
                raise
            if deadline is not None and monotonic() + wait > deadline:
                raise
            if on_retry is not None:
                on_retry(exc, wait)
        await sleep(wait)


class CoolDown:
    """A part that failed rests for `seconds` on the monotonic clock before it is tried
    again: one probe after the rest, not one on every call (a circuit breaker)."""

    def __init__(self, seconds: float, monotonic: Monotonic = system_monotonic) -> None:
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
