"""The migration that stores each vector once, as float16 (SQLite's m010, PostgreSQL's
m013; memory_core/storage/migrations.py): a database of the previous schema keeps every
chunk's vector, within float16's precision, one row per (model, text hash); the float32
copies are gone; a migration that fails half way leaves the database as it was, and one
applied is never applied again. On both backends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_core.base.sql import Connection, Db
from memory_core.storage import migrations as sqlite_migrations
from memory_core.storage.db import Database
from memory_core.storage.migrations import MIGRATIONS, Migration
from memory_core.storage.pg import migrations as pg_migrations
from memory_core.storage.pg.database import PgDatabase
from memory_core.storage.pg.migrations import PG_MIGRATIONS
from memory_core.storage.vectors import codec
from memory_core.storage.vectors import rows as vectors

pytestmark = pytest.mark.storage

DIM = 6
A, B = vectors.text_hash("alpha"), vectors.text_hash("beta")


def unit(seed: int) -> np.ndarray:
    vec = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vec / np.linalg.norm(vec)


VEC_A, VEC_B = unit(1), unit(2)


def before(backend_migrations: Sequence[Migration], name: str) -> list[Migration]:
    return [m for m in backend_migrations if m[0] < name]


async def open_db(env: Mapping[str, str], tmp_path: Path, migrations: Sequence[Migration]) -> Db:
    if env:
        return await PgDatabase.open(env["CHATMEM_POSTGRES_DSN"], migrations=migrations)
    return await Database.open(tmp_path / "index.sqlite3", migrations=migrations)


@contextlib.asynccontextmanager
async def opened(
    env: Mapping[str, str], tmp_path: Path, migrations: Sequence[Migration]
) -> AsyncIterator[Db]:
    """The database opened with these migrations, closed after the block."""
    db = await open_db(env, tmp_path, migrations)
    try:
        yield db
    finally:
        await db.close()


def lists(env: Mapping[str, str]) -> tuple[list[Migration], Sequence[Migration], str]:
    """(the previous revision's migrations, today's, the new one's name)."""
    if env:
        return before(PG_MIGRATIONS, "m013"), PG_MIGRATIONS, "m013_vectors_once"
    return before(MIGRATIONS, "m010"), MIGRATIONS, "m010_vectors_once"


def old_rows(conn: Connection) -> None:
    """Vectors as the previous schema held them: float32 in each chunk's row, and again
    in the cache (under its own key); two chunks of one text, one row of broken bytes,
    and a cached vector of a text no chunk holds."""
    conn.executemany(
        "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash, vec)"
        " VALUES (?, ?, ?, ?, ?)",
        [
            (1, 7, "m", A, VEC_A.tobytes()),
            (2, 8, "m", A, VEC_A.tobytes()),
            (3, 7, "m", B, VEC_B.tobytes()),
            (4, 7, "m", vectors.text_hash("gamma"), b"abc"),
        ],
    )
    conn.executemany(
        "INSERT INTO embedding_cache (key, vec) VALUES (?, ?)",
        [("ka", VEC_A.tobytes()), ("kb", VEC_B.tobytes()), ("orphan", VEC_B.tobytes())],
    )
    conn.executemany(
        "INSERT INTO vector_scopes (scope_id, version) VALUES (?, ?)", [(7, 5), (8, 2)]
    )


def tables(conn: Connection) -> set[str]:
    if conn.dialect.name == "sqlite":
        found = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        found = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    return {str(r[0]) for r in found.fetchall()}


def columns(conn: Connection, table: str) -> list[str]:
    if conn.dialect.name == "sqlite":
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})").fetchall()]
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema ="
            " current_schema() AND table_name = ? ORDER BY ordinal_position",
            (table,),
        ).fetchall()
    ]


