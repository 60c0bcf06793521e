"""Recall's ranking, one rule per test: the neighbour window, time references, keyword
selection, fusion, priors as score terms, the file fallback's agreement with the index,
the session recall cache, the current session left out, and the kind of question
deciding how many hits are injected.

Pure steps are tested on hand-made candidates; everything touching storage runs on a
real core (SQLite index and workspace files, no model)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.base.text import tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.index import CorpusStats, Hit
from memory_core.recall.index.ranking import select_terms
from memory_core.recall.index.rerank import RankSettings, spread_context, time_factor
from memory_core.recall.query import SHAPING_WEIGHT, build_query
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import candidate as make
from tests.support import index_of
from tests.unit.ranking_support import (
    NOISE,
    TALKS,
    TODAY,
    archived,
    link,
    recorded,
    texts,
    with_recall,
    write,
)

pytestmark = pytest.mark.storage

"""Every step after BM25 off: no neighbours, no priors, no near-copy removal, no lift for
the wanted kind of answer."""


@pytest.fixture
async def no_window(config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    """A core whose turns are scored alone (`recall.context_window = []`)."""
    async with MemoryCore.open(with_recall(config, context_window=[]), clock=clock) as core:
        yield core


def files_search(core: MemoryCore, query: str, **kw: Any) -> list[Hit]:
    """The degraded path's ranking, with the index's settings and the core's day."""
    request = SearchRequest(query, today=TODAY, **kw)
    return fallback.search_files(
        core.workspace, MAIN, request, settings=index_of(core).rank_settings
    )


# --- the neighbour window ---------------------------------------------------------------

"""(role, speaker, text)"""


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
    hits = await core.finder.search(MAIN, SearchRequest(data.question, limit=3))
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
    hits = await no_window.finder.search(MAIN, SearchRequest(data.question, limit=20))
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
    hits = await core.finder.search(MAIN, SearchRequest(data.question, limit=3))
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
    hits = await no_window.finder.search(MAIN, SearchRequest(data.question, limit=20))
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
    hits = await core.finder.search(MAIN, SearchRequest(message, limit=5))
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
    assert query.terms["画"] == 1.0 and "时候" in query.shaping
    for number in range(6):
        await core.notes.append(MAIN, f"整理房间 {number}", now=START - timedelta(days=3))
    painted = "周日在阳台画日出"
    watched = "周六在海边看日出"
    await core.notes.append(MAIN, painted, now=START - timedelta(days=10))
    await core.notes.append(MAIN, watched)  # newer: recency alone would put it first
    assert texts(await core.finder.search(MAIN, "什么时候画了一幅日出"))[:2] == [painted, watched]


async def test_words_that_shape_a_question_never_find_a_note_alone(core: MemoryCore) -> None:
    """'When did I say…' must not match every note where someone said something."""
    question = "when did I say I liked that sushi place?"
    query = build_query(question, today=TODAY)
    assert query.shaping == {"say"} and query.terms["say"] == SHAPING_WEIGHT
    assert {"sushi", "place"} <= {t for t, w in query.terms.items() if w == 1.0}
    for text in (
        "Mom said she would call on Sunday",
        "Tom said the printer is broken again",
        "Lisa said the train was late",
        "Dad said hi from Lisbon",
    ):
        await core.notes.append(MAIN, text)
    sushi = "the sushi place on Fifth Street was great"
    await core.notes.append(MAIN, sushi, now=START - timedelta(days=20))
    assert texts(await core.finder.search(MAIN, SearchRequest(question, limit=10))) == [sushi]
    assert texts(files_search(core, question)) == [sushi]
    zh = build_query("我什么时候说过喜欢那家寿司店？", today=TODAY)
    assert {"说", "时候"} <= zh.shaping and zh.terms["寿司"] == 1.0
    # Only shaping words left in the scope: nothing is found, by the index or the files.
    absent = "when did I say I liked that ramen bar?"
    assert await core.finder.search(MAIN, absent) == []
    assert files_search(core, absent) == []


@pytest.mark.parametrize(
    ("question", "said", "plain"),
    [
        (
            "What is the name of Anna's dog?",
            "Anna's dog has a name now: Biscuit",
            "Anna's dog chewed the red sofa",
        ),
        ("安娜的狗叫什么名字？", "安娜的狗名字是饼干", "安娜的狗咬坏了沙发"),
    ],
)
async def test_a_shaping_word_said_in_the_answer_lifts_it(
    core: MemoryCore, question: str, said: str, plain: str
) -> None:
    """'name' shapes the question but an answer says it too: of two notes holding the
    question's words, the one saying it ranks first, older though it is; a note
    holding only 'name' is not found."""
    query = build_query(question, today=TODAY)
    assert query.shaping and all(query.terms[t] == SHAPING_WEIGHT for t in query.shaping)
    await core.notes.append(MAIN, said, now=START - timedelta(days=5))
    await core.notes.append(MAIN, plain)
    lone = "My name is on the list" if said.isascii() else "名单上有我的名字"
    await core.notes.append(MAIN, lone)
    assert texts(await core.finder.search(MAIN, question)) == [said, plain]
    assert texts(files_search(core, question)) == [said, plain]
