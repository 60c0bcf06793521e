"""BM25 in the index: the formula computed by hand, and FTS5's candidates against rank-bm25's on a few thousand chunks."""

from __future__ import annotations

import json
import math
import random
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.base.scope import MAIN
from memory_core.base.text import tokenize
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.index import K1, B, CorpusStats, Hit, SearchIndex, idf
from memory_core.recall.index import search_index as sqlite_index
from memory_core.recall.index import writes as index_writes
from memory_core.recall.index.rerank import RankSettings, prior_factor
from memory_core.recall.request import SearchRequest
from testkit.chat_sample import generate_sentences, make_chunks
from testkit.reference_bm25 import ReferenceBM25
from tests.conftest import START
from tests.support import (
    bm25_score,
    database,
    index_of,
)
from tests.unit.index_support import (
    DATA,
    TODAY,
    chunk_rows,
    write,
)

pytestmark = pytest.mark.storage


# --- BM25: the formula, FTS5 candidates vs rank-bm25 ------------------------------------


def test_bm25_formula() -> None:
    docs = [["tea", "green", "tea"], ["coffee", "black"], ["tea", "milk", "sugar", "ice"]]
    stats = CorpusStats(docs=3, avg_len=3.0, doc_freq={"tea": 2, "coffee": 1, "milk": 1})
    assert idf(3, 2) == pytest.approx(math.log(1 + 1.5 / 2.5))
    assert idf(1, 1) > 0 and idf(1000, 1000) > 0  # never zero or negative

    def by_hand(query: list[str], doc: list[str]) -> float:
        total = 0.0
        for term in set(query):
            tf = doc.count(term)
            if tf:
                n = stats.doc_freq[term]
                weight = math.log(1 + (3 - n + 0.5) / (n + 0.5))
                total += weight * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / 3.0))
        return total

    assert (K1, B) == (1.2, 0.75)
    for doc in docs:
        for query in (["tea"], ["tea", "milk"], ["coffee", "tea", "tea"]):
            assert bm25_score(query, doc, stats) == pytest.approx(by_hand(query, doc))
    reference = ReferenceBM25(docs, k1=K1, b=B)
    assert list(reference.get_scores(["tea", "milk"])) == pytest.approx(
        [bm25_score(["tea", "milk"], d, stats) for d in docs]
    )
    assert bm25_score(["tea"], [], stats) == 0.0


BM25_ONLY = RankSettings(
    context_weights=(),
    recency_boost=0.0,
    long_term_boost=0.0,
    summary_factor=1.0,
    duplicate_similarity=1.01,
)
"""The ranking with every step after BM25 turned off: no neighbours, no priors, no
near-copy removal (a Jaccard above 1 is never reached)."""


