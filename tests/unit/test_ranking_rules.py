"""Recall's ranking, one rule per test: the neighbour window, time references, keyword
selection, fusion, priors as score terms, the file fallback's agreement with the index,
the session recall cache, the current session left out, and the kind of question
deciding how many hits are injected.

Pure steps are tested on hand-made candidates; everything touching storage runs on a
real core (SQLite index and workspace files, no model)."""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN
from memory_core.base.text import estimate_tokens, tokenize
from memory_core.config import Config
from memory_core.conversation.archive import render_raw
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.cache import RecallCache
from memory_core.recall.index import CorpusStats, Hit, SearchIndex
from memory_core.recall.index.pipeline import HEADING_FACTOR, Ranking, rank
from memory_core.recall.index.ranking import ideal_score, select_terms
from memory_core.recall.index.rerank import (
    Candidate,
    RankSettings,
    confidence,
    diversify,
    fuse,
    prior_factor,
    spread_context,
    time_factor,
)
from memory_core.recall.query import BUDGETS, QueryType, build_query, classify_query
from memory_core.storage.sessions import ArchiveState, StoredMessage
from tests.conftest import START
from tests.support import bm25_score, database, index_message, index_of
from tests.support import candidate as make

pytestmark = pytest.mark.storage

TODAY = START.date()
NEUTRAL = RankSettings(
    context_weights=(),
    recency_boost=0.0,
    long_term_boost=0.0,
    summary_factor=1.0,
    duplicate_similarity=1.01,
    answer_boost=0.0,
)
"""Every step after BM25 off: no neighbours, no priors, no near-copy removal, no lift for
the wanted kind of answer."""


def with_recall(config: Config, **update: Any) -> Config:
    return config.model_copy(update={"recall": config.recall.model_copy(update=update)})


@pytest.fixture
async def no_window(config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    """A core whose turns are scored alone (`recall.context_window = []`)."""
    async with MemoryCore.open(with_recall(config, context_window=[]), clock=clock) as core:
        yield core


def texts(hits: Sequence[Hit]) -> list[str]:
    return [h.text for h in hits]


def write(core: MemoryCore, relative: str, text: str) -> None:
    path = core.workspace.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def files_search(core: MemoryCore, query: str, **kw: Any) -> list[Hit]:
    """The degraded path's ranking, with the index's settings and the core's day."""
    return fallback.search_files(
        core.workspace, MAIN, query, settings=index_of(core).rank_settings, today=TODAY, **kw
    )


# --- the neighbour window ---------------------------------------------------------------

Turn = tuple[str, str, str]
"""(role, speaker, text)"""


@dataclass(frozen=True)
class Talk:
    question: str
    answer: str
    """Shares no word with the question; the turn before it does."""
    talk: list[Turn]
    noise: list[Turn]


TALKS: dict[str, Talk] = {
    "en": Talk(
        question="How long have I been playing the cello?",
        answer="Five years already!",
        talk=[
            ("user", "Mia", "Guess what, I tuned the cello by myself today"),
            ("assistant", "Bot", "Nice! How long have you been playing the cello?"),
            ("user", "Mia", "Five years already!"),
            ("assistant", "Bot", "That shows in your tuning."),
        ],
        noise=[
            ("user", "Mia", "My neighbour plays the cello far too loud at night"),
            ("assistant", "Bot", "Maybe have a word with them in the morning."),
            ("user", "Mia", "The cello concert tickets sold out in an hour"),
            ("assistant", "Bot", "There is a second date in April."),
            ("user", "Mia", "I need to renew my passport before summer"),
            ("assistant", "Bot", "The office opens at nine on weekdays."),
        ],
    ),
    "zh": Talk(
        question="我学大提琴多久了来着？",
        answer="已经五年了！",
        talk=[
            ("user", "小美", "今天我自己给大提琴调了音"),
            ("assistant", "助手", "真棒！你学大提琴多久了？"),
            ("user", "小美", "已经五年了！"),
            ("assistant", "助手", "难怪调得这么准。"),
        ],
        noise=[
            ("user", "小美", "邻居晚上拉大提琴太吵了"),
            ("assistant", "助手", "可以早上和他们商量一下。"),
            ("user", "小美", "大提琴音乐会的票一小时就卖光了"),
            ("assistant", "助手", "四月还有一场加演。"),
            ("user", "小美", "夏天之前要去换护照"),
            ("assistant", "助手", "出入境大厅工作日九点开门。"),
        ],
    ),
}


def recorded(turns: Sequence[Turn], start: datetime) -> list[RecordedMessage]:
    return [
        RecordedMessage(role, speaker, text, start + timedelta(minutes=n))
        for n, (role, speaker, text) in enumerate(turns)
    ]


async def record_talks(core: MemoryCore, language: str) -> None:
    data = TALKS[language]
    noise = data.noise
    for number in range(0, len(noise), 2):
        start = START - timedelta(days=2 + number)
        await core.record_session(
            MAIN, f"noise-{number}", start, recorded(noise[number : number + 2], start)
        )
    start = START - timedelta(days=10)
    await core.record_session(MAIN, "cello", start, recorded(data.talk, start))


def archived(turns: Sequence[Turn], day: date) -> str:
    """The file the archiver writes for a day of conversation (verbatim turns)."""
    start = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=19)
    messages = [
        StoredMessage(
            id=n + 1,
            scope=MAIN.value,
            session_id="archived",
            role=role,
            speaker=speaker,
            content=text,
            created_at=start + timedelta(minutes=n),
            archived=ArchiveState.TRUE,
            archive_attempts=0,
            archive_next_at=None,
            compacted=False,
            meta={},
        )
        for n, (role, speaker, text) in enumerate(turns)
    ]
    return render_raw(day, messages, UTC)


