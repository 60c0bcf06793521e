"""Recall's rules around the ranking: the file fallback agrees with the index, the session
recall cache, the current session left out, and the kind of question deciding how many
hits are injected. Real core (SQLite index and workspace files, no model)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.scope import MAIN
from memory_core.base.text import estimate_tokens, tokenize
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.cache import RecallCache
from memory_core.recall.index import CorpusStats, Hit, SearchIndex
from memory_core.recall.query import BUDGETS, QueryType, build_query, classify_query
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import bm25_score, database, index_message, index_of
from tests.unit.ranking_support import (
    NEUTRAL,
    NOISE,
    TALKS,
    TODAY,
    archived,
    recorded,
    with_recall,
    write,
)

pytestmark = pytest.mark.storage

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
        hits = await plain.search(MAIN, SearchRequest(words, limit=20, today=TODAY))
        assert hits
        for hit in hits:
            tokens = " ".join(tokenize(hit.text)).split()
            assert hit.score == pytest.approx(bm25_score(words, tokens, stats), abs=1e-9)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("query", MIXED_QUERIES)
async def test_files_and_index_rank_alike(core: MemoryCore, query: str) -> None:
    await fill_mixed(core)
    indexed = await core.finder.search(MAIN, SearchRequest(query, limit=8))
    assert indexed, query
    core.guard.failed(RuntimeError("test: search the files"))
    degraded = await core.finder.search(MAIN, SearchRequest(query, limit=8))
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
