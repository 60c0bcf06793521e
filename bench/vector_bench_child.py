"""The child side of bench/vector_bench.py: each child process runs one revision's
installed code (bench/installs.py: its own venv's python runs this file) to build, fill,
migrate or restart a workspace, and prints one RESULT line of JSON for the parent.

Kept stable across revisions: it imports nothing from bench/ (the parent writes every
text it needs into the cache) and only the core API that 2a70d81 (before the folder
layout) and later revisions both have, each name looked up in either layout (`_first`).

Run by the parent as `<venv>/bin/python bench/vector_bench_child.py MODE --root WS ...`
(`--code TREE` still puts a source tree first on sys.path, for a tree without a venv).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import random
import sqlite3
import sys
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 20260626
SCOPE = "peer:bench"
MODEL = "usem3"
NOTES_PER_FILE = 100
FAST_PACE, SLOW_PACE, FAST_SECONDS = 0.1, 0.5, 20.0
AFTER_READY, STEADY = 100, 200

# ---------------------------------------------------------------------------
# Children: each runs one tree's code (sys.path[0] is that tree).


def child_imports(code: Path | None) -> None:
    """Bind `memory_core` to `code` when given; else it is the running venv's install."""
    if code is not None:
        sys.path.insert(0, str(code))
    import memory_core  # noqa: F401


def _first(name: str, *modules: str) -> Any:
    """`name` from the first of `modules` that exists: the current layout, then the one
    before the folders (2a70d81)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError:
            continue
    raise ImportError(f"{name} in none of {modules}")


def _guard(core: Any) -> Any:
    return getattr(core, "guard", None) or core._guard


def _finder(core: Any) -> Any:
    finder = getattr(core, "finder", None)
    return finder if finder is not None else core.memory.finder


def _rows() -> Any:
    for module in ("memory_core.storage.vectors.rows", "memory_core.index.vectors"):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError:
            continue
    raise ImportError("no vector rows module")


def _read(db: Any) -> Any:
    """The database's read call: `read`, or `call` before the dialect split."""
    return getattr(db, "read", None) or db.call


def _write(db: Any) -> Any:
    """The database's write call: `write`, or `run` before the dialect split."""
    return getattr(db, "write", None) or db.run


def others_path(cache: Path, others: int) -> Path:
    """The other scopes' sentences, one list per scope, written by the parent."""
    return cache / f"others-{others}-{SEED}.json"


def local_config(root: Path, provider: str) -> Any:
    from memory_core.config import load_config

    config = load_config(None, env={}, workspace=root)
    embedding = config.embedding.model_copy(update={"provider": provider, "model": MODEL})
    return config.model_copy(update={"embedding": embedding})


def note_times(rng: random.Random, count: int) -> list[str]:
    seconds = sorted(rng.randrange(7 * 3600, 23 * 3600) for _ in range(count))
    return [f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in seconds]