async def archive_talks(core: MemoryCore, language: str) -> None:
    data = TALKS[language]
    noise = data.noise
    for number in range(0, len(noise), 2):
        day = TODAY - timedelta(days=2 + number)
        text = archived(noise[number : number + 2], day)
        write(core, f"memory/{day.isoformat()}-noise-{number}.md", text)
    day = TODAY - timedelta(days=10)
    write(core, f"memory/{day.isoformat()}-cello.md", archived(data.talk, day))
    await index_of(core).sync_scope(MAIN)


def shows(hits: Sequence[Hit], text: str) -> bool:
    return any(text in line for h in hits for line in h.text.splitlines())


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_answer_found_through_its_question_in_session_history(
    core: MemoryCore, language: str
) -> None:
    """'Five years already!' shares no word with the question; the turn above it does."""
    data = TALKS[language]
    await record_talks(core, language)
    assert not set(tokenize(data.answer)) & set(build_query(data.question).terms)
    hits = await core.finder.search(MAIN, data.question, limit=3)
    assert shows(hits, data.answer)
    # The exchange is anchored on the reply, not on the question that shares the words.
    shown = hits[0]
    assert shown.path == "sessions/cello" and shown.kind is ChunkKind.MESSAGE
    assert shown.anchor is not None
    anchored = (await core.finder.read(MAIN, shown.path, shown.anchor, 1)).text
    assert data.answer in anchored and data.talk[1][2] not in anchored
    # The hit spans the exchange, so memory_get reads what it showed.
    read = await core.finder.read(
        MAIN, shown.path, shown.line_from, shown.line_to - shown.line_from + 1
    )
    assert data.answer in read.text
    # And through recall in a later session, injected into the block.
    injection = await core.finder.recall(MAIN, data.question, session_id="later")
    assert shows(injection.hits[:3], data.answer)
    carrier = next(h for h in injection.hits if data.answer in h.text)
    assert carrier.confidence >= 0.5  # shown, not only pointed at
    assert data.answer in injection.block


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_without_the_window_the_answer_is_not_found_in_session_history(
    no_window: MemoryCore, language: str
) -> None:
    data = TALKS[language]
    await record_talks(no_window, language)
    hits = await no_window.finder.search(MAIN, data.question, limit=20)
    assert hits and not shows(hits, data.answer)
    assert all(len(h.text.splitlines()) == 1 for h in hits)  # lone turns


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("path", ["index", "files"])
async def test_answer_found_through_its_question_in_archived_files(
    core: MemoryCore, language: str, path: str
) -> None:
    data = TALKS[language]
    await archive_talks(core, language)
    if path == "files":
        core.guard.failed(RuntimeError("test: search the files"))
    hits = await core.finder.search(MAIN, data.question, limit=3)
    assert shows(hits, data.answer)
    shown = hits[0]  # anchored on the reply, not on the question sharing the words
    assert shown.kind is ChunkKind.ARCHIVE_RAW and shown.path.endswith("-cello.md")
    lines = (core.workspace.root / shown.path).read_text(encoding="utf-8").splitlines()
    assert any(data.answer in line for line in lines[shown.line_from - 1 : shown.line_to])
    assert shown.anchor is not None and data.answer in lines[shown.anchor - 1]


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("path", ["index", "files"])
async def test_without_the_window_the_answer_is_not_found_in_archived_files(
    no_window: MemoryCore, language: str, path: str
) -> None:
    data = TALKS[language]
    await archive_talks(no_window, language)
    if path == "files":
        no_window.guard.failed(RuntimeError("test: search the files"))
    hits = await no_window.finder.search(MAIN, data.question, limit=20)
    assert hits and not shows(hits, data.answer)


def test_spread_context_adds_shares_of_the_neighbours_scores() -> None:
    pool = {i: make(i, f"turn {i}", kind=ChunkKind.MESSAGE) for i in range(1, 5)}
    for c, base in zip(pool.values(), (4.0, 0.0, 2.0, 8.0), strict=True):
        c.base = base
    link(pool, 1, 2, 1)
    link(pool, 2, 3, 1)
    link(pool, 1, 3, 2)
    link(pool, 3, 4, 1)
    spread_context(pool, (0.5, 0.25))
    assert pool[2].score == pytest.approx(0.0 + 0.5 * 4.0 + 0.5 * 2.0)
    assert pool[1].score == pytest.approx(4.0 + 0.5 * 0.0 + 0.25 * 2.0)
    assert pool[3].score == pytest.approx(2.0 + 0.5 * 0.0 + 0.25 * 4.0 + 0.5 * 8.0)
    spread_context(pool, ())
    assert [c.score for c in pool.values()] == [4.0, 0.0, 2.0, 8.0]


