"""The index's bookkeeping holds under any interleaving of writers: one chunk row per
(path, line, piece), of a long-term file per (path, entry, piece), enforced by the schema; the scopes' counters follow the rows really
written; ranking is defined for any statistics."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from memory_core.base.errors import DatabaseConflict
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import idf
from memory_core.storage.shared_fts import scoped_sql
from tests.support import DOUBLED, LINES_BACK_IN_CHUNKS, sql, sql_write

pytestmark = pytest.mark.storage

COUNTS = (
    "SELECT s.key, s.chunk_count, (SELECT COUNT(*) FROM chunks AS c WHERE c.scope_id = s.id)"
    " FROM scopes AS s"
)


def test_idf_is_defined_for_any_counts() -> None:
    """Statistics that lag their rows (more rows holding a term than the scope has, a
    negative count) rank on; they never raise a math domain error."""
    for docs, containing in itertools.product((-5, -1, 0, 1, 2, 283), (-3, 0, 1, 235, 10_000)):
        assert idf(docs, containing) > 0


async def test_search_ranks_on_when_the_statistics_are_off(core: MemoryCore) -> None:
    for note in ("green tea at noon", "black tea at night", "coffee at dawn"):
        await core.notes.append(MAIN, note)
    await sql_write(
        core,
        ("UPDATE scopes SET chunk_count = 1, token_count = 2", ()),
        ("UPDATE terms SET df = 50 WHERE term = 'tea'", ()),
    )
    hits = await core.finder.search(MAIN, "tea")
    assert {h.text for h in hits} >= {"green tea at noon", "black tea at night"}


async def test_the_schema_holds_one_chunk_per_line(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "the kayak is red")
    assert await sql(core, "SELECT piece FROM chunks") == [(0,)]
    with pytest.raises(DatabaseConflict):  # a unique key, on either backend
        await sql_write(
            core,
            (
                "INSERT INTO chunks (scope_id, path, line_from, line_to, piece, kind, text,"
                " tokens) SELECT scope_id, path, line_from, line_to, piece, kind, text, tokens"
                " FROM chunks",
                (),
            ),
        )
    assert await sql(core, DOUBLED) == [(0,)]


async def test_a_line_move_changes_one_index(core: MemoryCore) -> None:
    """A write of a large long-term file moves tens of thousands of chunks to new lines:
    one index of `chunks` holds the line, never a second that the first covers."""
    await core.notes.append(MAIN, "the kayak is red")
    if core.config.storage.backend == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chunks'"
        query += " AND sql LIKE '%line_from%'"
    else:
        query = "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'"
        query += " AND schemaname = current_schema() AND indexdef LIKE '%line_from%'"
    assert len(await sql(core, query)) == 1


async def test_reindexes_at_once_beside_a_writer_double_nothing(core: MemoryCore) -> None:
    """Three reindexes and a writer interleaved on one database: each chunk once, every
    scope's count equal to its rows."""
    for n in range(40):
        await core.notes.append(MAIN, f"note {n} about the garden and the bees")
    await core.memories.capture(MAIN, "keeps bees in the garden " + "honey " * 2000)  # pieces

    async def write() -> None:
        for n in range(20):
            await core.notes.append(MAIN, f"later note {n} about the shed")

    await asyncio.gather(core.reindex(), core.reindex(), write(), core.reindex())
    assert await sql(core, DOUBLED) == [(0,)]
    for key, stored, real in await sql(core, COUNTS):
        assert int(stored) == int(real), key
    hits = await core.finder.search(MAIN, "later note 19 shed")
    assert [h.text for h in hits].count("later note 19 about the shed") == 1


async def test_a_chunk_deleted_twice_is_counted_off_once(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "the kayak is red")
    index = core.guard.index
    assert index is not None
    from memory_core.recall.index import writes

    rows = await sql(core, "SELECT id, tokens, scope_id FROM chunks")
    sid = int(rows[0][2])
    pairs = [(r[0], r[1]) for r in rows]
    db = core.database
    assert db is not None
    await db.write(lambda conn: writes.delete_rows(conn, sid, pairs))
    await db.write(lambda conn: writes.delete_rows(conn, sid, pairs))  # as a second writer would
    for key, stored, real in await sql(core, COUNTS):
        assert int(stored) == int(real) == 0, key


async def test_an_index_with_doubled_rows_is_repaired_when_opened(config: Config) -> None:
    """A database written before the schema held one chunk per line: its doubles go
    and its counters are counted again at the first open."""
    async with MemoryCore.open(config) as core:
        for n in range(5):
            await core.notes.append(MAIN, f"note {n} about the boat")
        await core.memories.capture(MAIN, "paragraph " * 1500)  # a long entry: fine as one chunk
        await core.memories.flush()
        before = sorted(
            tuple(r) for r in await sql(core, "SELECT path, line_from, text FROM chunks")
        )
        sqlite = config.storage.backend == "sqlite"
        statements: list[tuple[str, tuple[object, ...]]] = [
            *LINES_BACK_IN_CHUNKS,
            ("DROP INDEX chunks_one_per_line", ()),
            ("DROP INDEX chunks_one_per_entry", ()),
            ("ALTER TABLE chunks DROP COLUMN piece", ()),
            ("DELETE FROM _migrations WHERE name LIKE '%one_chunk_per_line'", ()),
            ("DELETE FROM _migrations WHERE name LIKE '%long_term_by_entry'", ()),
            (
                "INSERT INTO chunks (id, scope_id, path, line_from, line_to, kind, created_at,"
                " ref, hidden, text, tokens) SELECT id + 1000, scope_id, path, line_from,"
                " line_to, kind, created_at, ref, hidden, text, tokens FROM chunks",
                (),
            ),
            ("UPDATE terms SET df = 2 * df", ()),  # the doubles were counted
            ("UPDATE scopes SET chunk_count = 3, token_count = 7", ()),
        ]
        if sqlite:
            statements.append(
                (
                    "INSERT INTO fts_scoped (rowid, tokens) SELECT id,"
                    f" {scoped_sql('scope_id', 'tokens')} FROM chunks WHERE id > 1000",
                    (),
                )
            )
        await sql_write(core, *statements)
        assert await sql(core, DOUBLED_BY_LINE) != [(0,)]

    async with MemoryCore.open(config) as core:
        assert await sql(core, DOUBLED_BY_LINE) == [(0,)]
        after = sorted(
            tuple(r) for r in await sql(core, "SELECT path, line_from, text FROM chunks")
        )
        assert after == before
        for key, stored, real in await sql(core, COUNTS):
            assert int(stored) == int(real), key
        assert [int(r[0]) for r in await sql(core, "SELECT df FROM terms WHERE term = 'boat'")] == [
            5
        ]
        hits = await core.finder.search(MAIN, "boat")
        assert len(hits) == 5


DOUBLED_BY_LINE = (
    "SELECT COUNT(*) FROM (SELECT scope_id, path, line_from FROM chunks"
    " GROUP BY scope_id, path, line_from HAVING COUNT(*) > 1) AS d"
)
