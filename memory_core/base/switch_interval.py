"""The interpreter's thread switch interval shortened while a core closes.

A close runs CPU-bound work in worker threads (the parse cache and entities kept, the
index's comparison of two versions) while the event loop passes short steps between them
and the database thread (an audit row written, a future settled). Each such step waits
for the interpreter's lock until the busy thread is made to let go of it: up to
`sys.getswitchinterval()` (5 ms) a time, dozens of times in a close of a large file.
Shorter, those waits shrink; the busy threads lose little to the extra switches. Like
`gc_pause`, uses nest and may overlap across threads: the interval is put back when the
last one ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

QUICK_SECONDS = 0.0005
_lock = threading.Lock()
_held = 0
_was = 0.005


@contextmanager
def quick_switches(seconds: float = QUICK_SECONDS) -> Iterator[None]:
    """Threads switch every `seconds` at most while the block runs."""
    global _held, _was
    with _lock:
        if _held == 0:
            _was = sys.getswitchinterval()
            sys.setswitchinterval(seconds)
        _held += 1
    try:
        yield
    finally:
        with _lock:
            _held -= 1
            if _held == 0:
                sys.setswitchinterval(_was)
