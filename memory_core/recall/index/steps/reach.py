"""Reach: time and priors move a score by a bounded factor (at most ~1.4 without a time
in the question), so only the best candidates, those inside a named time and the holders
of a rare term can still reach the top `limit`: the rest are not weighed."""

from __future__ import annotations

from memory_core.recall.index.steps.run import RankRun, Step

PRIOR_REACH = 3
"""Candidates per result slot that time and priors are weighed for."""


def _reach(run: RankRun) -> None:
    last = run.limit * PRIOR_REACH + 10
    named = run.named
    run.weighed = [
        c
        for rank_, c in enumerate(run.kept)
        if not (rank_ >= last and c.factor <= 1 and c.id not in named)
    ]


REACH = Step("reach", _reach)
