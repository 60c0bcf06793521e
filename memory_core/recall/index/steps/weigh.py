"""Weigh: each weighed candidate's score is multiplied by its factor, the product of
the factor steps before this one (time, priors, claims, ...), in one multiplication."""

from __future__ import annotations

from memory_core.recall.index.steps.run import RankRun, Step


def _weigh(run: RankRun) -> None:
    for c in run.weighed:
        c.score *= c.factor


WEIGH = Step("weigh", _weigh)