# --- time references: a boost in both languages ------------------------------------------

HIKES = {
    "en": (
        "went hiking at Mount Tai with Leo",
        "went hiking at Yellow Mountain with Leo",
        "Where did I go hiking in May 2025?",
        "Where did I go hiking in August 2025?",
        "Where did I go hiking?",
    ),
    "zh": (
        "和小李去泰山爬山",
        "和小李去黄山爬山",
        "去年五月我去哪里爬山了？",
        "去年八月我去哪里爬山了？",
        "我去哪里爬山了？",
    ),
}


async def write_hikes(core: MemoryCore, language: str) -> tuple[str, str]:
    may, august, *_ = HIKES[language]
    for number in range(6):
        await core.notes.append(
            MAIN, f"unrelated chore {number}", now=START - timedelta(days=30 + number)
        )
    await core.notes.append(MAIN, may, now=datetime(2025, 5, 10, 9, tzinfo=UTC))
    await core.notes.append(MAIN, august, now=datetime(2025, 8, 16, 9, tzinfo=UTC))
    return may, august


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_the_named_time_ranks_its_turn_first(core: MemoryCore, language: str) -> None:
    may, august, in_may, in_august, undated = HIKES[language]
    await write_hikes(core, language)
    # Without a time the newer one leads (recency), so the May answer is the time's doing.
    assert texts(await core.finder.search(MAIN, undated))[:2] == [august, may]
    assert texts(await core.finder.search(MAIN, in_may))[:2] == [may, august]  # a boost, no filter
    assert texts(await core.finder.search(MAIN, in_august))[:2] == [august, may]
    # The degraded path reads the same window.
    assert texts(files_search(core, in_may))[:2] == [may, august]
    # Automatic recall as well.
    assert texts((await core.finder.recall(MAIN, in_may)).hits)[:1] == [may]


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("what did I note yesterday?", TODAY - timedelta(days=1)),
        ("前天我记了什么", TODAY - timedelta(days=2)),
    ],
)
async def test_a_question_of_a_time_alone_lists_that_time(
    core: MemoryCore, question: str, day: date
) -> None:
    """No word of the question is in any memory: the notes of that time are the hits."""
    for back in range(4):
        when = datetime.combine(TODAY - timedelta(days=back), datetime.min.time(), tzinfo=UTC)
        for hour in (9, 15):
            await core.notes.append(MAIN, f"errand {back}-{hour}", now=when + timedelta(hours=hour))
    hits = await core.finder.search(MAIN, question)
    assert [h.created_at.date() for h in hits if h.created_at] == [day, day]
    back = (TODAY - day).days
    assert sorted(texts(hits)) == [f"errand {back}-15", f"errand {back}-9"]
    assert texts(files_search(core, question)) == texts(hits)


def test_time_factor_inside_near_and_outside_the_window() -> None:
    settings = RankSettings()
    window = (date(2026, 2, 18), date(2026, 2, 18))

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text)

    assert time_factor(at("2026-02-18T12:00:00+00:00"), window, UTC, settings) == 2.0
    assert time_factor(at("2026-02-21T12:00:00+00:00"), window, UTC, settings) == 1.5
    assert time_factor(at("2026-02-22T12:00:00+00:00"), window, UTC, settings) == 1.0
    assert time_factor(at("2026-02-14T12:00:00+00:00"), window, UTC, settings) == 1.0
    assert time_factor(None, window, UTC, settings) == 1.0
    assert time_factor(at("2026-02-18T12:00:00+00:00"), None, UTC, settings) == 1.0
    # The local date counts: 20:00 UTC on the 17th is the 18th in Shanghai.
    evening = at("2026-02-17T20:00:00+00:00")
    assert time_factor(evening, window, UTC, settings) == 1.5
    assert time_factor(evening, window, ZoneInfo("Asia/Shanghai"), settings) == 2.0
    off = RankSettings(time_boost=0.0)
    assert time_factor(at("2026-02-18T12:00:00+00:00"), window, UTC, off) == 1.0


def test_a_turn_speaking_of_the_day_is_lifted_more_than_one_made_that_day() -> None:
    """ "Yesterday I went bowling", said on the 19th, witnesses the 18th more surely than
    whatever was said on the 18th."""
    settings = RankSettings(time_boost=1.0, spoken_time_boost=1.5)
    window = (date(2026, 2, 18), date(2026, 2, 18))
    made_then = datetime(2026, 2, 18, 12, tzinfo=UTC)
    next_day = datetime(2026, 2, 19, 12, tzinfo=UTC)
    spoken = ((date(2026, 2, 18), date(2026, 2, 18)),)
    assert time_factor(made_then, window, UTC, settings) == 2.0
    assert time_factor(next_day, window, UTC, settings, spoken) == 2.5
    # Speaking of a day near the window is no surer than being made near it.
    near = ((date(2026, 2, 20), date(2026, 2, 20)),)
    assert time_factor(datetime(2026, 3, 1, tzinfo=UTC), window, UTC, settings, near) == 1.5
    # The surer lift never falls below the plain one.
    low = RankSettings(time_boost=2.0, spoken_time_boost=0.5)
    assert time_factor(next_day, window, UTC, low, spoken) == 3.0


