"""Part 2 of bench/embedder_bench.py: exact and graph search over a scope's vectors (unit
random rows and real-ish ones made from the model's own vectors), the exact/graph
threshold, and the backfill's throughput."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
from corpus import percentile, queries, sentences

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.embedding.local import (
    LocalEmbedder,
)
from memory_core.recall.index import writes
from memory_core.storage.db import Database
from memory_core.storage.vectors import ann
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.index import VectorIndex
from memory_core.storage.vectors.matrix import VectorMatrix

QUESTIONS = [
    "我上次说的那家餐厅叫什么？",
    "还记得我喜欢喝什么茶吗",
    "我女儿的生日是哪天",
    "明天的会议几点开始？",
    "我们之前聊过的那本书",
    "你还记得我的狗叫什么吗",
    "上周去医院检查的结果怎么样",
    "我说过要买什么电脑",
    "what did I say about my trip to Japan?",
    "do you remember my sister's name?",
    "when is the dentist appointment?",
    "which laptop did I want to buy",
    "what was the restaurant we talked about",
    "remind me what I planned for the weekend",
    "did I tell you about the new job?",
    "what's my favourite tea again?",
]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def chat_turns(count: int) -> list[str]:
    """Chat turns of 30-120 characters from the bench corpus (about half Chinese)."""
    pool = [s for s in sentences(count * 3, seed=7) if 30 <= len(s) <= 120]
    return pool[:count]


# --- part 2: exact search --------------------------------------------------------------------


def unit_rows(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    rows = rng.standard_normal((count, dim), dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def realish_rows(embedder: LocalEmbedder, count: int, probes: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` unit vectors like a real scope's, and `probes` query vectors: up to 20 000
    chat-memory chunks embedded with the model, then copies of them with noise (cosine 0.9
    to the original) up to `count`; the queries are what users would type to find some
    of those chunks (`corpus.queries`)."""
    texts = sentences(min(count, 20_000), seed=11)
    base = np.concatenate(
        [embedder.embed_sync(texts[i : i + 256]) for i in range(0, len(texts), 256)]
    )
    rng = np.random.default_rng(13)
    parts = [base]
    while sum(map(len, parts)) < count:
        noise = rng.standard_normal(base.shape, dtype=np.float32) * (0.5 / math.sqrt(base.shape[1]))
        noisy = base + noise
        parts.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    rows = np.ascontiguousarray(np.concatenate(parts)[:count], dtype=np.float32)
    asked = embedder.embed_sync(queries(texts, probes), query=True)
    return rows, np.ascontiguousarray(asked, dtype=np.float32)


async def fill_scope(db: Database, vecs: np.ndarray, model: str) -> int:
    """A scope of one chunk per row of `vecs`, with those vectors, as the index would
    hold them."""
    rows = len(vecs)
    texts = sentences(rows, seed=11)

    def work(conn: sqlite3.Connection) -> int:
        sid = writes.ensure_scope(conn, "peer:bench")
        for start in range(0, rows, 20_000):
            part = texts[start : start + 20_000]
            prepared = [(Chunk(i + 1, i + 1, t, None), t) for i, t in enumerate(part)]
            writes.insert_chunks(conn, sid, f"memory/bench-{start}.md", ChunkKind.DAILY, prepared)
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE scope_id = ?", (sid,))]
        # As `vectors.store` writes them: each vector once (float16) in `embeddings`.
        hashes = [vectors.text_hash(text) for text in texts]
        conn.executemany(
            "INSERT INTO embeddings (model, text_hash, vec) VALUES (?, ?, ?)"
            " ON CONFLICT (model, text_hash) DO NOTHING",
            [(model, digest, vecs[i].astype("<f2").tobytes()) for i, digest in enumerate(hashes)],
        )
        conn.executemany(
            "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash) VALUES (?, ?, ?, ?)",
            [(chunk_id, sid, model, digest) for chunk_id, digest in zip(ids, hashes, strict=True)],
        )
        vectors.bump(conn, sid)
        return sid

    return await db.write(work)


