"""A long-term chunk is one per entry, not per line (`chunks_one_per_entry`): its lines
move by one row write, with no index to change; every other chunk stays one per line,
and lookups by line still use the line index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from memory_core.base.errors import DatabaseConflict
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import search
from memory_core.storage.shared_fts import scoped_sql
from memory_core.storage.vectors.rows import EMBED_TEXT
from tests.support import LINES_BACK_IN_CHUNKS, long_term_chunks_and_file, sql, sql_write

pytestmark = pytest.mark.storage

COPY_CHUNKS = (
    "INSERT INTO chunks (scope_id, path, line_from, line_to, piece, kind, ref, text, tokens)"
    " SELECT scope_id, path, line_from + {shift}, line_to + {shift}, piece, kind, ref, text,"
    " tokens FROM chunks WHERE kind = '{kind}'"
)


async def test_a_long_term_chunk_is_one_per_entry_and_free_to_move(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "the kayak is red")
    first, _ = await core.memories.capture(MAIN, "drinks oolong tea")
    second, _ = await core.memories.capture(MAIN, "works on the billing service")
    await core.memories.flush()
    # The same entry twice, even on other lines: refused, on either backend.
    with pytest.raises(DatabaseConflict):
        await sql_write(core, (COPY_CHUNKS.format(shift=1000, kind="long_term"), ()))
    # A note's chunk twice on its line: refused, as before.
    with pytest.raises(DatabaseConflict):
        await sql_write(core, (COPY_CHUNKS.format(shift=0, kind="daily"), ()))
    # Two entries' chunks on one line for a moment (a write moves them in any order).
    await sql_write(
        core,
        (
            "UPDATE chunks SET line_from = (SELECT MIN(line_from) FROM chunks"
            " WHERE kind = 'long_term') WHERE kind = 'long_term'",
            (),
        ),
    )
    rows = await sql(core, "SELECT DISTINCT line_from FROM chunks WHERE kind = 'long_term'")
    assert len(rows) == 1
    assert {first.id, second.id} <= {
        str(r[0]) for r in await sql(core, "SELECT ref FROM chunks WHERE kind = 'long_term'")
    }


async def test_a_long_term_line_move_changes_no_index(core: MemoryCore) -> None:
    """The one index holding a chunk's line leaves long-term chunks out."""
    await core.notes.append(MAIN, "the kayak is red")
    if core.config.storage.backend == "sqlite":
        query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chunks'"
    else:
        query = "SELECT indexdef FROM pg_indexes WHERE tablename = 'chunks'"
        query += " AND schemaname = current_schema()"
    [by_line] = [str(r[0]) for r in await sql(core, query) if "line_from" in str(r[0])]
    assert "long_term" in by_line and "<>" in by_line


async def test_an_index_from_before_is_keyed_by_entry_when_opened(config: Config) -> None:
    """A database made before long-term chunks were keyed by entry, holding an entry's
    chunk twice on two lines (a state the old key allowed): at the first open the keys
    are the new ones, and the next sync leaves the file's chunks as a reindex makes them."""
    async with MemoryCore.open(config) as core:
        for n in range(3):
            await core.memories.capture(MAIN, f"fact {n} about the boat")
        await core.memories.flush()
        await core.notes.append(MAIN, "a note about the boat")
        statements: list[tuple[str, tuple[object, ...]]] = [
            *LINES_BACK_IN_CHUNKS,
            ("DROP INDEX chunks_one_per_line", ()),
            ("DROP INDEX chunks_one_per_entry", ()),
            (
                "CREATE UNIQUE INDEX chunks_one_per_line"
                " ON chunks (scope_id, path, line_from, piece)",
                (),
            ),
            ("DELETE FROM _migrations WHERE name LIKE '%long_term_by_entry'", ()),
            (COPY_CHUNKS.format(shift=1000, kind="long_term"), ()),
            ("UPDATE scopes SET chunk_count = chunk_count + 3", ()),  # as a writer counts
        ]
        if config.storage.backend == "sqlite":
            statements.append(  # and its postings, as a writer adds them
                (
                    "INSERT INTO fts_scoped (rowid, tokens) SELECT id,"
                    f" {scoped_sql('scope_id', 'tokens')} FROM chunks"
                    " WHERE kind = 'long_term' AND line_from > 1000",
                    (),
                )
            )
        await sql_write(core, *statements)
        assert len(await sql(core, "SELECT id FROM chunks WHERE kind = 'long_term'")) == 6

    async with MemoryCore.open(config) as core:
        index = core.guard.index
        assert index is not None, core.degraded_reason
        await index.sync_scope(MAIN)
        held, whole = await long_term_chunks_and_file(core)
        assert held == [(ref, first, last, 0, text) for ref, first, last, text in whole]
        counts = await sql(
            core, "SELECT s.chunk_count, (SELECT COUNT(*) FROM chunks) FROM scopes AS s"
        )
        assert [(int(a), int(b)) for a, b in counts] == [(4, 4)]
        assert len(await core.finder.search(MAIN, "boat")) == 4
        with pytest.raises(DatabaseConflict):
            await sql_write(core, (COPY_CHUNKS.format(shift=1000, kind="long_term"), ()))


class Recording:
    """A connection that keeps each statement and its parameters, and finds nothing."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, Sequence[Any]]] = []

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Recording:
        self.statements.append((statement, params))
        return self

    def fetchall(self) -> list[Any]:
        return []


@pytest.mark.sqlite_only
async def test_lookups_by_line_still_use_the_line_index(core: MemoryCore) -> None:
    """The line index is partial: SQLite uses it only for a query that names its
    condition. Every lookup of a conversation's turns by line does."""
    await core.notes.append(MAIN, "the kayak is red")
    made = Recording()
    conn = cast(Connection, made)
    search.neighbours(conn, 1, [(7, "sessions/s", 5)], 2)
    search.session_messages(conn, 1, "s", 5, 3)
    search.message_context(conn, 1, "s", 5, 2, 2)
    made.statements.append((f"SELECT {EMBED_TEXT} FROM chunks AS c WHERE c.id = ?", (1,)))
    assert len(made.statements) == 5
    for statement, params in made.statements:
        rows = await sql(core, "EXPLAIN QUERY PLAN " + statement, *params)
        details = " ".join(str(r[3]) for r in rows)
        assert "chunks_one_per_line" in details, statement
        assert "chunks_scope_path" not in details, statement
