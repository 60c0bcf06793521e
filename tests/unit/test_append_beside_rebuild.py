"""A note appended while another process rebuilds the index (a shared PostgreSQL): the
two transactions are stepped by hand, each on its own connection, so the interleaving
that once left a file marked up to date over chunks that miss lines is met every run.

The rule checked: when the file row holds the file's current stamp, the file's chunks
hold every note the file holds (otherwise the append asks for the file to be read
again, and the stale row makes the next sync do it)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.scope import MAIN
from memory_core.base.sql import Connection
from memory_core.base.text import tokenize
from memory_core.engine import MemoryCore
from memory_core.notes import daily
from memory_core.recall.index import rebuild, writes
from memory_core.storage.pg.connection import PgConnection
from testkit.waiting import until_sync
from tests.support import sql

WAIT_SECONDS = 30.0


def connect(core: MemoryCore) -> psycopg.Connection[Any]:
    return psycopg.connect(core.config.storage.postgres_dsn)


def blocked_on_a_lock(watcher: psycopg.Connection[Any], pid: int) -> bool:
    row = watcher.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "Lock"


def append_beside(
    core: MemoryCore, holder: Callable[[Connection], object], path: Path, sid: int
) -> bool:
    """`holder` runs on one connection and stays uncommitted while a note is appended to
    `path` and `add_appended_rows` runs on another until it waits on a lock; then the
    holder commits. Returns the append's answer (read the file again?)."""
    relative = core.workspace.relative(path)
    note = daily.append_note_blocking(
        path, "wlatezq the late note", datetime.now(UTC), root=core.workspace.root
    )
    chunk = Chunk(note.line_from, note.line_to, note.text, None)
    prepared = [(chunk, " ".join(tokenize(note.text)))]
    answer: list[bool] = []
    failure: list[BaseException] = []
    with connect(core) as first, connect(core) as second, connect(core) as watcher:
        watcher.autocommit = True
        with first.transaction():
            holder(PgConnection(first, "holder"))

            def appender() -> None:
                try:
                    with second.transaction():
                        answer.append(
                            writes.add_appended_rows(
                                PgConnection(second, "appender"),
                                sid,
                                relative,
                                ChunkKind.DAILY,
                                prepared,
                                note.after,
                                note.before,
                            )
                        )
                except BaseException as exc:  # reported by the test, in its thread
                    failure.append(exc)

            thread = threading.Thread(target=appender)
            thread.start()
            pid = second.info.backend_pid
            until_sync(
                lambda: blocked_on_a_lock(watcher, pid) or not thread.is_alive(),
                within=WAIT_SECONDS,
                what="the append meeting the holder's lock",
            )
        thread.join(WAIT_SECONDS)
    assert not failure, failure
    return answer[0]


async def assert_row_trusts_only_whole_chunks(core: MemoryCore, path: Path, sid: int) -> None:
    relative = core.workspace.relative(path)
    stat = os.stat(path)
    row = await sql(core, "SELECT mtime_ns, size FROM files WHERE path = ?", relative)
    if not row or (int(row[0][0]), int(row[0][1])) != (stat.st_mtime_ns, stat.st_size):
        return  # stale: the next sync reads the file again
    held = " ".join(
        str(r[0])
        for r in await sql(
            core, "SELECT text FROM chunks WHERE scope_id = ? AND path = ?", sid, relative
        )
    )
    for word in ("wfirstzq", "wsecondzq", "wlatezq"):
        assert word in held, (word, held)


async def daily_file_with_two_notes(core: MemoryCore) -> tuple[Path, int]:
    relative, _ = await core.notes.append(MAIN, "wfirstzq the first note")
    await core.notes.append(MAIN, "wsecondzq the second note")
    sid = int((await sql(core, "SELECT id FROM scopes WHERE key = ?", MAIN.value))[0][0])
    return core.config.workspace_path / relative, sid


# One SQLite writer at a time: no other transaction runs meanwhile there.
pytestmark = [pytest.mark.storage, pytest.mark.postgres_only]


async def test_a_reset_between_an_appends_check_and_write_loses_no_note(
    core: MemoryCore,
) -> None:
    path, sid = await daily_file_with_two_notes(core)
    reread = append_beside(core, rebuild.reset, path, sid)
    await assert_row_trusts_only_whole_chunks(core, path, sid)
    assert reread  # the reset emptied the index: the file must be read again


async def test_a_rebuild_writing_an_older_read_of_the_file_loses_no_note(
    core: MemoryCore,
) -> None:
    relative, _ = await core.notes.append(MAIN, "wfirstzq the first note")
    sid = int((await sql(core, "SELECT id FROM scopes WHERE key = ?", MAIN.value))[0][0])
    path = core.config.workspace_path / relative
    # A rebuild read the file before the second note was appended...
    rows = rebuild.prepare_rows(core.workspace, [(sid, path)], UTC)
    await core.notes.append(MAIN, "wsecondzq the second note")
    # ...and writes that read while a third note is appended and indexed.
    reread = append_beside(core, lambda conn: rebuild.write_rows(conn, rows), path, sid)
    await assert_row_trusts_only_whole_chunks(core, path, sid)
    assert reread
