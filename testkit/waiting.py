"""The one way a test waits: for a state, looked at again and again, never for a length
of time that happens to suffice on a quiet machine.

`until` (event loop) and `until_sync` (threads, other processes) pause a moment between
two looks and fail with what was awaited after `within` seconds. A test that waits for
time itself (a retry's wait, a poll's interval) moves a `ManualMonotonic` instead
(memory_core/base/clock.py). This module is the only test code allowed to pause for a
number of seconds (tests/unit/test_rule_clock.py)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

WITHIN = 10.0
"""Seconds a state has to come, by default: far above what it takes on a loaded machine."""
PAUSE = 0.01
"""Seconds between two looks."""

Check = Callable[[], object | Awaitable[object]]


async def until(
    check: Check, *, within: float = WITHIN, what: str = "", pause: float = PAUSE
) -> None:
    """Wait until `check()` (or `await check()`) is true, letting the loop run between
    looks; AssertionError naming `what` after `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        seen = check()
        if inspect.isawaitable(seen):
            seen = await seen
        if seen:
            return
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {within:g} s: {what or check}")
        await asyncio.sleep(pause)


def until_sync(
    check: Callable[[], object], *, within: float = WITHIN, what: str = "", pause: float = PAUSE
) -> None:
    """`until` for a thread or a test without a loop: blocks between looks."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within:g} s: {what or check}")
        time.sleep(pause)


async def turns(count: int = 10) -> None:
    """Let the event loop run `count` times: what other tasks can do without waiting
    for anything (a sleep woken by `ManualMonotonic.advance`, a task's next step)."""
    for _ in range(count):
        await asyncio.sleep(0)
