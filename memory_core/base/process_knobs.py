"""Process-wide knobs turned around bursts of work and a close, and put back after.

* The cyclic garbage collector paused (`gc_paused`): reading, changing and writing a
  100 000-entry long-term file makes millions of objects, almost none in a cycle, and the
  collector's passes over the growing heap cost a tenth of the work and free nothing.
  Refcounting still frees everything else at once; whatever cycles the burst leaves are
  collected after it.
* Quicker thread switches (`quick_switches`): a close runs CPU-bound work in worker
  threads (the parse cache and entities kept, the index's comparison of two versions)
  while the event loop passes short steps between them and the database thread (an audit
  row written, a future settled). Each step waits for the interpreter's lock until the
  busy thread is made to let go of it: up to `sys.getswitchinterval()` (5 ms) a time,
  dozens of times in a close of a large file. Shorter, those waits shrink; the busy
  threads lose little to the extra switches.

Uses nest and may overlap across threads: a knob is put back as the first use found it
when the last one ends.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

QUICK_SECONDS = 0.0005
"""The thread switch interval while a core closes."""


class HeldSetting(Generic[T]):
    """A process-wide setting: `held(value)` sets it for as long as any use holds it."""

    def __init__(self, read: Callable[[], T], write: Callable[[T], None]) -> None:
        self._read = read
        self._write = write
        self._lock = threading.Lock()
        self._held = 0
        self._was = read()

    @contextmanager
    def held(self, value: T) -> Iterator[None]:
        with self._lock:
            if self._held == 0:
                self._was = self._read()
                self._write(value)
            self._held += 1
        try:
            yield
        finally:
            with self._lock:
                self._held -= 1
                if self._held == 0:
                    self._write(self._was)


def _collect(on: bool) -> None:
    if on:
        gc.enable()
    else:
        gc.disable()


_COLLECTOR = HeldSetting(gc.isenabled, _collect)
_SWITCHES = HeldSetting(sys.getswitchinterval, sys.setswitchinterval)


def gc_paused() -> AbstractContextManager[None]:
    """No cyclic collection while the block runs (in any thread)."""
    return _COLLECTOR.held(False)


def quick_switches() -> AbstractContextManager[None]:
    """Threads switch every `QUICK_SECONDS` at most while the block runs."""
    return _SWITCHES.held(QUICK_SECONDS)