async def timed(fn: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t)
    return out


def p50_p95(values: Sequence[float]) -> tuple[str, str]:
    return ms(statistics.median(values)), ms(percentile(values, 95))


async def search_figures(
    model: str, vecs: np.ndarray, probes: np.ndarray, runs: int, workdir: Path
) -> tuple[list[list[object]], list[list[object]]]:
    """(exact search figures, graph figures) of one scope in a real SQLite file."""
    embedder = LocalEmbedder(model)
    await embedder.load()
    rows = len(vecs)
    db = await Database.open(workdir / "index.sqlite3")
    out: list[list[object]] = []
    graph_out: list[list[object]] = []
    try:
        t = time.perf_counter()
        sid = await fill_scope(db, vecs, embedder.name)
        out.append(
            ["fill the scope (chunks + vectors)", f"{rows}", ms(time.perf_counter() - t), ""]
        )

        calls: list[float] = []
        real_call = db.call

        async def timed_call(work: Callable[[sqlite3.Connection], object]) -> object:
            t = time.perf_counter()
            try:
                return await real_call(work)
            finally:
                calls.append(time.perf_counter() - t)

        db.call = timed_call  # type: ignore[method-assign,assignment]
        index = VectorIndex(db, embedder, ann_min_rows=None)
        t = time.perf_counter()
        await index.load(sid)
        out.append(
            ["matrix load from SQLite", f"{rows}", ms(time.perf_counter() - t), ms(max(calls))]
        )
        calls.clear()
        second = VectorIndex(db, embedder, ann_min_rows=None)
        t = time.perf_counter()
        await second.load(sid)
        out.append(
            [
                "matrix load again (warm page cache)",
                f"{rows}",
                ms(time.perf_counter() - t),
                ms(max(calls)),
            ]
        )
        calls.clear()
        t = time.perf_counter()
        await index._survey(sid, time.monotonic())
        out.append(
            ["full survey (texts hashed)", f"{rows}", ms(time.perf_counter() - t), ms(max(calls))]
        )
        db.call = real_call  # type: ignore[method-assign]

        it = iter(range(runs * 10))

        async def one_search() -> None:
            await index.search(sid, probes[next(it) % runs], 20)

        await timed(one_search, 5)
        out.append(
            ["search, matrix loaded (k=20)", f"{rows}", *p50_p95(await timed(one_search, runs))]
        )

        async def kinds_search() -> None:
            await index.search(sid, probes[next(it) % runs], 20, kinds=["daily", "long_term"])

        out.append(
            ["search with a kinds filter", f"{rows}", *p50_p95(await timed(kinds_search, runs))]
        )

        questions = [f"{q} #{i}" for i in range(runs) for q in QUESTIONS][: runs + 5]
        qi = iter(questions)

        async def embed_and_search() -> None:
            query = await index.embed_query(next(qi))
            await index.search(sid, query, 20)

        await timed(embed_and_search, 5)
        out.append(
            [
                "embed_query + search (new queries)",
                f"{rows}",
                *p50_p95(await timed(embed_and_search, runs)),
            ]
        )
        cached_query = await index.embed_query(QUESTIONS[0])

        async def cached_search() -> None:
            await index.embed_query(QUESTIONS[0])
            await index.search(sid, cached_query, 20)

        out.append(
            ["embed_query (cached) + search", f"{rows}", *p50_p95(await timed(cached_search, runs))]
        )

        # Freshness checks, each one database call.
        checks: dict[str, Callable[[sqlite3.Connection], object]] = {
            "PRAGMA data_version": lambda c: c.execute("PRAGMA data_version").fetchone(),
            "max(chunk_id), count(*) of the scope": lambda c: c.execute(
                "SELECT max(chunk_id), count(*) FROM chunk_vectors WHERE scope_id = ?", (sid,)
            ).fetchone(),
            "version row of the scope": lambda c: vectors.version(c, sid),
        }
        for name, check in checks.items():

            async def call(check: Callable[[sqlite3.Connection], object] = check) -> None:
                await db.read(check)

            await timed(call, 5)
            out.append([f"check: {name}", f"{rows}", *p50_p95(await timed(call, runs))])

        top = await db.read(lambda c: c.execute("SELECT max(id) FROM chunks").fetchone()[0])

        async def quick() -> None:
            await db.read(lambda c: vectors.newer(c, sid, top - 10))

        out.append(
            ["backfill plan: quick look (10 new)", f"{rows}", *p50_p95(await timed(quick, runs))]
        )
        await second.close()
        index._queries.clear()
        graph_out = await graph_search_figures(db, sid, index, probes, runs)
    finally:
        await db.close()
    return out, graph_out