async def check_migrated(db: Db, name: str) -> None:
    def read(conn: Connection) -> tuple[object, ...]:
        return (
            tables(conn),
            columns(conn, "chunk_vectors"),
            conn.execute(
                "SELECT chunk_id, scope_id, model, text_hash FROM chunk_vectors ORDER BY chunk_id"
            ).fetchall(),
            conn.execute(
                "SELECT model, text_hash, vec FROM embeddings ORDER BY text_hash"
            ).fetchall(),
            conn.execute("SELECT scope_id, version FROM vector_scopes ORDER BY 1").fetchall(),
            conn.execute("SELECT count(*) FROM _migrations WHERE name = ?", (name,)).fetchone(),
            vectors.cached(conn, "m", [A, B]),
        )

    found, cols, chunk_rows, stored, versions, recorded, cached = await db.read(read)
    assert "embedding_cache" not in found and "embeddings" in found  # type: ignore[operator]
    assert cols == ["chunk_id", "scope_id", "model", "text_hash"]
    # Every chunk's vector kept, the broken one's chunk vector dropped (embedded again).
    assert [tuple(r) for r in chunk_rows] == [(1, 7, "m", A), (2, 8, "m", A), (3, 7, "m", B)]  # type: ignore[attr-defined]
    # Once per (model, text hash), float16: half the bytes, within its precision.
    by_hash = {str(r[1]): bytes(r[2]) for r in stored}  # type: ignore[attr-defined]
    assert sorted(by_hash) == sorted([A, B]) and len(stored) == 2  # type: ignore[arg-type]
    for digest, original in ((A, VEC_A), (B, VEC_B)):
        half = by_hash[digest]
        assert len(half) == DIM * codec.STORED_BYTES
        assert half == original.astype("<f2").tobytes()
        back = np.frombuffer(cached[digest], dtype=np.float32)  # type: ignore[index]
        assert back == pytest.approx(original, abs=1e-3)
    assert [tuple(r) for r in versions] == [(7, 6), (8, 3)]  # type: ignore[attr-defined]
    assert recorded is not None and tuple(recorded) == (1,)  # type: ignore[arg-type]


async def test_old_vectors_are_stored_once_as_float16_and_only_once_migrated(
    storage_env: Mapping[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new, name = lists(storage_env)
    async with opened(storage_env, tmp_path, old) as db:
        await db.write(old_rows)

    async with opened(storage_env, tmp_path, new) as db:
        await check_migrated(db, name)

    def never(conn: Connection, blob: str) -> None:
        raise AssertionError("applied twice")

    monkeypatch.setattr(sqlite_migrations, "vectors_once", never)
    monkeypatch.setattr(pg_migrations, "vectors_once", never)
    async with opened(storage_env, tmp_path, new) as db:
        await check_migrated(db, name)


async def test_a_migration_that_fails_half_way_leaves_the_old_vectors_and_runs_again(
    storage_env: Mapping[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new, name = lists(storage_env)
    async with opened(storage_env, tmp_path, old) as db:
        await db.write(old_rows)

    calls = []
    real = codec.to_stored

    def failing(vec: bytes) -> bytes:
        calls.append(vec)
        if len(calls) == 2:
            raise RuntimeError("the process died here")
        return real(vec)

    monkeypatch.setattr(codec, "to_stored", failing)
    with pytest.raises(RuntimeError, match="died"):
        db = await open_db(storage_env, tmp_path, new)
        await db.read(lambda conn: None)  # PostgreSQL migrates at open, or at the first call
    monkeypatch.undo()

    async with opened(storage_env, tmp_path, old) as db:
        untouched = await db.read(
            lambda conn: (
                tables(conn),
                columns(conn, "chunk_vectors"),
                conn.execute("SELECT count(*) FROM embedding_cache").fetchone(),
            )
        )
        assert "embeddings" not in untouched[0] and "embedding_cache" in untouched[0]
        assert untouched[1][-1] == "vec" and tuple(untouched[2]) == (3,)
    async with opened(storage_env, tmp_path, new) as db:
        await check_migrated(db, name)


def test_the_pure_python_conversion_rounds_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without numpy (an install without the vector extra migrating its old vectors)."""
    import builtins

    vec = np.array([0.1, -0.7, 1e-8, 65504.0, 0.33333], dtype=np.float32)
    expected = vec.astype("<f2").tobytes()
    real_import = builtins.__import__

    def no_numpy(name: str, *args: object, **kwargs: object) -> object:
        if name == "numpy" or name.startswith("numpy."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    raw = vec.tobytes()
    monkeypatch.setattr(builtins, "__import__", no_numpy)
    assert codec.to_stored(raw) == expected
