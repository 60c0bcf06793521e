"""The expected-answer rule: a question's words say what shape of answer it wants, and a
candidate holding that shape is lifted a little, in English and in Chinese."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC

import pytest

from memory_core.base.answer_kind import AnswerKind, holds_answer, wanted_answer
from memory_core.base.chunks import ChunkKind
from memory_core.recall.index import CorpusStats
from memory_core.recall.index.pipeline import Ranking, rank
from memory_core.recall.index.rerank import RankSettings
from memory_core.recall.query import build_query
from tests.conftest import START
from tests.support import candidate


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When's my first day at the new place?", AnswerKind.DATE),
        ("what date is the wedding again", AnswerKind.DATE),
        ("How old is my son now?", AnswerKind.NUMBER),
        ("How long had I been at my old job when I left?", AnswerKind.NUMBER),
        ("Who's the doctor doing the surgery?", AnswerKind.NAME),
        ("What's the daycare called?", AnswerKind.NAME),
        ("Where did we eat on Valentine's?", AnswerKind.PLACE),
        ("你什么时候去北京？", AnswerKind.DATE),
        ("上次体检血压是多少？", AnswerKind.NUMBER),
        ("我女儿的钢琴老师叫什么来着？", AnswerKind.NAME),
        ("我们上次在哪儿吃的火锅？", AnswerKind.PLACE),
        ("What did the physio say about my knee?", None),
        ("最近心情怎么样", None),
    ],
)
def test_wanted_answer_by_the_earliest_question_word(
    question: str, kind: AnswerKind | None
) -> None:
    assert wanted_answer(question) is kind
    assert build_query(question).answer is kind


@pytest.mark.parametrize(
    ("kind", "text", "holds"),
    [
        (AnswerKind.DATE, "they moved it to saturday 5 September", True),
        (AnswerKind.DATE, "I fly out on the 10th", True),
        (AnswerKind.DATE, "改到下周三了", True),
        (AnswerKind.DATE, "婚礼定在5月20号", True),
        (AnswerKind.DATE, "ugh the farm double-booked us", False),
        (AnswerKind.NUMBER, "he'll be six soon", True),
        (AnswerKind.NUMBER, "142 over 91", True),
        (AnswerKind.NUMBER, "她今年两岁了", True),
        (AnswerKind.NUMBER, "it went fine", False),
        (AnswerKind.NAME, "his cardiologist is Dr. Deshpande at Ruby Hall", True),
        (AnswerKind.NAME, "我用的是Notion做笔记", True),
        (AnswerKind.NAME, "钢琴老师姓王", True),
        (AnswerKind.NAME, "I think so, yes", False),
        (AnswerKind.PLACE, "we went to that place in Ancoats", True),
        (AnswerKind.PLACE, "好的，明白了", False),
        (AnswerKind.PLACE, "在春熙路那家店", True),
    ],
)
def test_holds_answer(kind: AnswerKind, text: str, holds: bool) -> None:
    assert holds_answer(kind, text) is holds


def test_the_turn_holding_the_wanted_answer_is_lifted_above_an_equal_one() -> None:
    """Two turns match the question's words equally; the one with a date wins a "when"
    question, by exactly the configured factor, and only for a "when" question."""
    pool = {
        1: candidate(1, "Maya: the wedding is at the farm", kind=ChunkKind.MESSAGE, lexical=1.0),
        2: candidate(
            2, "Maya: the wedding moved to 5 September", kind=ChunkKind.MESSAGE, lexical=1.0
        ),
    }
    settings = RankSettings(context_weights=(), recency_boost=0.0, answer_boost=0.3)
    query = build_query("When is the wedding?")
    stats = CorpusStats(docs=10, avg_len=5.0, doc_freq={"wed": 2})
    ranking = Ranking(query.terms, stats, None, START.date(), UTC, settings, answer=query.answer)
    hits = rank(pool, ranking, limit=2)
    assert [h.text for h in hits] == [pool[2].text, pool[1].text]
    assert hits[0].score == pytest.approx(hits[1].score * 1.3)
    off = rank(
        {k: replace(c, neighbours=[]) for k, c in pool.items()},
        replace(ranking, settings=replace(settings, answer_boost=0.0)),
        limit=2,
    )
    assert off[0].score == pytest.approx(off[1].score)


def test_a_turns_own_time_and_speaker_are_no_answer() -> None:
    """'18:52:00 Maya: …' holds a time of day and a capitalised name in its prefix; only
    the words the speaker said count."""
    turn = candidate(1, "18:52:00 Maya: see you there", kind=ChunkKind.ARCHIVE_RAW)
    assert turn.body == "see you there"
    assert not holds_answer(AnswerKind.NUMBER, turn.body)
    assert not holds_answer(AnswerKind.NAME, turn.body)
