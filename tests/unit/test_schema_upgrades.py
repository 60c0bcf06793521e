"""A workspace made before its journal and pgvector's columns were numbered migrations
opens with its data: the schema those made by themselves, unrecorded, is taken over as
it is, and recorded from then on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memory_core.storage.pg.vectors as pg_vectors
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from memory_core.storage.pg.database import PgDatabase, apply_step
from memory_core.storage.pg.migrations import PGVECTOR
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.support import index_of, journal_sql, sql

OLD_JOURNAL = """
CREATE TABLE IF NOT EXISTS captures (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    scope TEXT NOT NULL,
    payload TEXT NOT NULL
)
"""
"""What the journal ran at every open before it had migrations (storage/journal.py's `SCHEMA`)."""

OLD_PGVECTOR = (
    "ALTER TABLE chunk_vectors ADD COLUMN IF NOT EXISTS embedding vector",
    "ALTER TABLE chunk_vectors ADD COLUMN IF NOT EXISTS dims INTEGER",
    "ALTER TABLE chunk_vectors ALTER COLUMN embedding SET STORAGE PLAIN",
)
OLD_HNSW = (
    "CREATE INDEX IF NOT EXISTS chunk_vectors_hnsw_{dim} ON chunk_vectors"
    " USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE dims = {dim}"
)
"""What `ensure_pgvector` and `_ensure_hnsw` ran at every start before they were
recorded steps (storage/pg/vectors.py)."""


async def test_a_journal_made_before_its_migrations_keeps_its_captures(
    config: Config, workspace: Path, clock: ManualClock
) -> None:
    path = workspace / ".chatmem" / "journal.sqlite3"
    path.parent.mkdir(parents=True)
    payload = {
        "content": "keeps bees on the roof",
        "category": "fact",
        "importance": "medium",
        "new_id": "a1b2c3d4",
        "touched": "a1b2c3d4",
        "added": True,
        "source": "capture",
        "when": "2026-02-28T09:00:00Z",
    }
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(OLD_JOURNAL)
        # Acknowledged by a process that died before writing MEMORY.md (no lock file).
        conn.execute(
            "INSERT INTO captures (seq, owner, scope, payload) VALUES (41, ?, ?, ?)",
            ("d1ed" * 8, MAIN.value, json.dumps(payload)),
        )
        conn.commit()

    async with MemoryCore.open(config, clock=clock) as core:
        assert [(e.id, e.content) for e in await core.memories.entries(MAIN)] == [
            ("a1b2c3d4", "keeps bees on the roof")
        ]
        assert await journal_sql(core, "SELECT name FROM _migrations") == [("m001_captures",)]
        assert await journal_sql(core, "SELECT count(*) FROM captures") == [(0,)]
        # Sequence numbers go on from the old file's: none is handed out twice.
        assert await journal_sql(core, "SELECT seq FROM sqlite_sequence") == [(41,)]


@pytest.fixture
def pg_config(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[Config]:
    with postgres_server.schema() as dsn:
        env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
        yield load_config(None, env=env, workspace=tmp_path / "ws")


def previous_code(conn: Connection, step: tuple[str, str]) -> bool:
    """The run-time DDL as the previous code ran it: the same effect, no record."""
    name, _ = step
    if name == PGVECTOR[0]:
        statements: tuple[str, ...] = OLD_PGVECTOR
    else:
        statements = (OLD_HNSW.format(dim=int(name.rsplit("_", 1)[1])),)
    for statement in statements:
        conn.execute(statement)
    return True


async def vector_rows(core: MemoryCore) -> list[Any]:
    return await sql(
        core, "SELECT chunk_id, dims, embedding::text FROM chunk_vectors ORDER BY chunk_id"
    )


@pytest.mark.dense
async def test_a_database_given_pgvector_columns_unrecorded_keeps_its_vectors(
    pg_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_vectors, "apply_step", previous_code)
    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as core:
        await core.notes.append(MAIN, "Mochi is a ragdoll, she sheds everywhere")
        await core.vectors_ready()
        before = await vector_rows(core)
        [(dims,)] = await sql(core, "SELECT DISTINCT dims FROM chunk_vectors")
        # m011 and m012 are the run-time steps (m013 is a listed migration).
        run_time = "SELECT name FROM _migrations WHERE name >= 'm011' AND name < 'm013'"
        assert await sql(core, run_time) == []
    monkeypatch.undo()

    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as core:
        assert isinstance(index_of(core).vectors, pg_vectors.PgVectorIndex)
        await core.notes.append(MAIN, "the boiler was serviced on Monday")
        await core.vectors_ready()
        after = await vector_rows(core)
        assert after[: len(before)] == before and len(after) == len(before) + 1
        assert await sql(core, run_time + " ORDER BY name") == [
            ("m011_pgvector",),
            (f"m012_hnsw_{dims}",),
        ]
        hits = await core.finder.search(MAIN, SearchRequest("what breed is my kitty", limit=1))
        assert hits and "ragdoll" in hits[0].text


async def test_two_processes_apply_a_run_time_step_once(pg_config: Config) -> None:
    dsn = pg_config.storage.postgres_dsn
    first, second = PgDatabase.open(dsn), PgDatabase.open(dsn)
    dbs = await asyncio.gather(first, second)
    try:
        step = ("m099_probe", "CREATE TABLE probe (x INTEGER)")
        applied = await asyncio.gather(
            *(db.write(lambda conn: apply_step(conn, step)) for db in dbs)
        )
        assert sorted(applied) == [False, True]
        assert await dbs[0].read(
            lambda conn: conn.execute(
                "SELECT name FROM _migrations WHERE name = 'm099_probe'"
            ).fetchall()
        ) == [("m099_probe",)]
    finally:
        for db in dbs:
            await db.close()