# --- keyword selection ------------------------------------------------------------------

NOISE = [
    "office",
    "lunch",
    "team",
    "budget",
    "weather",
    "traffic",
    "coffee",
    "meeting",
    "email",
    "printer",
    "parking",
    "train",
    "laptop",
    "report",
    "deadline",
    "slides",
    "client",
    "invoice",
    "desk",
    "calendar",
]


async def test_informative_terms_win_over_early_ones_in_a_long_message(
    core: MemoryCore,
) -> None:
    rng = random.Random(3)
    for number in range(40):
        await core.notes.append(MAIN, " ".join(rng.sample(NOISE, 5)) + f" {number}")
    answer = "Dr. Okafor at the corner vet clinic treated Biscuit"
    await core.notes.append(MAIN, answer, now=START - timedelta(days=12))
    message = (
        "Long day: " + ", ".join(NOISE) + ", all of it. Anyway, which vet treated Biscuit again?"
    )
    query = build_query(message, today=TODAY)
    assert len(query.terms) > 16 and "biscuit" not in list(query.terms)[:16]
    hits = await core.finder.search(MAIN, message, limit=5)
    assert texts(hits)[0] == answer
    injection = await core.finder.recall(MAIN, message)
    assert texts(injection.hits)[0] == answer


def test_select_terms_by_idf_times_weight() -> None:
    stats = CorpusStats(
        docs=100, avg_len=5.0, doc_freq={"common": 60, "mid": 20, "rare": 2, "ctx": 1}
    )
    terms = {"common": 1.0, "mid": 1.0, "absent": 1.0, "rare": 1.0, "ctx": 0.1}
    assert list(select_terms(terms, stats, 2)) == ["rare", "mid"]
    assert list(select_terms(terms, stats, 10)) == ["rare", "mid", "common", "ctx"]
    assert select_terms(terms, stats, 0) == {}
    assert select_terms({"ctx": 0.0}, stats, 5) == {}


async def test_single_han_characters_are_kept(core: MemoryCore) -> None:
    """'画' is one character and the question's only verb: it must stay a term."""
    query = build_query("什么时候画了一幅日出", today=TODAY)
    assert "画" in query.terms and "时候" not in query.terms
    for number in range(6):
        await core.notes.append(MAIN, f"整理房间 {number}", now=START - timedelta(days=3))
    painted = "周日在阳台画日出"
    watched = "周六在海边看日出"
    await core.notes.append(MAIN, painted, now=START - timedelta(days=10))
    await core.notes.append(MAIN, watched)  # newer: recency alone would put it first
    assert texts(await core.finder.search(MAIN, "什么时候画了一幅日出"))[:2] == [painted, watched]


async def test_question_template_words_are_dropped(core: MemoryCore) -> None:
    """'When did I say…' must not match every note where someone said something."""
    query = build_query("when did I say I liked that sushi place?", today=TODAY)
    assert not {"say", "said", "when"} & set(query.terms)
    assert {"sushi", "place"} <= set(query.terms)
    for text in (
        "Mom said she would call on Sunday",
        "Tom said the printer is broken again",
        "Lisa said the train was late",
        "Dad said hi from Lisbon",
    ):
        await core.notes.append(MAIN, text)
    sushi = "the sushi place on Fifth Street was great"
    await core.notes.append(MAIN, sushi, now=START - timedelta(days=20))
    hits = await core.finder.search(MAIN, "when did I say I liked that sushi place?", limit=10)
    assert texts(hits) == [sushi]
    zh = build_query("我什么时候说过喜欢那家寿司店？", today=TODAY)
    assert not {"说过", "时候", "什么时候"} & set(zh.terms)


# --- fusion (pure) ----------------------------------------------------------------------


def link(pool: dict[int, Candidate], a: int, b: int, distance: int) -> None:
    pool[a].neighbours.append((distance, b))
    pool[b].neighbours.append((distance, a))


def test_bm25_only_is_unchanged_without_dense_scores() -> None:
    candidates = [make(i, f"t {i}", lexical=x) for i, x in enumerate((3.5, 0.0, 1.25))]
    for fusion in ("rrf", "weighted"):
        fuse(candidates, RankSettings(fusion=fusion))
        assert [c.base for c in candidates] == [3.5, 0.0, 1.25]


def test_reciprocal_rank_fusion() -> None:
    a = make(1, "a", lexical=3.0)
    b = make(2, "b", lexical=2.0, dense=0.9)
    c = make(3, "c", dense=0.8)  # no shared word: found by meaning alone
    d = make(4, "d", lexical=1.0, dense=0.1)
    settings = RankSettings(fusion="rrf", dense_weight=0.5, rrf_k=60)
    fuse([a, b, c, d], settings)
    k = 60

    def rrf(lex: int | None, dense: int | None) -> float:
        total = 0.5 / (k + lex) if lex else 0.0
        total += 0.5 / (k + dense) if dense else 0.0
        return total * (k + 1)

    assert a.base == pytest.approx(rrf(1, None))
    assert b.base == pytest.approx(rrf(2, 1))
    assert c.base == pytest.approx(rrf(None, 2))
    assert d.base == pytest.approx(rrf(3, 3))
    assert sorted((a, b, c, d), key=lambda x: -x.base)[0] is b  # in both lists
    both_first = [make(1, "x", lexical=1.0, dense=0.9), make(2, "y", lexical=0.5, dense=0.2)]
    fuse(both_first, settings)
    assert both_first[0].base == pytest.approx(1.0)  # first in both lists scores 1


