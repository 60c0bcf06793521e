"""One schema, two databases: after every migration, SQLite and PostgreSQL hold the same
tables with the same columns in the same order, of the same kind, nullability and
default, the capture journal's and pgvector's included. The schema is written twice
(memory_core/storage/migrations.py and memory_core/storage/pg/migrations.py); this test is what keeps
the two from drifting."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_core.base.clock import ManualClock
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.storage.migrations import JOURNAL_MIGRATIONS, MIGRATIONS
from memory_core.storage.pg.migrations import PG_MIGRATIONS, PGVECTOR, PGVECTOR_COLUMNS, hnsw_step
from memory_core.storage.pg.vectors import ensure_pgvector
from tests.support import database, journal_sql, sql

pytestmark = [pytest.mark.storage, pytest.mark.postgres_only]

SERVER_ONLY = {
    "workspace": "which workspace the database serves (one database, one workspace)",
    "writers": "commit counts that tell a process another one wrote",
}
"""Tables only the server needs: processes that share no file meet there."""
SQLITE_INTERNAL = ("sqlite_", "fts_")
"""SQLite's own bookkeeping and FTS5's shadow tables (PostgreSQL keeps postings in a GIN
index over `chunks`)."""
KINDS = {
    "INTEGER": "integer",
    "bigint": "integer",
    "integer": "integer",
    "smallint": "integer",
    "TEXT": "text",
    "text": "text",
    "REAL": "real",
    "double precision": "real",
    "BLOB": "bytes",
    "bytea": "bytes",
}
"""Each database's column types by what they hold (SQLite's declared types are the
affinities; PostgreSQL's are sized)."""


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    nullable: bool
    default: str | None


def _default(text: str | None) -> str | None:
    """A default as both write it: PostgreSQL's without its cast (`'{}'::text`)."""
    return None if text is None else re.sub(r"::[a-z ]+$", "", text)


async def sqlite_tables(core: MemoryCore, *, journal: bool) -> dict[str, list[Column]]:
    run = journal_sql if journal else sql
    tables: dict[str, list[Column]] = {}
    names = await run(core, "SELECT name FROM sqlite_master WHERE type = 'table'")
    for (name,) in names:
        if name.startswith(SQLITE_INTERNAL):
            continue
        tables[name] = [
            Column(str(c[1]), KINDS[str(c[2])], not (c[3] or c[5]), _default(c[4]))
            for c in await run(core, f"PRAGMA table_info({name})")
        ]
    return tables


async def server_tables(core: MemoryCore) -> dict[str, list[Column]]:
    rows = await sql(
        core,
        "SELECT table_name, column_name, data_type, is_nullable, column_default"
        " FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
    )
    tables: dict[str, list[Column]] = {}
    for table, name, kind, nullable, default in rows:
        column = Column(name, KINDS.get(kind, kind), nullable == "YES", _default(default))
        tables.setdefault(table, []).append(column)
    return tables


async def test_both_databases_hold_the_same_columns(
    core: MemoryCore, tmp_path: Path, clock: ManualClock
) -> None:
    assert await ensure_pgvector(database(core)) is not None  # the test server has it
    server = await server_tables(core)
    (tmp_path / "lite").mkdir()
    config = load_config(None, env={}, workspace=tmp_path / "lite")
    async with MemoryCore.open(config, clock=clock) as lite:
        local = await sqlite_tables(lite, journal=False)
        journal = await sqlite_tables(lite, journal=True)

    # The journal's file holds the journal and its own migrations' record, no more.
    assert set(journal) == {"captures", "_migrations"}
    assert journal["_migrations"] == local["_migrations"]
    local.update(journal)
    # pgvector's copy of each vector: the server searches it, SQLite's process the bytes.
    for table, extra in PGVECTOR_COLUMNS.items():
        assert tuple(c.name for c in server[table][-len(extra) :]) == extra
        server[table] = server[table][: -len(extra)]

    assert set(server) - set(local) == set(SERVER_ONLY)
    assert set(local) - set(server) == set()
    for table, columns in local.items():
        assert server[table] == columns, table


def _numbers(names: list[str]) -> list[int]:
    found = [re.fullmatch(r"m(\d{3})_[a-z0-9_]+", name) for name in names]
    assert all(found), names
    return [int(m.group(1)) for m in found if m]


def test_every_list_is_numbered_one_by_one() -> None:
    """Each database's steps are m001, m002, ... in order, no number given twice; on
    PostgreSQL the run-time steps (pgvector's) take numbers of the same sequence."""
    for steps in (MIGRATIONS, JOURNAL_MIGRATIONS):
        numbers = _numbers([name for name, _ in steps])
        assert numbers == list(range(1, len(steps) + 1))
    listed = _numbers([name for name, _ in PG_MIGRATIONS])
    assert listed == sorted(listed)
    every = listed + _numbers([PGVECTOR[0], hnsw_step(384)[0]])
    assert sorted(every) == list(range(1, len(every) + 1))
