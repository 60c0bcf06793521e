"""Replies: a question and its reply form one exchange, and the hit belongs to the reply
(`hand_to_replies`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from memory_core.base.text import tokenize
from memory_core.recall.index.ranking import bm25_scorer
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate
from memory_core.recall.index.steps.run import Measure, RankRun, Step
from memory_core.recall.index.steps.speakers import names

_SENTENCE = re.compile(r"[^.!?。！？\n]*[.!?。！？\n]*")
QUESTION_KEEPS = 0.8
"""Share of its score a question keeps once its reply took it (a question can also hold
what was asked about; below 0.7 and above 0.9 measured the same or worse)."""


def asked_part(body: str) -> str:
    """The sentences of a turn that ask something (end with a question mark)."""
    if "?" not in body and "？" not in body:
        return ""
    return " ".join(s for s in _SENTENCE.findall(body) if s.rstrip().endswith(("?", "？")))


def reply_to(c: Candidate, pool: Mapping[int, Candidate]) -> Candidate | None:
    """The turn right after `c` in its conversation, said by someone else."""
    for distance, other in c.neighbours:
        o = pool[other]
        if distance == 1 and o.line_from > c.line_from and o.speaker != c.speaker:
            return o
    return None


def hand_to_replies(
    pool: Mapping[int, Candidate],
    text_score: Callable[[str], float],
    named: frozenset[str] = frozenset(),
) -> None:
    """A question and its reply form one exchange, and the hit belongs to the reply.

    "What kind of counseling do you want to pursue?" shares the query's words; the answer
    is the other speaker's next turn, which often shares none. When the asking sentences
    of a turn hold at least half its words' score, its reply takes the turn's score (if
    higher than its own) and the question keeps `QUESTION_KEEPS` of it; a turn that
    states something and ends with "how about you?" keeps its rank. Only turns whose
    neighbours were read (the best ones) can hand on.

    A question asked by the person the query names (`named`, see `steps.speakers`)
    keeps its rank when someone else replies: "Which language is Tim learning?" wants
    Tim's "I'm learning German now - do you know any other languages?", not John's
    answer about his Spanish (public conversations, frac@5 0.686 → 0.689)."""
    moves: list[tuple[Candidate, Candidate]] = []
    for c in pool.values():
        if c.kind not in CONVERSATION_KINDS or c.lexical <= 0 or not c.neighbours:
            continue
        asked = asked_part(c.body)
        if not asked:
            continue
        reply = reply_to(c, pool)
        if reply is None or reply.score >= c.score:
            continue
        if named and names(c, named) and not names(reply, named):
            continue
        if text_score(" ".join(tokenize(asked))) < 0.5 * text_score(c.tokens):
            continue
        moves.append((reply, c))
    for reply, question in moves:
        if question.score > reply.score:
            reply.score = question.score
            reply.lent = (question.id, question.score)
    for _, question in moves:
        question.score *= QUESTION_KEEPS


def _replies(run: RankRun) -> None:
    if run.settings.reply_anchors:
        ranking = run.ranking
        hand_to_replies(
            run.pool,
            bm25_scorer(ranking.terms, ranking.stats, ranking.k1, ranking.b),
            ranking.speaker_terms,
        )


REPLIES = Step("replies", _replies, ("reply_anchors",), Measure.SCORE)