def test_weighted_fusion_normalises_each_list() -> None:
    a = make(1, "a", lexical=4.0, dense=0.2)
    b = make(2, "b", lexical=1.0, dense=0.8)
    c = make(3, "c", dense=-0.3)
    fuse([a, b, c], RankSettings(fusion="weighted", dense_weight=0.25))
    assert a.base == pytest.approx(0.75 * 1.0 + 0.25 * 0.2 / 0.8)
    assert b.base == pytest.approx(0.75 * 0.25 + 0.25 * 1.0)
    assert c.base == 0.0  # a negative similarity is no evidence
    fuse([a, b, c], RankSettings(fusion="weighted", dense_weight=1.0))
    assert [a.base, b.base] == pytest.approx([0.25, 1.0])


def ranking(terms: dict[str, float], **settings: Any) -> Ranking:
    stats = CorpusStats(docs=20, avg_len=3.0, doc_freq={t: 2 for t in terms})
    return Ranking(terms, stats, None, TODAY, UTC, RankSettings(**settings))


def test_rank_keeps_a_dense_only_hit_and_min_score_bounds_the_words() -> None:
    """min_score drops weak lexical evidence, unless the vectors vouch for the hit."""
    r = ranking({"tea": 1.0}, recency_boost=0.0)
    weak = 0.1
    pool = {
        1: make(1, "green tea", lexical=2.0),
        2: make(2, "weak tea mention", lexical=weak),
        3: make(3, "a cup of sencha", dense=0.9),
        4: make(4, "weak tea but similar", lexical=weak, dense=0.5),
        5: make(5, "nothing at all"),
    }
    hits = rank(pool, r, limit=10, min_score=0.2)
    assert sorted(h.text for h in hits) == ["a cup of sencha", "green tea", "weak tea but similar"]
    assert {h.text: h.confidence for h in hits}["a cup of sencha"] == 1.0
    everything = rank(pool, r, limit=10, min_score=0.0)
    assert "weak tea mention" in texts(everything) and "nothing at all" not in texts(everything)


def test_a_rare_term_keeps_its_holders_among_chunks_that_only_read_alike() -> None:
    """A term of the question held by a single chunk names it: dense scores of chunks
    that merely read alike neither push it out of the results nor get it dropped as
    their near-copy. Such holders take at most half the slots; words of recent messages
    (weight below 1) pin nothing."""
    said = "the user said that we watched a film about whales and the code is"
    stats = CorpusStats(docs=300, avg_len=12.0, doc_freq={"code": 300, "zq7x": 1, "kizaqo": 1})
    pool = {i: make(i, f"{said} n{i}", lexical=0.1, dense=0.8) for i in range(1, 41)}
    pool[99] = make(99, f"{said} zq7x", lexical=3.0, dense=0.3)
    pool[98] = make(98, f"{said} kizaqo", lexical=3.0, dense=0.3)
    settings = RankSettings(recency_boost=0.0)

    def ranked(terms: dict[str, float], limit: int) -> list[str]:
        r = Ranking(terms, stats, None, TODAY, UTC, settings)
        return texts(rank(dict(pool), r, limit=limit))

    assert f"{said} zq7x" in ranked({"code": 1.0, "zq7x": 1.0}, 5)
    assert f"{said} zq7x" in ranked({"code": 1.0, "zq7x": 1.0}, 40)  # no near-copy drop
    both = ranked({"code": 1.0, "zq7x": 1.0, "kizaqo": 1.0}, 3)
    assert len(both) == 3 and f"{said} zq7x" in both and f"{said} kizaqo" in both
    assert len(ranked({"zq7x": 1.0, "kizaqo": 1.0}, 1)) == 1
    assert f"{said} zq7x" not in ranked({"code": 1.0, "zq7x": 0.5}, 5)


def test_heading_only_chunks_are_damped() -> None:
    r = ranking({"conversation": 1.0}, recency_boost=0.0)
    pool = {
        1: make(1, "# 2026-03-02 conversation", kind=ChunkKind.ARCHIVE_RAW, lexical=2.0),
        2: make(2, "Mia: what a conversation", kind=ChunkKind.ARCHIVE_RAW, lexical=2.0),
    }
    hits = rank(pool, r, limit=5)
    assert texts(hits) == ["Mia: what a conversation", "# 2026-03-02 conversation"]
    assert hits[1].score == pytest.approx(hits[0].score * HEADING_FACTOR)


def test_diversify_drops_near_copies_and_turns_already_shown() -> None:
    pool = {
        1: make(1, "Mia: the locker code is 4512", kind=ChunkKind.MESSAGE),
        2: make(2, "Bot: noted", kind=ChunkKind.MESSAGE),
        3: make(3, "Mia's locker code: 4512", kind=ChunkKind.DAILY),  # a near-copy of 1
        4: make(4, "locker moved to the second floor", kind=ChunkKind.DAILY),
    }
    link(pool, 1, 2, 1)
    ordered = [pool[1], pool[2], pool[3], pool[4]]

    def shown(c: Candidate) -> set[int]:
        return {c.id, *(o for d, o in c.neighbours if d == 1)}

    assert [c.id for c in diversify(ordered, 10, 0.8, shown)] == [1, 4]
    assert [c.id for c in diversify(ordered, 1, 0.8, shown)] == [1]
    assert [c.id for c in diversify(ordered, 10, 1.01)] == [1, 2, 3, 4]