async def graph_search_figures(
    db: Database, sid: int, exact: VectorIndex, probes: np.ndarray, runs: int
) -> list[list[object]]:
    """The same scope searched through its graph (a `VectorIndex` of the default
    threshold, or 1 row when the scope is smaller), against `exact`."""
    rows = await exact.load(sid)
    graphed = VectorIndex(db, exact.embedder, ann_min_rows=min(ann.ANN_MIN_ROWS, rows))
    out: list[list[object]] = []
    t = time.perf_counter()
    await graphed.load(sid)
    assert await graphed.wait_graph(sid), "no graph was built"
    out.append(
        [
            f"graph build, background ({ann.BUILD_THREADS} thread)",
            rows,
            ms(time.perf_counter() - t),
            "",
        ]
    )
    found = 0
    for probe in probes:
        mine = {i for i, _ in await graphed.search(sid, probe, 20)}
        found += len(mine & {i for i, _ in await exact.search(sid, probe, 20)})
    recall = found / (20 * len(probes))
    for name, index in (("exact", exact), ("graph", graphed)):
        it = iter(range(runs * 10))

        async def one_search(index: VectorIndex = index, it: Iterator[int] = it) -> None:
            await index.search(sid, probes[next(it) % len(probes)], 20)

        await timed(one_search, 5)
        out.append([f"search (k=20), {name}", rows, *p50_p95(await timed(one_search, runs))])
        questions = iter([f"{q} #{name}{i}" for i in range(runs + 5) for q in QUESTIONS])

        async def embed_and_search(
            index: VectorIndex = index, questions: Iterator[str] = questions
        ) -> None:
            query = await index.embed_query(next(questions))
            await index.search(sid, query, 20)

        await timed(embed_and_search, 5)
        out.append(
            [
                f"embed_query + search (new queries), {name}",
                rows,
                *p50_p95(await timed(embed_and_search, runs)),
            ]
        )
    out.append(
        [f"recall@20 of the graph against exact ({len(probes)} queries)", rows, f"{recall:.3f}", ""]
    )
    graph = graphed._matrices[sid].graph
    if graph is not None:
        out.append(["graph memory (MB)", rows, f"{graph.nbytes / 2**20:.0f}", ""])
    await graphed.close()
    return out


def bench_matrix(vecs: np.ndarray) -> VectorMatrix:
    """A matrix of `vecs` with chunk ids 1.., as a load would make it (no database)."""
    size, dim = vecs.shape
    matrix = VectorMatrix(dim, 0, size)
    matrix.vecs[:size] = vecs
    matrix.ids[:size] = np.arange(1, size + 1)
    matrix.where = {i + 1: i for i in range(size)}
    matrix.hashes = [""] * size
    matrix.n = size
    return matrix


