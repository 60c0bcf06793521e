"""What bench/recall_bench.py measures with: its sizes and targets, the corpora written as
daily files or bulk chunks, and the timed queries, appends, recall and hybrid searches
with the figures they return."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from corpus import percentile, query_targets, sentences

from memory_core.base import text as mtext
from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.errors import install_hint
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.embedding.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalEmbedder,
    local_model_available,
)
from memory_core.engine import MemoryCore
from memory_core.recall.index import SearchIndex
from memory_core.recall.index.files import tokenize_chunks
from memory_core.recall.request import SearchRequest
from memory_core.storage.vectors.index import VectorIndex
from testkit.query_reading import read_otherwise
from testkit.recall_agreement import Baseline, Quality

SEED = 20260603
NOTES_PER_FILE = 100
QUERIES = 200
"""Queries timed per size and pass."""
QUALITY_QUERIES = 1_000
"""Queries whose recall@5 is compared with the baseline's (the first QUERIES of them are
the timed ones): over 200, the difference of two recalls moves by about 1.5 points from
one seed to the next (per 100 queries, by 4); over 1 000, by about 0.5
(docs/decisions/0011-recall-bench-targets.md)."""


@dataclass
class Counts:
    """How many queries this run times and judges (`--quick` takes fewer)."""

    timed: int = QUERIES
    quality: int = QUALITY_QUERIES


COUNTS = Counts()
FIRST_DAY = date(2023, 1, 1)
TARGETS = {
    "query_p50": 5.0,
    "query_p95": 20.0,
    "add_p50": 2.0,
    "reindex_chunks_s": 15_000,
    "same_words_margin": 0.5,
    "as_asked_margin": 2.0,
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
    recall_same_words: float = 0.0
    """Recall@5 of the product searched with the baseline's own words (`SearchRequest`
    of a word list: every term weight 1, no time window, no kind of answer)."""
    recall_base: float = 0.0
    read_as_question: int = 0
    """Queries the product reads otherwise than the baseline (see `read_otherwise`)."""
    recall_ours_question: float = 0.0
    recall_base_question: float = 0.0
    """Recall@5 over those queries alone (ours as asked, the baseline)."""
    overlap: float = 0.0
    equivalent: float = 0.0
    same_top1: float = 0.0
    stress: bool = False
    recall_words: Latency = field(default_factory=Latency)
    """`core.finder.recall` with embedding.provider = "none"."""
    recall_hybrid: Latency = field(default_factory=Latency)
    """`core.finder.recall` with the local model's vectors fused in."""


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
    pairs = query_targets(corpus.texts, COUNTS.timed, seed)
    queries = [q for _, q in pairs]

    start = time.perf_counter()
    corpus.tokens = [mtext.tokenize(t) for t in corpus.texts]
    result.tokenize_s = time.perf_counter() - start
    start = time.perf_counter()
    baseline = Baseline(corpus.tokens)
    result.baseline_build_s = time.perf_counter() - start

    for query in queries[:10]:  # warm-up: statement cache, page cache, lru caches
        await core.finder.search(corpus.scope, SearchRequest(query, limit=5))
        baseline.top(query)
    for _ in range(passes):
        gc.collect()
        samples = []
        for query in queries:
            start = time.perf_counter()
            await core.finder.search(corpus.scope, SearchRequest(query, limit=5))
            samples.append(time.perf_counter() - start)
        result.core_search.passes.append(samples)
        samples = []
        for query in queries:
            start = time.perf_counter()
            await index.search(corpus.scope, SearchRequest(query, limit=5))
            samples.append(time.perf_counter() - start)
        result.index_search.passes.append(samples)

    for _ in range(baseline_passes):
        gc.collect()
        samples = []
        for query in queries:
            start = time.perf_counter()
            baseline.top(query)
            samples.append(time.perf_counter() - start)
        result.baseline.passes.append(samples)

    # Quality over more queries than are timed (the first QUERIES are the timed ones):
    # our top 5 (SearchIndex.search, min_score 0) as asked, and with the baseline's own
    # words (a list of words is searched as plain words: `recall.query.as_query`).
    pairs = query_targets(corpus.texts, COUNTS.quality, seed)
    key_of = {key: i for i, key in enumerate(corpus.keys)}
    today = datetime.now(UTC).date()
    quality = Quality()
    for target, query in pairs:
        hits = await index.search(corpus.scope, SearchRequest(query, limit=5))
        ours = [key_of.get((h.path, h.line_from), -1) for h in hits]
        hits = await index.search(corpus.scope, SearchRequest([query], limit=5))
        words = [key_of.get((h.path, h.line_from), -1) for h in hits]
        top, scores = baseline.top(query)
        question = read_otherwise(query, today)
        quality.add(corpus.texts, target, (ours, words, top), scores, question)
    result.recall_ours = quality.recall_ours / len(pairs)
    result.recall_same_words = quality.recall_same_words / len(pairs)
    result.recall_base = quality.recall_base / len(pairs)
    result.read_as_question = quality.questions
    if quality.questions:
        result.recall_ours_question = quality.question_ours / quality.questions
        result.recall_base_question = quality.question_base / quality.questions
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
        embedding.blas = blas_name()
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
        texts = recall_queries(corpora[-1].texts, WARM_UP + COUNTS.timed, SEED + 4_000)
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
    """numpy's BLAS threads while hybrid recall was timed (see `blas_name`)."""


@dataclass
class WorkspaceFigures:
    reindex: list[tuple[float, int]] = field(default_factory=list)
    reindex_load: list[float] = field(default_factory=list)
    reindex_cpu: list[float] = field(default_factory=list)
    """CPU seconds of this process in each reindex (the writer thread and the event loop;
    the tokenizing workers are processes of their own): the load does not move it."""
    """The load average (1 min) as each reindex ended: it runs on every core."""
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


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def blas_name() -> str:
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
