"""The hybrid half of bench/pg_scale_bench.py: vectors for the bench scope (embedded once,
cached), copied into PostgreSQL, and the same searches run by the probe on PostgreSQL and
on a SQLite copy, reported side by side."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg
from corpus import percentile, query_targets, sentences, table
from pg_scale_rows import (
    DENSE_K,
    HYBRID_WARM_UP,
    PROBE,
    QUERIES,
    SEED,
    copy_rows,
    finish,
    log,
    new_scope,
    tokens_of,
)
from psycopg import conninfo, sql
from trees import Tree

from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.embedding.local import LocalEmbedder
from memory_core.engine import MemoryCore
from memory_core.storage.pg.migrations import PGVECTOR, hnsw_step
from memory_core.storage.shared_fts import FTS_TABLE, scope_range, scoped_sql
from memory_core.storage.vectors.rows import text_hash


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


def clone_database(dsn: str, name: str) -> str:
    """A copy of `dsn`'s database named `name` (CREATE DATABASE ... TEMPLATE, made from a
    connection to template1: the source must have none); the copy's DSN. Each tree times
    its recall on a copy of its own, so what one revision's open writes (its migrations,
    its vectors in its own form) is never what another revision then reads."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        source = str(conn.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
    try:
        with psycopg.connect(
            conninfo.make_conninfo(dsn, dbname="template1"), autocommit=True
        ) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(source)
                )
            )
    except psycopg.Error as error:
        raise SystemExit(
            f"--hybrid gives each tree its own copy of the database, which needs CREATEDB: {error}"
        ) from None
    return conninfo.make_conninfo(dsn, dbname=name)


def drop_database(dsn: str, name: str) -> None:
    with psycopg.connect(conninfo.make_conninfo(dsn, dbname="template1"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


class Unmeasurable(Exception):
    """A tree the probe cannot time (the message says why)."""


def run_probe(tree: Tree, spec_path: Path, *, strict: bool) -> dict[str, object]:
    """bench/pg_hybrid_probe.py run by `tree`'s python (its own venv and code). A tree
    that lacks what the probe calls, or fails in it (unless `strict`: the checkout, whose
    failure is the bench's), is Unmeasurable, with the reason in one line."""
    done = subprocess.run(
        [str(tree.python), str(PROBE), str(spec_path)],
        capture_output=True,
        env=tree.env,
        cwd=spec_path.parent,
        check=False,
        text=True,
    )
    if done.returncode != 0:
        if strict:
            raise SystemExit(
                f"the probe of {tree.label} failed ({done.returncode}):\n{done.stderr}"
            )
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unmeasurable(f"the probe failed: {last}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    if "unmeasurable" in result:
        raise Unmeasurable(str(result["unmeasurable"]))
    return result


def hybrid_report(
    labels: Sequence[str],
    runs: dict[str, list[dict[str, object]]],
    sizes: Sequence[str],
) -> str:
    rows: list[list[object]] = []
    for label in labels:
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
    lite.execute(
        f"INSERT INTO {FTS_TABLE} (rowid, tokens) SELECT id,"
        f" {scoped_sql('scope_id', 'tokens')} FROM chunks ORDER BY id"
    )
    lite.execute(f"CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, {FTS_TABLE}, row)")
    low, high = scope_range(sid)
    lite.execute(
        "INSERT INTO terms (scope_id, term, df) SELECT ?, substr(term, ?), doc FROM temp.vocab"
        " WHERE term >= ? AND term < ?",
        (sid, len(low) + 1, low, high),
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
    trees: Sequence[Tree],
    rounds: int,
    cache_dir: Path,
    small_scopes: Sequence[int],
    sqlite: bool = False,
) -> str:
    """Vectors for the bench scope and the small scopes, then each tree's hybrid recall,
    alternating (with `sqlite`, the last tree's, the checkout's, on a SQLite copy of the
    bench scope too); the report's tables, and a line for each tree not measurable."""
    extra: list[tuple[str, int, list[str]]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        next_id = int(conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM chunks").fetchone()[0])  # type: ignore[index]
        for size in small_scopes:
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
    # The spec on the database itself, for the probe run again by hand (--workdir).
    (tmp / "hybrid-spec.json").write_text(json.dumps(spec), encoding="utf-8")
    probes: list[tuple[str, Tree, Path, bool]] = []
    copies: list[str] = []
    for number, tree in enumerate(trees):
        # Its own database and workspace (graph files), copied before any tree opens them.
        name = f"hybrid_tree_{number}"
        log(f"a copy of the database and workspace for {tree.label}")
        own = clone_database(dsn, name)
        copies.append(name)
        workspace = tmp / f"ws-{number}"
        shutil.copytree(root, workspace)
        env = {**spec["env"], "CHATMEM_POSTGRES_DSN": own}  # type: ignore[dict-item]
        spec_path = tmp / f"hybrid-spec-{number}.json"
        spec_path.write_text(
            json.dumps({**spec, "env": env, "workspace": str(workspace)}), encoding="utf-8"
        )
        probes.append((tree.label, tree, spec_path, tree.label.startswith(".")))
    if sqlite:
        log("copying peer:bench into a SQLite workspace")
        sqlite_copy(dsn, "peer:bench", tmp / "sqlite-ws")
        sqlite_spec = tmp / "sqlite-spec.json"
        only = {"peer:bench": queries["peer:bench"]}
        sqlite_spec.write_text(
            json.dumps({**spec, "env": {}, "workspace": str(tmp / "sqlite-ws"), "scopes": only}),
            encoding="utf-8",
        )
        probes.append(("sqlite", trees[-1], sqlite_spec, True))
    runs: dict[str, list[dict[str, object]]] = {label: [] for label, _, _, _ in probes}
    notes: dict[str, str] = {}
    try:
        for number in range(rounds):
            for label, tree, path, strict in probes if number % 2 == 0 else probes[::-1]:
                if label in notes:
                    continue
                log(f"hybrid recall, round {number + 1} of {rounds}: {label} ({tree.python})")
                try:
                    runs[label].append(run_probe(tree, path, strict=strict))
                except Unmeasurable as why:
                    notes[label] = f"not measurable at {label}: {why}"
    finally:
        for name in copies:
            drop_database(dsn, name)
    labels = [tree.label for tree in trees if tree.label not in notes]
    report = hybrid_report(labels, runs, list(queries))
    if sqlite:
        report += "\n" + hybrid_report(["sqlite"], runs, ["peer:bench"])
    return "\n".join([report, *notes.values()])