async def test_fts5_candidates_agree_with_rank_bm25(core: MemoryCore) -> None:
    """A few thousand chunks: the index's top 10 are rank-bm25's top 10, same scores, when
    the steps after BM25 are off; with them on (the default), each score is that BM25
    score times its prior."""
    chunks = make_chunks(generate_sentences(6000))
    assert len(chunks) > 3000
    per_file = 150
    for start in range(0, len(chunks), per_file):
        day = date(2025, 1, 1) + timedelta(days=start // per_file)
        body = "".join(f"- 10:00:00 {text}\n" for text in chunks[start : start + per_file])
        write(core, f"memory/{day.isoformat()}.md", f"# {day.isoformat()}\n\n{body}")
    await index_of(core).sync_scope(MAIN)
    rows = await chunk_rows(core)
    assert len(rows) == len(chunks)
    corpus = [row[5].split() for row in rows]
    sample = random.Random(11)
    for row in sample.sample(rows, 50):
        assert row[5] == " ".join(tokenize(row[4]))  # the tokens are tokenize's
    reference = ReferenceBM25(corpus, k1=K1, b=B)
    df = Counter(term for doc in corpus for term in set(doc))
    common = 0.05 * len(corpus)
    bm25_only = SearchIndex(database(core), core.workspace, rank_settings=BM25_ONLY)
    default = index_of(core)
    today = START.date()

    compared = 0
    while compared < 50:
        doc = sample.choice(corpus)
        rare = [t for t in dict.fromkeys(doc) if df[t] <= common]
        if not rare:
            continue
        query = " ".join(sample.sample(rare, min(len(rare), sample.randint(1, 3))))
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms or any(df[t] > common for t in terms):
            continue
        compared += 1
        # The terms as they are: a text query would drop question words and time words.
        hits = await bm25_only.search(MAIN, SearchRequest(terms, limit=10, today=today))
        scores = reference.get_scores(terms)
        ranked = sorted(range(len(rows)), key=lambda i: -scores[i])
        top = [i for i in ranked[:10] if scores[i] > 0]
        assert len(hits) == len(top), query
        assert [h.score for h in hits] == pytest.approx([scores[i] for i in top], abs=1e-6), query
        # Same chunks, up to ties at the cut: every chunk scoring above the 10th is in both.
        cut = scores[top[-1]] + 1e-9
        by_location = {(row[0], row[1]): i for i, row in enumerate(rows)}
        got = Counter(h.text for h in hits if h.score > cut)
        want = Counter(rows[i][4] for i in top if scores[i] > cut)
        assert got == want, query
        for hit in hits:
            assert hit.score == pytest.approx(
                scores[by_location[(hit.path, hit.line_from)]], abs=1e-6
            )
        for hit in await default.search(MAIN, SearchRequest(terms, limit=10, today=today)):
            prior = prior_factor(hit.kind, hit.created_at, today, UTC, default.rank_settings)
            assert 1.0 < prior < 1.0 + default.rank_settings.recency_boost
            assert hit.score == pytest.approx(
                scores[by_location[(hit.path, hit.line_from)]] * prior, abs=1e-6
            )
    assert compared == 50


async def test_index_and_file_fallback_agree_on_a_real_workspace(core: MemoryCore) -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    for number, memory in enumerate(data["memories"]):
        if memory["as"] == "long_term":
            await core.memories.capture(MAIN, memory["text"], category=memory["category"])
        else:
            day = date.fromisoformat(memory["day"])
            when = datetime(day.year, day.month, day.day, 9, number, tzinfo=UTC)
            await core.notes.append(MAIN, memory["text"], now=when)
    write(core, "memory/summary/2026-02-03.md", "# 2026-02-03\n\n数据库连接池排查，Lisbon 机票\n")
    write(core, "memory/summary/2026-02.md", "# 2026-02\n\n二月：数据库、出差、Lisbon\n")
    write(core, "memory/summary/2026-01-20.md", "# 2026-01-20\n\nPython 升级讨论\n")
    await core.memories.flush()
    await index_of(core).sync_scope(MAIN)

    def same(a: list[Hit], b: list[Hit], label: str) -> None:
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9), label
        key: Callable[[Hit], tuple[Any, ...]] = lambda h: (round(h.score, 9), h.path, h.line_from)  # noqa: E731
        assert sorted(map(key, a)) == sorted(map(key, b)), label
        for x, y in zip(sorted(a, key=key), sorted(b, key=key), strict=True):
            assert (x.text, x.kind, x.line_to, x.ref, x.created_at) == (
                y.text,
                y.kind,
                y.line_to,
                y.ref,
                y.created_at,
            ), label

    # The same pipeline on both sides: same settings, same day (priors read the date).
    settings = index_of(core).rank_settings
    assert settings.context_weights and settings.recency_boost > 0
    queries = [q["q"] for q in data["queries"]] + ["数据库 Lisbon", "Python 升级", "二月"]
    queries += ["what did I note in February?", "去年五月的事", "上个月 数据库"]
    variants = (None, [ChunkKind.LONG_TERM], [ChunkKind.DAILY, ChunkKind.SUMMARY])
    for number, query in enumerate(queries):
        for kinds in variants if number % 4 == 0 else variants[:1]:
            # Through the core: long-term hits get their line from the file as it is now.
            indexed = await core.finder.search(MAIN, SearchRequest(query, limit=8, kinds=kinds))
            # Read as every search reads a text (the entities' other names added).
            asked = await core.finder.query(MAIN, query)
            files = fallback.search_files(
                core.workspace,
                MAIN,
                SearchRequest(asked, limit=8, kinds=kinds, today=TODAY),
                settings=settings,
            )
            same(indexed, files, f"{query} {kinds}")
    # The hidden daily summary is in neither.
    assert not any(
        "排查" in h.text for h in fallback.search_files(core.workspace, MAIN, "数据库连接池 排查")
    )


