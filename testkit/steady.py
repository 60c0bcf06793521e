"""When a restarted process's recalls reached their steady latency (bench/vector_bench.py).

Every recall counts, the first of the run included: a median over a window of 10
recalls once called a start steady at 0.33 s whose first recall took 1.18 s."""

from __future__ import annotations

from collections.abc import Sequence

STEADY_FACTOR = 1.5
"""A recall is steady when it takes at most this times the steady p50."""


def steady_point(samples: Sequence[tuple[float, float]], p50: float) -> float | None:
    """When the first recall was asked from which every later one of `samples` (each
    `(answered at, took)`, the recalls before the steady ones) took at most
    `STEADY_FACTOR` times the steady `p50`; None when the last one did not."""
    limit = STEADY_FACTOR * p50
    point: float | None = None
    for answered, took in reversed(samples):
        if took > limit:
            break
        point = answered - took  # when that recall was asked
    return point
