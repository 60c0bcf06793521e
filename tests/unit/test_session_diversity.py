"""Questions with several answers: which questions gather their answer from several
moments (`asks_for_several`), and the step that then ranks a session's later hits lower
(`diversify`'s `repeat`, `recall.session_repeat`), on hand-made candidates."""

from __future__ import annotations

from datetime import UTC, date, timedelta

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.config.memory import RecallSettings
from memory_core.engine import MemoryCore
from memory_core.recall.finder import rank_settings
from memory_core.recall.index import CorpusStats
from memory_core.recall.index.pipeline import Ranking, rank
from memory_core.recall.index.rerank import Candidate, RankSettings, diversify, session_of
from memory_core.recall.query import asks_for_several, build_query
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import candidate, index_message

TODAY = date(2026, 3, 1)
FIRST = "memory/scopes/s/2026-02-01-first.md"
SECOND = "memory/scopes/s/2026-02-09-second.md"


@pytest.mark.parametrize(
    "text",
    [
        "What desserts has Maria made?",
        "Which cities has John been to?",
        "What has Maria done to feel closer to her faith?",
        "How many times has Joanna's script been rejected?",
        "What shelters does Maria volunteer at?",
        "What are Joanna's hobbies?",
        "What type of volunteering have John and Maria both done?",
        "What hobbies have I picked up since New Year?",
        "What's gone wrong with the move, all told?",
        "为了减肥我都做了哪些改变",
        "从开始减肥到现在我一共掉了多少",
        "芝麻接下来还有哪些事要办",
    ],
)
def test_questions_gathering_several_moments(text: str) -> None:
    assert asks_for_several(text)
    assert build_query(text, today=TODAY).several


@pytest.mark.parametrize(
    "text",
    [
        "What did John recently get promoted to?",
        "What kind of frosting did Joanna use on the cake?",
        "When did Nate get Tilly for Joanna?",
        "Where does Joanna get her ideas for the characters from?",
        "What is my locker code?",
        "What has to be done before Friday?",
        "我学大提琴多久了？",
        "储物柜密码是多少",
    ],
)
def test_questions_for_one_fact(text: str) -> None:
    assert not asks_for_several(text)
    assert not build_query(text, today=TODAY).several


def turn(key: int, text: str, lexical: float, path: str) -> Candidate:
    c = candidate(key, text, kind=ChunkKind.ARCHIVE_RAW, lexical=lexical, path=path)
    c.score = lexical
    return c


def two_sessions() -> list[Candidate]:
    """Two turns of one session scoring above the other session's best."""
    return [
        turn(1, "Maria: I made banana split sundaes", 10.0, FIRST),
        turn(2, "John: did you make them yourself", 9.0, FIRST),
        turn(3, "Maria: I made a peach cobbler", 8.0, SECOND),
    ]


def test_a_sessions_second_hit_ranks_at_repeat_of_its_score() -> None:
    ranked = two_sessions()
    assert [c.id for c in diversify(ranked, 3, 1.01)] == [1, 2, 3]
    ranked = two_sessions()
    chosen = diversify(ranked, 3, 1.01, repeat=0.8)
    assert [c.id for c in chosen] == [1, 3, 2]
    assert [c.score for c in chosen] == pytest.approx([10.0, 8.0, 9.0 * 0.8])
    ranked = two_sessions()  # a session's later hit far ahead still comes first
    ranked[1].score = 9.9
    ranked[2].score = 6.0
    assert [c.id for c in diversify(ranked, 3, 1.01, repeat=0.8)] == [1, 2, 3]


def test_statements_have_no_session() -> None:
    entries = [
        candidate(i, f"entry {i}", kind=ChunkKind.LONG_TERM, path="memory/LONG_TERM.md")
        for i in (1, 2)
    ]
    assert session_of(entries[0]) is None
    assert session_of(two_sessions()[0]) == FIRST
    for c, score in zip(entries, (5.0, 4.0), strict=True):
        c.score = score
    chosen = diversify(entries, 2, 1.01, repeat=0.5)
    assert [c.score for c in chosen] == [5.0, 4.0]


def ranking(several: bool, repeat: float) -> Ranking:
    settings = RankSettings(
        context_weights=(),
        recency_boost=0.0,
        answer_boost=0.0,
        session_repeat=repeat,
    )
    stats = CorpusStats(docs=20, avg_len=5.0, doc_freq={"made": 4, "maria": 4})
    return Ranking({"made": 1.0}, stats, None, TODAY, UTC, settings, several=several)


def test_rank_spreads_only_a_question_asking_for_several() -> None:
    def anchors(several: bool, repeat: float) -> list[str]:
        pool = {c.id: c for c in two_sessions()}
        for c in pool.values():
            c.score = 0.0
        pool[1].lexical, pool[2].lexical, pool[3].lexical = 3.0, 2.8, 2.5
        hits = rank(pool, ranking(several, repeat), limit=2)
        return [h.path for h in hits]

    assert anchors(several=False, repeat=0.8) == [FIRST, FIRST]
    assert anchors(several=True, repeat=1.0) == [FIRST, FIRST]
    assert anchors(several=True, repeat=0.8) == [FIRST, SECOND]


def test_the_setting_reaches_the_ranking() -> None:
    assert RankSettings().session_repeat == RecallSettings().session_repeat
    assert rank_settings(RecallSettings(session_repeat=0.7)).session_repeat == 0.7


@pytest.mark.storage
async def test_a_list_question_gathers_answers_from_another_session(
    config: Config, clock: ManualClock
) -> None:
    """Through the index: one session talks of desserts at length, another names one in
    passing; "What desserts has Mia made?" shows both sessions, a question for one fact
    keeps the first session's turns."""
    recall = config.recall.model_copy(update={"session_repeat": 0.5, "context_window": []})
    talk = [
        ("party", "Mia: the dessert table was all my desserts, a sundae dessert bar"),
        ("party", "Mia: I made every dessert there, even the dessert cups"),
        ("party", "Mia: desserts and more desserts, I made them all night"),
        ("later", "Mia: I made a peach cobbler dessert yesterday"),
    ]
    async with MemoryCore.open(config.model_copy(update={"recall": recall}), clock=clock) as core:
        for i, (session, text) in enumerate(talk, start=1):
            speaker, said = text.split(": ", 1)
            await index_message(core, MAIN, session, i, speaker, said, START + timedelta(minutes=i))
        listed = await core.finder.search(
            MAIN, SearchRequest("What desserts has Mia made?", limit=2)
        )
        one = await core.finder.search(
            MAIN, SearchRequest("What dessert did Mia make at the party?", limit=2)
        )
    assert [h.path for h in listed] == ["sessions/party", "sessions/later"]
    assert [h.path for h in one] == ["sessions/party", "sessions/party"]