def graph_rows(name: str, vecs: np.ndarray, probes: np.ndarray) -> list[list[object]]:
    """Exact against graph search over `vecs` in memory, at several search depths."""
    matrix = bench_matrix(vecs)
    n = len(vecs)
    exact_times, truth = [], []
    for probe in probes:
        t = time.perf_counter()
        picked = matrix.pick(matrix.scores(probe, None, ()), 20)
        exact_times.append(time.perf_counter() - t)
        truth.append({chunk_id for chunk_id, _, _ in picked})
    t = time.perf_counter()
    keys = matrix.ids[:n].copy()
    graph = ann.build(matrix.dim, keys, np.arange(n), matrix.vecs, lambda: False, threads=2)
    built = time.perf_counter() - t
    matrix.graph, matrix.graph_upto = graph, n
    out: list[list[object]] = []
    for depth in (64, 128, 256, 512):
        graph.depth = depth
        times, found = [], 0
        for probe, want in zip(probes, truth, strict=True):
            t = time.perf_counter()
            near, rows = matrix.near(graph, probe, 20 * ann.CANDIDATES, None, ())
            picked = matrix.pick(near, 20, rows)
            times.append(time.perf_counter() - t)
            found += len(want & {chunk_id for chunk_id, _, _ in picked})
        out.append(
            [
                name,
                n,
                f"{built:.1f}",
                f"{graph.nbytes / 2**20:.0f}",
                depth,
                *p50_p95(exact_times),
                *p50_p95(times),
                f"{found / (20 * len(probes)):.3f}",
            ]
        )
    return out


def threshold_rows(dim: int, runs: int) -> list[list[object]]:
    """The product inline vs in a worker thread, by matrix size."""
    rng = np.random.default_rng(3)
    out: list[list[object]] = []

    async def measure(matrix: VectorMatrix, query: np.ndarray) -> tuple[list[float], list[float]]:
        inline, threaded = [], []
        for _ in range(runs):
            t = time.perf_counter()
            matrix.scores(query, None, ())
            inline.append(time.perf_counter() - t)
            t = time.perf_counter()
            await asyncio.to_thread(matrix.scores, query, None, ())
            threaded.append(time.perf_counter() - t)
        return inline, threaded

    for size in (1_000, 5_000, 10_000, 20_000, 50_000, 100_000):
        rows = unit_rows(size, dim, rng)
        matrix = VectorMatrix(dim, 0, size)
        matrix.vecs[:size] = rows
        matrix.ids[:size] = np.arange(1, size + 1)
        matrix.hashes = [""] * size
        matrix.n = size
        inline, threaded = asyncio.run(measure(matrix, unit_rows(1, dim, rng)[0]))
        out.append([size, ms(statistics.median(inline)), ms(statistics.median(threaded))])
    return out


async def backfill_figures(model: str, count: int, workdir: Path) -> list[list[object]]:
    embedder = LocalEmbedder(model)
    db = await Database.open(workdir / "backfill.sqlite3")
    texts = chat_turns(count)
    out: list[list[object]] = []
    try:

        def add(scope: str) -> Callable[[sqlite3.Connection], int]:
            def work(conn: sqlite3.Connection) -> int:
                sid = writes.ensure_scope(conn, scope)
                prepared = [(Chunk(i + 1, i + 1, t, None), t) for i, t in enumerate(texts)]
                writes.insert_chunks(conn, sid, "memory/2026-01-01.md", ChunkKind.DAILY, prepared)
                return sid

            return work

        index = VectorIndex(db, embedder)
        await embedder.load()
        first = await db.write(add("peer:first"))
        t = time.perf_counter()
        done = await index.backfill(first)
        elapsed = time.perf_counter() - t
        out.append(["backfill, model", done, f"{elapsed:.2f}", f"{done / elapsed:.0f}"])
        second = await db.write(add("peer:second"))
        t = time.perf_counter()
        done = await index.backfill(second)
        elapsed = time.perf_counter() - t
        out.append(
            ["backfill, same texts (cache)", done, f"{elapsed:.2f}", f"{done / elapsed:.0f}"]
        )
        await index.close()
    finally:
        await db.close()
    return out
