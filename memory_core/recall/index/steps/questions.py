"""Questions: a turn ending in a question ("Did you bake for the party?") shares the
words of what it asks about, and the answer is another turn's: it weighs
`question_factor` (`rerank.asks`)."""

from __future__ import annotations

from memory_core.recall.index.rerank import asks
from memory_core.recall.index.steps.run import Measure, RankRun, Step


def _questions(run: RankRun) -> None:
    factor = run.settings.question_factor
    for c in run.weighed:
        if asks(c):
            c.factor *= factor


QUESTIONS = Step("questions", _questions, ("question_factor",), Measure.FACTOR)