async def child_build(root: Path, cache: Path, others: int) -> dict[str, Any]:
    """The workspace without vectors: the bench scope from daily files, the others
    straight into the index."""
    from memory_core.engine import MemoryCore

    chunk_module = ("memory_core.base.chunks", "memory_core.chunking")
    Chunk, ChunkKind = _first("Chunk", *chunk_module), _first("ChunkKind", *chunk_module)
    ScopeKey = _first("ScopeKey", "memory_core.base.scope", "memory_core.scope")
    Workspace = _first("Workspace", "memory_core.base.workspace", "memory_core.workspace")
    tokenize_chunks = _first(
        "tokenize_chunks", "memory_core.recall.index.files", "memory_core.index.files"
    )
    texts = json.loads((cache / "texts.json").read_text())
    other_texts: list[list[str]] = (
        json.loads(others_path(cache, others).read_text()) if others else []
    )
    ws = Workspace.at(root)
    scope = ScopeKey(SCOPE)
    first = date(2023, 1, 1)
    started = time.perf_counter()
    async with MemoryCore.open(local_config(root, "none")) as core:
        index = _guard(core).index
        assert index is not None
        ws.ensure_scope(scope)
        rng = random.Random(SEED)
        for start in range(0, len(texts), NOTES_PER_FILE):
            day = first + timedelta(days=start // NOTES_PER_FILE)
            batch = texts[start : start + NOTES_PER_FILE]
            lines = [f"# {day.isoformat()}", ""]
            lines += [f"- {t} {x}" for t, x in zip(note_times(rng, len(batch)), batch, strict=True)]
            ws.daily_path(scope, day).write_text("\n".join(lines) + "\n", encoding="utf-8")
        await index.sync_scope(scope)
        bench_s = time.perf_counter() - started
        for number, words in enumerate(other_texts):
            other = ScopeKey(f"peer:other-{number:04d}")
            kind = ChunkKind.DAILY if number % 4 else ChunkKind.ARCHIVE_RAW
            for start in range(0, len(words), NOTES_PER_FILE):
                day = first + timedelta(days=start // NOTES_PER_FILE)
                relative = ws.relative(ws.daily_path(other, day))
                chunks = [
                    Chunk(line_from=i + 3, line_to=i + 3, text=text, created_at=None)
                    for i, text in enumerate(words[start : start + NOTES_PER_FILE])
                ]
                prepared = await asyncio.to_thread(tokenize_chunks, chunks)
                await index.add_prepared(other, relative, kind, prepared, stamp=None)
    checkpoint(ws.db_path)
    return {
        "bench_s": bench_s,
        "total_s": time.perf_counter() - started,
        "size": db_size(ws.db_path),
        "chunks": chunk_count(ws.db_path),
    }


async def child_fill(root: Path, cache: Path) -> dict[str, Any]:
    """The bench scope's vectors, stored by this tree's `rows.store` as its backfill
    stores a batch (its cache rows included)."""
    import numpy as np

    Workspace = _first("Workspace", "memory_core.base.workspace", "memory_core.workspace")
    Database = _first("Database", "memory_core.storage.db", "memory_core.db")
    rows = _rows()

    vecs = np.load(cache / "vectors.npy")
    texts = json.loads((cache / "texts.json").read_text())
    where = {text: i for i, text in enumerate(texts)}
    ws = Workspace.at(root)
    model = f"local:{MODEL}"
    key = getattr(rows, "cache_key", None)  # the previous schema's cache key
    db = await Database.open(ws.db_path)
    started = time.perf_counter()
    try:
        sid = await _read(db)(
            lambda c: c.execute("SELECT id FROM scopes WHERE key = ?", (SCOPE,)).fetchone()[0]
        )
        chunks = await _read(db)(
            lambda c: c.execute(
                f"SELECT c.id, {rows.EMBED_TEXT} FROM chunks AS c WHERE c.scope_id = ?"
                " ORDER BY c.id",
                (sid,),
            ).fetchall()
        )
        for start in range(0, len(chunks), 1_000):
            items, cache_rows = [], []
            for chunk_id, text in chunks[start : start + 1_000]:
                vec = vecs[where[text]].tobytes()
                items.append((rows.ChunkText(int(chunk_id), str(text)), vec))
                cache_key = key(model, text) if key else rows.text_hash(text)
                cache_rows.append((cache_key, vec))

            def write(conn: Any, items: Any = items, cache_rows: Any = cache_rows) -> Any:
                return rows.store(conn, sid, model, items, cache_rows, [])

            await _write(db)(write)
        count = await _read(db)(
            lambda c: c.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
        )
    finally:
        await db.close()
    checkpoint(ws.db_path)
    return {"vectors": count, "s": time.perf_counter() - started, "size": db_size(ws.db_path)}


async def child_migrate(root: Path) -> dict[str, Any]:
    """Open the previous tree's database with this one: its migration, timed."""
    Workspace = _first("Workspace", "memory_core.base.workspace", "memory_core.workspace")
    Database = _first("Database", "memory_core.storage.db", "memory_core.db")

    ws = Workspace.at(root)
    started = time.perf_counter()
    db = await Database.open(ws.db_path)
    seconds = time.perf_counter() - started
    try:
        counts = await _read(db)(
            lambda c: (
                c.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0],
                c.execute("SELECT count(*) FROM embeddings").fetchone()[0],
            )
        )
    finally:
        await db.close()
    checkpoint(ws.db_path)
    as_is = db_size(ws.db_path)
    with contextlib.closing(sqlite3.connect(ws.db_path)) as conn:
        conn.execute("VACUUM")
    return {
        "s": seconds,
        "chunk_vectors": counts[0],
        "embeddings": counts[1],
        "size": as_is,
        "vacuumed": db_size(ws.db_path),
    }


async def child_restart(
    root: Path,
    cache: Path,
    spawned: float,
    limit: float,
    after_ready: int = AFTER_READY,
    steady_count: int = STEADY,
) -> dict[str, Any]:
    """A bot's start on the workspace, hybrid recalls from its first moment on."""
    from memory_core.engine import MemoryCore

    ScopeKey = _first("ScopeKey", "memory_core.base.scope", "memory_core.scope")

    queries = json.loads((cache / "queries.json").read_text())
    offset = random.Random(spawned).randrange(len(queries))
    scope = ScopeKey(SCOPE)
    samples: list[tuple[float, float]] = []
    ready_at: float | None = None

    def since() -> float:
        return time.time() - spawned

    async with MemoryCore.open(local_config(root, "local")) as core:
        opened = since()
        index = _guard(core).index
        assert index is not None and index.vectors is not None
        vectors: Any = index.vectors
        sid = await index.scope_id(scope)

        async def watch() -> None:
            nonlocal ready_at
            # Polled: `wait_graph` returns at once until a search has started the graph,
            # and both trees offer no event for it.
            while not await vectors.wait_graph(sid):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            ready_at = since()

        watcher = asyncio.create_task(watch())
        number, after = 0, 0
        steady: list[float] = []
        finder = _finder(core)
        while len(steady) < steady_count:
            query = queries[(offset + number) % len(queries)]
            number += 1
            started = time.perf_counter()
            await finder.recall(scope, query)
            took = time.perf_counter() - started
            if after >= after_ready:
                steady.append(took)
            else:
                samples.append((since(), took))
            if ready_at is not None:
                after += 1
            elif since() > limit:
                break
            pace = FAST_PACE if since() < FAST_SECONDS or ready_at is not None else SLOW_PACE
            await asyncio.sleep(max(0.0, pace - took))
        watcher.cancel()
        counts = getattr(vectors, "graph_counts", None)
        made = (
            {"built": counts.built, "read": counts.read, "inherited": counts.inherited}
            if counts is not None
            else {"built": 1}
        )
    return {"opened": opened, "ready": ready_at, "samples": samples, "steady": steady, **made}


def child_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--code", type=Path, default=None)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--others", type=int, default=0)
    parser.add_argument("--spawned", type=float, default=0.0)
    parser.add_argument("--limit", type=float, default=600.0)
    parser.add_argument("--after-ready", type=int, default=AFTER_READY)
    parser.add_argument("--steady", type=int, default=STEADY)
    args = parser.parse_args(argv)
    child_imports(args.code)
    if args.mode == "build":
        out = asyncio.run(child_build(args.root, args.cache, args.others))
    elif args.mode == "fill":
        out = asyncio.run(child_fill(args.root, args.cache))
    elif args.mode == "migrate":
        out = asyncio.run(child_migrate(args.root))
    else:
        out = asyncio.run(
            child_restart(
                args.root, args.cache, args.spawned, args.limit, args.after_ready, args.steady
            )
        )
    print("RESULT " + json.dumps(out))


# ---------------------------------------------------------------------------
# Helpers of both sides


def checkpoint(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def db_size(path: Path) -> int:
    return sum(
        part.stat().st_size for part in (path, path.with_name(path.name + "-wal")) if part.exists()
    )


def chunk_count(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


if __name__ == "__main__":
    child_main(sys.argv[1:])
