"""One schema, two databases: after every migration, SQLite and PostgreSQL hold the same
tables with the same columns in the same order, journal included. The schema is written
twice (memory_core/migrations.py and memory_core/pg/migrations.py); this test is what
keeps the two from drifting."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.clock import ManualClock
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from tests.support import journal_sql, sql

pytestmark = [pytest.mark.storage, pytest.mark.postgres_only]

SERVER_ONLY = {
    "workspace": "which workspace the database serves (one database, one workspace)",
    "writers": "commit counts that tell a process another one wrote",
}
"""Tables only the server needs: processes that share no file meet there."""
SQLITE_INTERNAL = ("sqlite_", "fts_")
"""SQLite's own bookkeeping and FTS5's shadow tables (PostgreSQL keeps postings in a GIN
index over `chunks`)."""


async def sqlite_columns(core: MemoryCore) -> dict[str, list[str]]:
    tables: dict[str, list[str]] = {}
    for run in (sql, journal_sql):
        names = await run(core, "SELECT name FROM sqlite_master WHERE type = 'table'")
        for (name,) in names:
            if not name.startswith(SQLITE_INTERNAL):
                tables[name] = [row[1] for row in await run(core, f"PRAGMA table_info({name})")]
    return tables


async def test_both_databases_hold_the_same_columns(
    core: MemoryCore, tmp_path: Path, clock: ManualClock
) -> None:
    rows = await sql(
        core,
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
    )
    server: dict[str, list[str]] = {}
    for table, column in rows:
        server.setdefault(table, []).append(column)
    (tmp_path / "lite").mkdir()
    config = load_config(None, env={}, workspace=tmp_path / "lite")
    async with MemoryCore.open(config, clock=clock) as lite:
        local = await sqlite_columns(lite)
    assert set(server) - set(local) == set(SERVER_ONLY)
    assert set(local) - set(server) == set()
    for table, columns in local.items():
        assert server[table] == columns, table
