"""A rebuild's counters made from a group's rows in hand (`rebuild.group_counts`,
`writes.counted`): what the database thread writes from them is what counting the rows
really written gives, whether every row of the group was new (the counts stand for the
rows) or some replaced or met chunks already there (the rows are read back and counted,
as before)."""

from __future__ import annotations

import sqlite3
from datetime import UTC
from pathlib import Path

import pytest

from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.engine import MemoryCore
from memory_core.recall.index import rebuild, writes
from memory_core.storage.db import SqliteConnection
from tests.support import database, sql

pytestmark = pytest.mark.storage


async def main_files(core: MemoryCore) -> tuple[int, list[Path]]:
    for text in ("tea with Ana on 2023-05-04", "tea again, then the 12 May train", "Ana's cat"):
        await core.notes.append(MAIN, text)
    sid = int((await sql(core, "SELECT id FROM scopes WHERE key = ?", MAIN.value))[0][0])
    paths = sorted((core.config.workspace_path / "memory").glob("*.md"))
    assert paths
    return sid, paths


async def counters(core: MemoryCore, sid: int) -> tuple[list[tuple[str, int]], tuple[int, int]]:
    terms = await sql(core, "SELECT term, df FROM terms WHERE scope_id = ? ORDER BY term", sid)
    scope = await sql(core, "SELECT chunk_count, token_count FROM scopes WHERE id = ?", sid)
    return [(str(t), int(df)) for t, df in terms], (int(scope[0][0]), int(scope[0][1]))


async def recounted(core: MemoryCore, sid: int) -> tuple[list[tuple[str, int]], tuple[int, int]]:
    """The counters made again from the stored chunks (terms: `finish_scope`)."""
    await database(core).write(lambda conn: rebuild.finish_scope(conn, sid))
    terms, _ = await counters(core, sid)
    rows = await sql(core, "SELECT tokens FROM chunks WHERE scope_id = ?", sid)
    words = sum(writes.token_count(str(r[0])) for r in rows)
    return terms, (len(rows), words)


async def test_a_new_groups_counts_are_its_rows_counts(core: MemoryCore) -> None:
    sid, paths = await main_files(core)
    rows = rebuild.prepare_rows(core.workspace, [(sid, p) for p in paths], UTC)
    counts = rebuild.group_counts(rows[1])
    assert set(counts) == {sid} and counts[sid][0] == len(rows[1]) > 0

    def write(conn: Connection) -> None:
        rebuild.reset(conn)
        rebuild.write_rows(conn, rows)

    await database(core).write(write)
    written = await counters(core, sid)
    assert written[0]
    assert written == await recounted(core, sid)


@pytest.mark.parametrize("files", ["replaced", "kept"])
async def test_a_group_over_chunks_already_there_is_counted_from_its_rows(
    core: MemoryCore, files: str
) -> None:
    """Written twice: the second write replaces the file's chunks ("replaced": deleted,
    then inserted again), or meets them (no file rows, "kept": as a chunk another writer
    stored at once, every insert is a conflict), so the rows' counts do not stand for
    what it changed."""
    sid, paths = await main_files(core)
    rows = rebuild.prepare_rows(core.workspace, [(sid, p) for p in paths], UTC)
    again = rows if files == "replaced" else ([], rows[1])

    def write(conn: Connection) -> None:
        rebuild.reset(conn)
        rebuild.write_rows(conn, rows)
        rebuild.write_rows(conn, again)

    await database(core).write(write)
    written = await counters(core, sid)
    assert written[1][0] == len(rows[1])
    assert written == await recounted(core, sid)


def test_counted_rows_tally_as_their_tokens_do() -> None:
    """`Tally.counted` beside `Tally.added` and `removed` of the same scope (merged), and
    alone, writes what the tokens do."""
    tokens = ["tea ana", "tea tea cat", "", "cat"]

    def state(fill: str) -> list[tuple[object, ...]]:
        raw = sqlite3.connect(":memory:", factory=SqliteConnection)
        raw.execute("CREATE TABLE terms (scope_id, term, df, PRIMARY KEY (scope_id, term))")
        raw.execute("CREATE TABLE scopes (id, chunk_count, token_count)")
        raw.execute("INSERT INTO scopes VALUES (1, 0, 0), (2, 0, 0)")
        conn: Connection = raw
        tally = writes.Tally()
        if fill == "tokens":
            tally.added(1, tokens)
            tally.added(2, tokens[:2])
            tally.removed(2, ["tea"])
        else:
            tally.counted(1, writes.counted(tokens))
            tally.counted(2, writes.counted(tokens[:2]))
            tally.removed(2, ["tea"])
        tally.apply(conn)
        return [
            *raw.execute("SELECT * FROM terms ORDER BY scope_id, term"),
            *raw.execute("SELECT * FROM scopes ORDER BY id"),
        ]

    assert state("counts") == state("tokens")
    assert ("cat", 2) in [(t, df) for sid, t, df in state("counts")[:4] if sid == 1]
