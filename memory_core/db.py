"""Opening the workspace database: pragmas for a file shared by several processes, then
migrations. All access goes through aiosqlite so no SQLite call runs on an event loop."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import aiosqlite

from memory_core.errors import IndexUnavailable
from memory_core.migrations import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
T = TypeVar("T")


class Database:
    """The shared connection plus the lock that keeps its transactions from interleaving.

    Tasks share one aiosqlite connection; an explicit transaction begun by one task must
    not swallow another task's statements, so every write goes through `transaction()`.
    """

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn
        self._write_lock = asyncio.Lock()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._write_lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                await self.conn.execute("ROLLBACK")
                raise
            await self.conn.execute("COMMIT")

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` inside one IMMEDIATE transaction on the database thread.

        Every `await conn.execute(...)` is a round trip to aiosqlite's thread (~0.1-0.3 ms
        each, more on a loaded machine); a write of a few statements, such as indexing one
        note, costs less as one trip than as ten. `work` runs on that thread and must only
        do SQLite calls and light Python: it holds the GIL and the write lock throughout.
        Any exception rolls the transaction back and is raised here.
        """
        async with self._write_lock:
            return await _on_thread(self.conn, _in_transaction, self.conn, work)

    async def close(self) -> None:
        await self.conn.close()


def _in_transaction(conn: aiosqlite.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    raw = _raw(conn)
    raw.execute("BEGIN IMMEDIATE")
    try:
        result = work(raw)
    except BaseException:
        raw.execute("ROLLBACK")
        raise
    raw.execute("COMMIT")
    return result


def _raw(conn: aiosqlite.Connection) -> sqlite3.Connection:
    """The sqlite3 connection behind aiosqlite; only valid on aiosqlite's own thread."""
    return conn._conn


async def _on_thread(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> T:
    """Queue `fn(*args)` on aiosqlite's thread, after any statement already queued.

    aiosqlite has no public call for this; `_execute` is what its own `execute` uses (the
    same in 0.20 to 0.22). Statements of other tasks stay in order around it, since the
    thread runs its queue one item at a time.
    """
    execute = cast(Callable[..., Any], conn._execute)
    return cast(T, await execute(fn, *args))


async def on_db_thread(conn: aiosqlite.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run `work(sqlite3 connection)` on aiosqlite's thread in one round trip, inside
    whatever transaction the caller holds (`Database.transaction`): several statements
    for the price of one `await`."""
    return await _on_thread(conn, _call_raw, conn, work)


def _call_raw(conn: aiosqlite.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    return work(_raw(conn))


async def open_database(path: Path) -> Database:
    """Open (creating if needed) and migrate; raise IndexUnavailable for a broken file."""
    return Database(await _open_connection(path))


async def _open_connection(path: Path) -> aiosqlite.Connection:
    """Open (creating if needed) and migrate; raise IndexUnavailable for a broken file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = await aiosqlite.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.row_factory = aiosqlite.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute("PRAGMA foreign_keys = ON")
        await migrate(conn)
    except sqlite3.DatabaseError as exc:
        await conn.close()
        raise IndexUnavailable(f"cannot open {path}: {exc}") from exc
    except BaseException:
        await conn.close()
        raise
    return conn


async def migrate(conn: aiosqlite.Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied: list[str] = []
    for name, sql in MIGRATIONS:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            async with conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)) as cur:
                done = await cur.fetchone() is not None
            if not done:
                for statement in _statements(sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                    (name, datetime.now(UTC).isoformat()),
                )
                applied.append(name)
            await conn.execute("COMMIT")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    return applied


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (executescript would commit our transaction)."""
    parts: list[str] = []
    buffer = ""
    for line in sql.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                parts.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        parts.append(buffer.strip())
    return parts


def first(rows: Iterable[aiosqlite.Row]) -> aiosqlite.Row | None:
    """The first row of an `execute_fetchall` result (one round trip to the database
    thread instead of three for execute + fetch + close)."""
    return next(iter(rows), None)
