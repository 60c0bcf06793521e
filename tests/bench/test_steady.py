"""vector_bench's "steady from" (testkit/steady.py): the first recall from which every later one
took at most 1.5 times the steady p50, the first recall of a start included."""

from __future__ import annotations

from testkit.steady import steady_point


def test_a_slow_first_recall_is_not_steady() -> None:
    """The case the old window median got wrong: asked at 0.33 s, it took 1.18 s; the
    ten recalls after it were fast. Steady starts with the recall after it."""
    samples = [(0.33 + 1.18, 1.18)] + [(1.6 + 0.1 * i, 0.02) for i in range(10)]
    assert steady_point(samples, p50=0.02) == 1.6 - 0.02


def test_a_slow_recall_later_moves_the_point_past_it() -> None:
    samples = [(1.0, 0.02), (2.0, 0.02), (3.0, 0.2), (4.0, 0.025), (5.0, 0.02)]
    assert steady_point(samples, p50=0.02) == 4.0 - 0.025


def test_never_steady_when_the_last_recall_is_slow() -> None:
    assert steady_point([(1.0, 0.02), (2.0, 0.5)], p50=0.02) is None
    assert steady_point([(1.0, 0.02)], p50=0.02) == 1.0 - 0.02
