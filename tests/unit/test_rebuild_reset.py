"""A rebuild's reset on SQLite empties `chunks` by dropping the table and making it
again from its own schema text (`postings._empty_chunks`): the schema, the kept message
chunks (same ids, same rows) and their postings are what the row-by-row delete left."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.engine import MemoryCore
from memory_core.recall.index import rebuild
from tests.support import database, index_message, sql

SCHEMA = "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'chunks' ORDER BY name"


async def indexed(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "kayak lesson at the lake on 2023-05-04")
    when = datetime(2026, 2, 3, 9, 0, tzinfo=UTC)
    await index_message(core, MAIN, "sess-1", 7, "user", "my locker code is 4512", when)
    await index_message(core, MAIN, "sess-1", 8, "user", "kayak again next week", when)


async def test_the_reset_keeps_the_schema_and_the_messages(core: MemoryCore) -> None:
    await indexed(core)
    schema = await sql(core, SCHEMA)
    messages = await sql(core, "SELECT * FROM chunks WHERE kind = 'message' ORDER BY id")
    assert len(messages) == 2 and await sql(core, "SELECT 1 FROM chunks WHERE kind = 'daily'")

    await database(core).write(rebuild.reset)

    assert await sql(core, SCHEMA) == schema
    assert await sql(core, "SELECT * FROM chunks ORDER BY id") == messages
    sid = int((await sql(core, "SELECT id FROM scopes WHERE key = ?", MAIN.value))[0][0])
    await database(core).write(lambda conn: rebuild.finish_scope(conn, sid))
    hits = await core.guard.index.search(MAIN, "locker")
    assert len(hits) == 1 and "my locker code is 4512" in hits[0].text
    await sql(core, "INSERT INTO fts_scoped (fts_scoped) VALUES ('integrity-check')")
    # The foreign key to the scopes still holds.
    assert await sql(core, "PRAGMA foreign_key_check") == []


async def test_analyzed_chunks_keep_their_statistics(core: MemoryCore) -> None:
    """ANALYZE statistics (the product writes none) would go with a dropped table: the
    rows are deleted one by one there, and the statistics stay."""
    await indexed(core)

    def analyze(conn: Connection) -> None:
        conn.execute("ANALYZE chunks")

    await database(core).write(analyze)
    stats = await sql(core, "SELECT idx FROM sqlite_stat1 WHERE tbl = 'chunks' ORDER BY idx")
    assert stats

    await database(core).write(rebuild.reset)

    assert (
        await sql(core, "SELECT idx FROM sqlite_stat1 WHERE tbl = 'chunks' ORDER BY idx") == stats
    )
    assert len(await sql(core, "SELECT id FROM chunks")) == 2
