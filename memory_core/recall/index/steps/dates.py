"""Time: a question made of a time alone ranks that time's turns by date
(`DATED_ONLY`); a question naming a time lifts the chunks of that time, or whose words
speak of it (`TIME`, `rerank.time_factor`: a boost, not a filter, dates are
misremembered)."""

from __future__ import annotations

from memory_core.recall.index.rerank import time_factor
from memory_core.recall.index.steps.run import Measure, Ranking, RankRun, Step


def dated_only(ranking: Ranking) -> bool:
    """A question made of a time alone ranks the turns of that time by date."""
    return not ranking.terms and ranking.window is not None


def _dated_only(run: RankRun) -> None:
    if dated_only(run.ranking):
        for c in run.candidates:
            c.base = 1.0


def _time(run: RankRun) -> None:
    """Every kept candidate's factor starts with its time's (`steps.reach` then leaves
    out the weak ones no time lifted)."""
    ranking = run.ranking
    settings = run.settings
    for c in run.kept:
        c.factor = time_factor(c.created_at, ranking.window, ranking.zone, settings, c.dates)


DATED_ONLY = Step("dated only", _dated_only, (), Measure.BASE)
TIME = Step("time", _time, ("time_boost", "spoken_time_boost", "time_near_days"), Measure.FACTOR)
