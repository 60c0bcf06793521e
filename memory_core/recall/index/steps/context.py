"""Context window: a turn scores its own fused score plus shares of its neighbours'
(`rerank.spread_context`); a turn scored with its exchange adds nothing more."""

from __future__ import annotations

from memory_core.recall.index.rerank import spread_context
from memory_core.recall.index.steps.run import Measure, RankRun, Step


def _context(run: RankRun) -> None:
    spread_context(run.pool, run.settings.context_weights)


CONTEXT = Step("context", _context, ("context_weights",), Measure.SCORE, since=Measure.BASE)
