"""CPU-bound processes beside a bench (`bench/load.py`), so its figures can be given at a
stated load: here, where tests reach them (a test loads no bench code).

`burners` starts N processes (plain Python loops, one core each, each in its own session),
waits until the 1-minute load average has risen by most of what they add (or a settle time
passes: the average is slow, about a minute to follow), and stops them on exit, whatever
happens inside.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess

SETTLE_SECONDS = 75.0
"""Longest wait for the 1-minute average to follow the burners (it moves by about 63 %
of a change per minute)."""
RISE_SHARE = 0.6
"""The average has followed once it rose by this share of the burners' count."""


def _burn() -> None:  # pragma: no cover - runs in the burner processes, killed by the parent
    """One core's worth of pure-Python work, forever (the parent terminates it), in a
    session of its own: with the kernel's autogroup scheduling a session shares the CPU as
    one, so burners left in the bench's session would weigh as one program against each
    command measured (which runs in its own session), not as the other programs of a
    busy machine do."""
    os.setsid()
    n = 0
    while True:
        n = (n * 1_103_515_245 + 12_345) % 2_147_483_648


def settled(start: float, now: float, count: int) -> bool:
    """Whether the 1-minute average (`now`, from `start` before the burners) has risen by
    enough of `count`. Pure, so the rule is tested without waiting a minute."""
    return count <= 0 or now - start >= RISE_SHARE * count


@contextlib.contextmanager
def burners(
    count: int,
    *,
    settle_seconds: float = SETTLE_SECONDS,
    loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg,
    monotonic: Callable[[], float] = time.monotonic,
    poll_seconds: float = 1.0,
) -> Iterator[list[BaseProcess]]:
    """`count` CPU-bound processes running for the body's duration (none for 0).

    Before the body runs, waits until the 1-minute load average rose (`settled`) or
    `settle_seconds` passed. The processes are daemons and are terminated, then joined,
    on exit, so a failing bench leaves none behind."""
    if count <= 0:
        yield []
        return
    context = multiprocessing.get_context("spawn")
    procs: list[BaseProcess] = [
        context.Process(target=_burn, name=f"bench-load-{i}", daemon=True) for i in range(count)
    ]
    start = loadavg()[0]
    try:
        for proc in procs:
            proc.start()
        deadline = monotonic() + settle_seconds
        while monotonic() < deadline and not settled(start, loadavg()[0], count):
            time.sleep(poll_seconds)
        yield procs
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
