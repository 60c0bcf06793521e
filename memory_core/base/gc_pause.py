"""The cyclic garbage collector paused around a burst of allocation.

Reading, changing and writing a 100 000-entry long-term file makes millions of objects,
almost none in a cycle: the collector's passes over the growing heap cost a tenth of the
work and free nothing. Refcounting still frees everything else at once; whatever cycles
the burst leaves are collected after it. Pauses nest and may overlap across threads: the
collector runs again when the last one ends (and only if it ran before the first).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_held = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection while the block runs (in any thread)."""
    global _held, _was_enabled
    with _lock:
        if _held == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _held += 1
    try:
        yield
    finally:
        with _lock:
            _held -= 1
            if _held == 0 and _was_enabled:
                gc.enable()
