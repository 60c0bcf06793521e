"""Priors and recency: long-term entries a little up, summaries a little down, the recent
a little up (`rerank.prior_factor`). One step, because the kind's lift and the recency's
are one sum: a better older hit still wins over a weaker recent one."""

from __future__ import annotations

from memory_core.recall.index.rerank import prior_factor
from memory_core.recall.index.steps.run import Measure, RankRun, Step


def _priors(run: RankRun) -> None:
    ranking = run.ranking
    settings = run.settings
    for c in run.weighed:
        c.factor *= prior_factor(c.kind, c.created_at, ranking.today, ranking.zone, settings)


PRIORS = Step(
    "priors",
    _priors,
    ("long_term_boost", "summary_factor", "recency_boost", "recency_half_life_days"),
    Measure.FACTOR,
)
