"""A SQLite database owned by one worker thread, reached by whole functions.

Every call hands the thread a function that runs to its end there: a read (`read`) or a
write transaction (`run`). Nothing stays open between two calls, so no statement of one
task can hold a read snapshot while another task's `BEGIN IMMEDIATE` waits for it, and
one call costs one hop from the event loop however many statements it runs. Only the
standard library's public `sqlite3` API is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from memory_core.errors import IndexUnavailable
from memory_core.migrations import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]


class _Thread:
    """One worker thread and its queue: each item runs to its end, in order.

    Leaner than a `ThreadPoolExecutor` + `wrap_future` (about half the cost per call
    here, measured): a turn makes several calls, each a hop from the event loop.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[
            tuple[
                asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]
            ]
            | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="chatmem-db", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, future, fn, args))
        return future

    def stop(self) -> None:
        """Let the thread end once what is queued has run."""
        self._queue.put(None)

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            loop, future, fn, args = item
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the waiting task
                result, error = None, exc
            # A closed loop (RuntimeError) has nobody waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class Database:
    """Open with `await Database.open(path)`; `close()` when done.

    The connection is made and used only on the database thread. Its queue runs one
    function at a time, so transactions of different tasks never interleave and need no
    lock of their own.
    """

    def __init__(self, conn: sqlite3.Connection, thread: _Thread) -> None:
        self._connection = conn
        self._thread = thread
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        synchronous: str = "NORMAL",
        migrations: Sequence[tuple[str, str]] = MIGRATIONS,
        schema: str = "",
    ) -> Database:
        """Open (creating if needed), set the pragmas, migrate; IndexUnavailable for a file
        SQLite cannot use."""
        thread = _Thread()
        try:
            conn = await thread.submit(_connect, path, synchronous, migrations, schema)
        except BaseException:
            thread.stop()
            raise
        return cls(conn, thread)

    async def run(self, work: Work[T]) -> T:
        """`work` inside one IMMEDIATE transaction on the database thread; any exception
        rolls it back and is raised here.

        `work` runs on that thread: only SQLite calls and light Python (it holds the GIL
        and the database throughout).
        """
        return await self._submit(_in_transaction, work)

    async def call(self, work: Work[T]) -> T:
        """`work` on the database thread outside any explicit transaction: reads (each
        statement sees a snapshot of its own; WAL readers never block writers), or one
        statement that commits by itself. Fetch everything inside `work`: a cursor must
        not leave it."""
        return await self._submit(_call, work)

    async def data_version(self) -> int:
        """SQLite's `PRAGMA data_version`: it moves when another connection commits."""
        return int(await self.call(lambda conn: conn.execute("PRAGMA data_version").fetchone()[0]))

    async def _submit(self, runner: Callable[[sqlite3.Connection, Work[T]], T], work: Work[T]) -> T:
        if self._closed:
            raise IndexUnavailable("the database is closed")
        return await self._thread.submit(runner, self._connection, work)

    async def close(self) -> None:
        """Finish what is queued, then close the connection on its own thread."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._thread.submit(self._connection.close)
        finally:
            self._thread.stop()


def _in_transaction(conn: sqlite3.Connection, work: Work[T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def _call(conn: sqlite3.Connection, work: Work[T]) -> T:
    return work(conn)


def _connect(
    path: Path, synchronous: str, migrations: Sequence[tuple[str, str]], schema: str
) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise IndexUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        if schema:
            conn.execute(schema)
        applied = migrate(conn, migrations)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise IndexUnavailable(f"cannot open {path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    return conn


def migrate(
    conn: sqlite3.Connection, migrations: Sequence[tuple[str, str]] = MIGRATIONS
) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; return the
    names applied."""
    if not migrations:
        return []
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied: list[str] = []
    for name, sql in migrations:

        def step(conn: sqlite3.Connection, name: str = name, sql: str = sql) -> None:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                return
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat()),
            )
            applied.append(name)

        _in_transaction(conn, step)
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