def test_confidence_grows_with_the_score_against_the_ideal() -> None:
    stats = CorpusStats(docs=50, avg_len=4.0, doc_freq={"mochi": 2, "vet": 5})
    ideal = ideal_score({"mochi": 1.0, "vet": 1.0, "absent": 1.0}, stats)
    one_doc = bm25_score(["mochi", "vet"], ["mochi", "vet", "x", "y"], stats)
    assert one_doc == pytest.approx(ideal)  # both terms once, average length
    assert confidence(ideal, ideal) == pytest.approx(1 - math.exp(-1.6))
    assert confidence(0.0, ideal) == 0.0 and confidence(1.0, 0.0) == 0.0
    steps = [confidence(ideal * x, ideal) for x in (0.1, 0.5, 1.0, 2.0)]
    assert steps == sorted(steps) and steps[-1] < 1.0


# --- priors as score terms (pure) --------------------------------------------------------


def test_prior_factor_lifts_long_term_and_recent_and_cuts_summaries() -> None:
    settings = RankSettings()
    zone = UTC
    today = date(2026, 3, 1)

    def ago(days: float) -> datetime:
        return datetime(2026, 3, 1, 12, tzinfo=UTC) - timedelta(days=days)

    assert prior_factor(ChunkKind.DAILY, None, today, zone, settings) == 1.0
    assert prior_factor(ChunkKind.LONG_TERM, None, today, zone, settings) == pytest.approx(1.15)
    assert prior_factor(ChunkKind.SUMMARY, None, today, zone, settings) == pytest.approx(0.9)
    assert prior_factor(ChunkKind.DAILY, ago(0), today, zone, settings) == pytest.approx(1.1)
    assert prior_factor(ChunkKind.DAILY, ago(30), today, zone, settings) == pytest.approx(1.05)
    assert prior_factor(ChunkKind.DAILY, ago(60), today, zone, settings) == pytest.approx(1.025)
    assert prior_factor(ChunkKind.DAILY, ago(-3), today, zone, settings) == pytest.approx(1.1)
    assert prior_factor(ChunkKind.LONG_TERM, ago(0), today, zone, settings) == pytest.approx(1.25)
    assert prior_factor(ChunkKind.SUMMARY, ago(30), today, zone, settings) == pytest.approx(0.95)
    # Small factors: no prior more than doubles or halves a score.
    for kind in ChunkKind:
        for days in (0, 1, 400):
            assert 0.5 < prior_factor(kind, ago(days), today, zone, settings) < 2.0
    off = RankSettings(recency_boost=0.0, long_term_boost=0.0, summary_factor=1.0)
    for kind in ChunkKind:
        assert prior_factor(kind, ago(0), today, zone, off) == 1.0


def test_a_better_older_hit_beats_a_weak_recent_long_term_one() -> None:
    r = ranking({"ramen": 1.0, "broth": 1.0})
    fresh = datetime.combine(TODAY, datetime.min.time(), tzinfo=UTC)
    pool = {
        1: make(1, "likes ramen", kind=ChunkKind.LONG_TERM, lexical=1.0, created_at=fresh),
        2: make(2, "ramen broth recipe", lexical=2.0, created_at=fresh - timedelta(days=300)),
        3: make(3, "walked past ramen", lexical=1.0, created_at=fresh),
        4: make(4, "ramen tour notes", kind=ChunkKind.SUMMARY, lexical=1.0, created_at=fresh),
    }
    assert texts(rank(pool, r, limit=5)) == [
        "ramen broth recipe",
        "likes ramen",
        "walked past ramen",
        "ramen tour notes",
    ]


# --- without an embedder, and the file fallback -----------------------------------------


async def fill_mixed(core: MemoryCore) -> None:
    """Every kind of memory, dated over two months, conversations included."""
    await core.memories.capture(MAIN, "Mia drinks green tea without sugar", category="preference")
    await core.memories.capture(MAIN, "Mia's cat Mochi needs a vaccine every spring")
    for number, text in enumerate(
        (
            "bought jasmine tea at the market",
            "Mochi went to the vet for a check-up",
            "tea tasting with Leo, oolong was the best",
            "the vet said Mochi is healthy",
            "planned a trip to Lisbon in May",
        )
    ):
        await core.notes.append(MAIN, text, now=START - timedelta(days=number * 9))
    write(core, "memory/summary/2026-01.md", "# 2026-01\n\nTea and Mochi's vet visits.\n")
    day = TODAY - timedelta(days=4)
    write(core, f"memory/{day.isoformat()}-cello.md", archived(TALKS["en"].talk, day))
    # The captures' MEMORY.md write is staged: done now, not while a test reads the index.
    await core.memories.flush(MAIN)
    await index_of(core).sync_scope(MAIN)


