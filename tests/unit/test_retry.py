"""The one retry helper: doubling waits, and a rest on the injected monotonic clock."""

from __future__ import annotations

from itertools import islice

from memory_core.base.clock import ManualMonotonic
from memory_core.base.retry import Backoff, CoolDown


def test_waits_double_up_to_the_most() -> None:
    assert list(islice(Backoff(0.5, 3.0).waits(), 6)) == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert Backoff(1.0, 30.0).after(20.0) == 30.0


def test_a_cool_down_rests_its_seconds_then_lets_one_probe_through() -> None:
    clock = ManualMonotonic()
    rest = CoolDown(5.0, clock)
    assert not rest.resting()
    rest.start()
    clock.advance(4.9)
    assert rest.resting()
    clock.advance(0.1)
    assert not rest.resting()
    rest.start()  # the probe failed: rest again
    assert rest.resting()
    rest.clear()
    assert not rest.resting()
