"""The process-wide knobs a close turns (the cyclic collector, the thread switch interval)
are put back as they were once the last use ends, whatever the nesting and threads."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from memory_core.base.process_knobs import QUICK_SECONDS, gc_paused, quick_switches


def test_nested_and_overlapping_uses_put_the_knobs_back_at_the_last_end() -> None:
    interval = sys.getswitchinterval()
    assert gc.isenabled() and interval > QUICK_SECONDS
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with gc_paused(), quick_switches():
            inside.set()
            release.wait(timeout=30)

    thread = threading.Thread(target=other)
    with gc_paused(), quick_switches():
        with gc_paused(), quick_switches():
            assert not gc.isenabled() and sys.getswitchinterval() == QUICK_SECONDS
        thread.start()
        assert inside.wait(timeout=30)
    # This thread's uses ended, the other's has not: still paused and quick.
    assert not gc.isenabled() and sys.getswitchinterval() == QUICK_SECONDS
    release.set()
    thread.join(timeout=30)
    assert gc.isenabled() and sys.getswitchinterval() == interval


def test_an_error_inside_puts_the_knobs_back() -> None:
    interval = sys.getswitchinterval()
    with pytest.raises(RuntimeError), gc_paused(), quick_switches():
        raise RuntimeError("boom")
    assert gc.isenabled() and sys.getswitchinterval() == interval