MIXED_QUERIES = (
    "tea",
    "what tea does Mia like?",
    "Mochi vet",
    "How long have I been playing the cello?",
    "what did I buy at the market last month?",
    "vet in February",
    "上个月 tea",
)


async def test_without_an_embedder_scores_are_plain_bm25(core: MemoryCore) -> None:
    await fill_mixed(core)
    index = index_of(core)
    assert index.vectors is None
    plain = SearchIndex(database(core), core.workspace, rank_settings=NEUTRAL)
    rows = await database(core).read(
        lambda conn: conn.execute("SELECT tokens FROM chunks WHERE hidden = 0").fetchall()
    )
    corpus = [str(r[0]).split() for r in rows]
    stats = CorpusStats(
        docs=len(corpus),
        avg_len=sum(map(len, corpus)) / len(corpus),
        doc_freq={t: sum(t in set(d) for d in corpus) for d in corpus for t in d},
    )
    for words in (["tea"], ["mochi", "vet"], ["green", "tea", "sugar"]):
        hits = await plain.search(MAIN, words, limit=20, today=TODAY)
        assert hits
        for hit in hits:
            tokens = " ".join(tokenize(hit.text)).split()
            assert hit.score == pytest.approx(bm25_score(words, tokens, stats), abs=1e-9)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("query", MIXED_QUERIES)
async def test_files_and_index_rank_alike(core: MemoryCore, query: str) -> None:
    await fill_mixed(core)
    indexed = await core.finder.search(MAIN, query, limit=8)
    assert indexed, query
    core.guard.failed(RuntimeError("test: search the files"))
    degraded = await core.finder.search(MAIN, query, limit=8)
    assert [(h.path, h.line_from, h.line_to, h.text) for h in degraded] == [
        (h.path, h.line_from, h.line_to, h.text) for h in indexed
    ]
    assert [h.score for h in degraded] == pytest.approx([h.score for h in indexed], rel=1e-9)
    assert [h.confidence for h in degraded] == pytest.approx(
        [h.confidence for h in indexed], rel=1e-9
    )


# --- the recall cache ---------------------------------------------------------------------


class SearchCounter:
    """Counts the index searches recall makes (a cached recall makes none)."""

    def __init__(self, core: MemoryCore, monkeypatch: pytest.MonkeyPatch) -> None:
        index = index_of(core)
        real = index.search
        self.calls = 0

        async def counted(*args: Any, **kw: Any) -> list[Hit]:
            self.calls += 1
            return await real(*args, **kw)

        monkeypatch.setattr(index, "search", counted)


async def start_sessions(core: MemoryCore) -> None:
    """Notes that make 'kayak' a rare word, an earlier session and the current one."""
    for number in range(8):
        await core.notes.append(MAIN, f"unrelated chore {number}", now=START - timedelta(days=5))
    earlier = START - timedelta(days=2)
    await core.record_session(
        MAIN,
        "earlier",
        earlier,
        recorded([("user", "Mia", "my kayak is the red one in the shed")], earlier),
    )
    now = START - timedelta(minutes=5)
    await core.record_session(
        MAIN,
        "current",
        now,
        recorded([("user", "Mia", "let's plan the kayak trip")], now),
        status="open",
    )


WRITES: dict[str, Callable[[MemoryCore], Awaitable[object]]] = {
    "capture": lambda core: core.memories.capture(MAIN, "the kayak paddles are in the garage"),
    "append_daily": lambda core: core.notes.append(MAIN, "kayak roof rack ordered"),
    "message in another session": lambda core: core.record_session(
        MAIN,
        "another",
        START - timedelta(minutes=1),
        recorded([("user", "Leo", "my kayak has a leak")], START - timedelta(minutes=1)),
    ),
}


