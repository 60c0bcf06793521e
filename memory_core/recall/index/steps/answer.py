"""The kind of answer: a chunk that is only a heading holds no answer (`HEADINGS`); one
holding the kind of answer the question wants (a date for "when", a number for "how
many") weighs (1 + `answer_boost`) (`ANSWER`, base/answer_kind.py)."""

from __future__ import annotations

from memory_core.base.answer_kind import holds_answer
from memory_core.recall.index.steps.run import Measure, RankRun, Step

HEADING_FACTOR = 0.2
"""A chunk that is only a heading ("# 2026-03-02 conversation") is found, but never above
a turn that matches as well: it holds no answer."""


def heading_only(text: str) -> bool:
    if not text.lstrip().startswith("#"):
        return False
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(line.lstrip().startswith("#") for line in lines)


def _headings(run: RankRun) -> None:
    for c in run.weighed:
        if heading_only(c.text):
            c.factor *= HEADING_FACTOR


def _answer(run: RankRun) -> None:
    answer = run.ranking.answer
    if answer is None:
        return
    boost = 1.0 + run.settings.answer_boost
    for c in run.weighed:
        if not heading_only(c.text) and holds_answer(answer, c.body, dated=bool(c.dates)):
            c.factor *= boost


HEADINGS = Step("headings", _headings, (), Measure.FACTOR)
ANSWER = Step("answer", _answer, ("answer_boost",), Measure.FACTOR)