async def test_recall_k1_and_b_are_the_ranking_parameters(
    tmp_path: Path,
    clock: ManualClock,
    storage_env: Mapping[str, str],
    request: pytest.FixtureRequest,
) -> None:
    """`recall.k1` and `recall.b` rank both the index and the file fallback."""
    scores: dict[tuple[float, float], list[float]] = {}
    for k1, b in ((1.2, 0.75), (2.0, 0.3)):
        env = dict(storage_env)
        if env and k1 != 1.2:  # a workspace of its own: a database (schema) of its own
            server = request.getfixturevalue("postgres_server")
            env["CHATMEM_POSTGRES_DSN"] = _enter(request, server.schema())
        base = load_config(None, env=env, workspace=tmp_path / f"ws-{k1}")
        recall = base.recall.model_copy(update={"k1": k1, "b": b})
        async with MemoryCore.open(base.model_copy(update={"recall": recall}), clock=clock) as core:
            for note in ("tea tea tea and cake", "tea", "coffee and a long walk by the river"):
                await core.notes.append(MAIN, note)
            indexed = await core.finder.search(MAIN, SearchRequest("tea", limit=5))
            core.guard.failed(RuntimeError("test: search the files"))
            from_files = await core.finder.search(MAIN, SearchRequest("tea", limit=5))
        assert [h.text for h in indexed] == [h.text for h in from_files]
        assert [h.score for h in indexed] == pytest.approx([h.score for h in from_files])
        scores[(k1, b)] = [h.score for h in indexed]
    assert scores[(1.2, 0.75)] != pytest.approx(scores[(2.0, 0.3)])


async def test_many_changed_files_are_written_a_group_at_a_time(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = core.workspace.memory_dir(MAIN)
    notes.mkdir(parents=True, exist_ok=True)
    for n in range(150):
        day = date(2025, 1, 1) + timedelta(days=n)
        (notes / f"{day.isoformat()}.md").write_text(f"- 09:00:00 note number w{n}x\n")
    transactions: list[int] = []
    real = index_writes.replace_files

    def counting(raw: Any, sid: int, items: Any, restamped: Any, stats: Any) -> None:
        transactions.append(len(items))
        real(raw, sid, items, restamped, stats)

    monkeypatch.setattr(index_writes, "replace_files", counting)
    stats = await index_of(core).sync_scope(MAIN)
    assert stats.files_indexed == 150
    assert transactions == [64, 64, 22]
    [hit] = await core.finder.search(MAIN, "w149x")
    assert hit.path == "memory/2025-05-30.md"


async def test_a_large_scope_is_scanned_for_edits_after_the_search(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = core.workspace.memory_dir(MAIN)
    notes.mkdir(parents=True, exist_ok=True)
    for n in range(3):
        (notes / f"2025-01-0{n + 1}.md").write_text(f"- 09:00:00 note number {n}\n")
    ticking = ManualMonotonic()
    index = SearchIndex(
        database(core), core.workspace, 2.0, monotonic=ticking, background_scan_files=2
    )
    try:
        await index.sync_scope(MAIN)
        (notes / "2025-01-02.md").write_text("- 09:00:00 a zebra crossed the road\n")
        ticking.advance(3)
        listing = threading.Event()
        real = sqlite_index.stat_files

        def held_listing(*args: Any) -> Any:
            listing.wait(10)
            return real(*args)

        monkeypatch.setattr(sqlite_index, "stat_files", held_listing)
        await index.sync_if_stale(MAIN)  # three files: more than two, so in the background
        assert [h.path for h in await index.search(MAIN, SearchRequest("zebra", today=TODAY))] == []
        listing.set()
        await index.scanned()
        [hit] = await index.search(MAIN, SearchRequest("zebra", today=TODAY))
        assert hit.path == "memory/2025-01-02.md"
    finally:
        await index.close()


def _enter(request: pytest.FixtureRequest, context: Any) -> str:
    """Enter a context manager for the rest of the test."""
    value = context.__enter__()
    request.addfinalizer(lambda: context.__exit__(None, None, None))
    return str(value)