async def test_the_same_recall_again_is_served_from_the_cache(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await core.notes.append(MAIN, "bought a kayak last summer")
    await start_sessions(core)
    counter = SearchCounter(core, monkeypatch)
    question = "where is my kayak?"
    first = await core.finder.recall(MAIN, question, session_id="current")
    assert first.hits and counter.calls == 1
    again = await core.finder.recall(MAIN, question, session_id="current")
    assert again is first and counter.calls == 1
    # A message of the current session is already in the prompt: the cache stands.
    await index_message(core, MAIN, "current", 10_000, "Mia", "the kayak needs wax", START)
    assert await core.finder.recall(MAIN, question, session_id="current") is first
    assert counter.calls == 1
    # Another question, another session or other recent messages are other recalls.
    await core.finder.recall(MAIN, "kayak paddles?", session_id="current")
    await core.finder.recall(MAIN, question, session_id="other")
    await core.finder.recall(MAIN, question, ["the red kayak"], session_id="current")
    assert counter.calls == 4


@pytest.mark.parametrize("write_kind", list(WRITES))
async def test_a_write_to_the_scope_invalidates_the_cache(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch, write_kind: str
) -> None:
    await core.notes.append(MAIN, "bought a kayak last summer")
    await start_sessions(core)
    counter = SearchCounter(core, monkeypatch)
    question = "where is my kayak?"
    first = await core.finder.recall(MAIN, question, session_id="current")
    assert await core.finder.recall(MAIN, question, session_id="current") is first
    await WRITES[write_kind](core)
    fresh = await core.finder.recall(MAIN, question, session_id="current")
    assert counter.calls == 2 and fresh is not first
    assert len(fresh.hits) == len(first.hits) + 1  # and the new memory is in it


async def test_no_cache_when_it_is_turned_off(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with MemoryCore.open(with_recall(config, cache_minutes=0.0), clock=clock) as core:
        await core.notes.append(MAIN, "bought a kayak last summer")
        counter = SearchCounter(core, monkeypatch)
        for _ in range(3):
            await core.finder.recall(MAIN, "where is my kayak?", session_id="s")
        assert counter.calls == 3


def test_cache_entries_expire_and_need_their_mark() -> None:
    monotonic = ManualMonotonic()
    cache: RecallCache[str] = RecallCache(ttl_seconds=30 * 60, monotonic=monotonic)
    cache.put("k", (1, 0), "value")
    assert cache.get("k", (1, 0)) == "value"
    assert cache.get("k", (2, 0)) is None  # a write moved the mark
    assert cache.get("k", (1, 0)) is None  # and the stale entry is gone
    cache.put("k", (1, 0), "value")
    monotonic.advance(30 * 60 - 1)
    assert cache.get("k", (1, 0)) == "value"
    monotonic.advance(1)
    assert cache.get("k", (1, 0)) is None  # 30 minutes on
    cache.put("k", None, "value")  # no mark (no index): nothing is cached
    assert cache.get("k", None) is None
    small: RecallCache[int] = RecallCache(ttl_seconds=60, max_entries=2)
    for key in range(3):
        small.put(key, 0, key)
    assert [small.get(k, 0) for k in range(3)] == [None, 1, 2]


# --- the current session is left out -------------------------------------------------------


async def test_recall_leaves_out_the_current_session_only(core: MemoryCore) -> None:
    await start_sessions(core)
    question = "where is my kayak?"
    injection = await core.finder.recall(MAIN, question, session_id="current")
    paths = {h.path for h in injection.hits}
    assert "sessions/earlier" in paths and "sessions/current" not in paths
    assert "kayak trip" not in injection.block
    unbound = await core.finder.recall(MAIN, question)
    assert {"sessions/earlier", "sessions/current"} <= {h.path for h in unbound.hits}


# --- the kind of question decides how many hits ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("How long have I played the cello?", QueryType.PRECISE),
        ("What is my locker code?", QueryType.PRECISE),
        ("我学大提琴多久了？", QueryType.PRECISE),
        ("储物柜密码是多少", QueryType.PRECISE),
        ("What kinds of tea do I like?", QueryType.TOPIC),
        ("Which restaurants did Leo recommend?", QueryType.TOPIC),
        ("我有哪些爱好？", QueryType.TOPIC),
        ("最近都有什么计划", QueryType.TOPIC),
        ("Summarize everything we talked about", QueryType.BROAD),
        ("give me a recap of the trip", QueryType.BROAD),
        ("总结一下这段时间", QueryType.BROAD),
        ("回顾一下我们聊过的所有事", QueryType.BROAD),
    ],
)
def test_classify_query(text: str, kind: QueryType) -> None:
    assert classify_query(text) is kind
    assert build_query(text, today=TODAY).kind is kind


def test_budgets_retrieve_wide_and_inject_narrow() -> None:
    assert [BUDGETS[k].final for k in QueryType] == [8, 13, 18]
    for budget in BUDGETS.values():
        assert budget.retrieve > budget.rerank > budget.final


KINDS_OF_QUESTION = [
    ("how did the kubernetes upgrade go?", 8),
    ("what kinds of kubernetes upgrade steps are there?", 13),
    ("summarize everything about the kubernetes upgrade", 18),
    ("kubernetes 升级都有哪些步骤", 13),
    ("总结一下 kubernetes 升级", 18),
]


async def fill_upgrade_notes(core: MemoryCore) -> None:
    rng = random.Random(5)
    words = [w for w in NOISE if w not in ("report", "slides")]
    for number in range(60):
        await core.notes.append(MAIN, " ".join(rng.sample(words, 4)) + f" {number}")
    for number in range(30):
        await core.notes.append(
            MAIN, f"kubernetes 升级 upgrade step {number}: {' '.join(rng.sample(NOISE, 2))}"
        )


@pytest.mark.parametrize(("question", "count"), KINDS_OF_QUESTION)
async def test_the_kind_of_question_decides_how_many_hits(
    core: MemoryCore, question: str, count: int
) -> None:
    await fill_upgrade_notes(core)
    injection = await core.finder.recall(MAIN, question)
    assert len(injection.hits) == count
    assert len(injection.block.splitlines()) == count + 1
    assert injection.tokens <= core.config.recall.token_budget


@pytest.mark.parametrize(("question", "count"), KINDS_OF_QUESTION)
async def test_the_token_budget_bounds_the_count(
    config: Config, clock: ManualClock, question: str, count: int
) -> None:
    budget = 120
    async with MemoryCore.open(with_recall(config, token_budget=budget), clock=clock) as core:
        await fill_upgrade_notes(core)
        injection = await core.finder.recall(MAIN, question)
    assert 0 < len(injection.hits) < count
    assert injection.tokens == estimate_tokens(injection.block) <= budget
