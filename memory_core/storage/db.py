"""A SQLite database owned by one worker thread, reached by whole functions.

Every call hands the thread a function that runs to its end there: reads (`read`), a
write transaction (`write`), or statements that each commit by themselves (`autocommit`). Nothing stays open between two calls, so no statement of one
task can hold a read snapshot while another task's `BEGIN IMMEDIATE` waits for it, and
one call costs one hop from the event loop however many statements it runs. Only the
standard library's public `sqlite3` API is used.

Another process (a bot, the TUI, the CLI) may hold the write lock for a while. SQLite
waits `BUSY_TIMEOUT_MS` for it inside one attempt; after that the attempt is given up and
tried again from the event loop, with backoff, for up to `BUSY_RETRY_SECONDS` in all, so
the database thread is free for other tasks' reads meanwhile. A lock held longer than
that is a `DatabaseBusy` for the caller: one clear line, and never taken for damage.

This module is the SQLite backend's boundary: every `sqlite3` exception a call meets
leaves it as one of the project's `StorageError` family (`storage_error`), so no code
above it names `sqlite3` and the PostgreSQL backend raises the same errors for the same
failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memory_core.base.clock import system_clock, system_monotonic, system_sleep
from memory_core.base.errors import (
    DatabaseBusy,
    DatabaseConflict,
    DatabaseCorrupt,
    DatabaseFailure,
    DatabaseUnwritable,
    IndexUnavailable,
    StorageError,
)
from memory_core.base.retry import Backoff, retrying
from memory_core.base.sql import Connection, Dialect, data_version
from memory_core.storage.dialects import SQLITE
from memory_core.storage.migrations import MIGRATIONS, Migration, Step

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 2_000
"""How long SQLite itself waits for a lock within one attempt."""
BUSY_RETRY_SECONDS = 60.0
"""How long a call keeps trying a locked database before it gives up (DatabaseBusy)."""
CACHE_KIB = -32_768
"""SQLite's page cache per connection (negative: in KiB), 32 MiB rather than its 2 MiB:
a search reads its candidates' rows by id, scattered over the whole table; from
SQLite's own cache rather than the system's, one row costs a few times less. Pages are
taken only as they are read."""
BUSY_FIRST_WAIT = 0.02
BUSY_MAX_WAIT = 1.0
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_UNWRITABLE_CODES = frozenset(
    {sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PERM}
)
"""Primary result codes of a disk that refuses writes: `DatabaseUnwritable`."""
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""Primary result codes of a damaged file, or one that is no database: `DatabaseCorrupt`."""
_CONFLICT_CODES = frozenset(
    {sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY}
)
"""Extended result codes of a unique key met: `DatabaseConflict` (PostgreSQL's
`unique_violation`); any other broken constraint is a `DatabaseFailure` on both."""
T = TypeVar("T")
Work = Callable[[Connection], T]


class SqliteConnection(sqlite3.Connection):
    """`sqlite3.connect(..., factory=SqliteConnection)`: a plain sqlite3 connection that
    says which dialect it speaks."""

    dialect: Dialect = SQLITE


def is_busy(exc: BaseException) -> bool:
    """True for "another connection holds the lock" (SQLITE_BUSY / SQLITE_LOCKED and their
    extended codes): a reason to wait and try again, never a sign of damage."""
    if isinstance(exc, DatabaseBusy):
        return True
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _BUSY_CODES:
        return True
    return " is locked" in str(exc)


def storage_error(exc: sqlite3.Error) -> StorageError:
    """The project's error for a `sqlite3` one, chosen by SQLite's result code (the
    message where an error made by hand carries none): busy, unwritable, corrupt, a
    unique key met, or a failure. The same kinds `pg/database.py` makes of psycopg's."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    name = getattr(exc, "sqlite_errorname", "") or type(exc).__name__
    text = str(exc)
    if is_busy(exc):
        return DatabaseBusy(f"the database was locked by another process: {text}")
    if primary in _UNWRITABLE_CODES:
        return DatabaseUnwritable(f"the database cannot write: {text} ({name})")
    coded = primary is not None
    if primary in _CORRUPT_CODES or (
        not coded and ("malformed" in text or "not a database" in text)
    ):
        return DatabaseCorrupt(f"the database file is damaged: {text} ({name})")
    if isinstance(exc, sqlite3.IntegrityError) and (
        code in _CONFLICT_CODES or (not coded and text.startswith("UNIQUE constraint failed"))
    ):
        return DatabaseConflict(f"database conflict: {text}")
    return DatabaseFailure(f"database error: {text}")


class _Retry(Exception):
    """Raised on the database thread when an attempt met a lock before it changed
    anything, so the whole function may run again."""

    def __init__(self, cause: sqlite3.DatabaseError) -> None:
        super().__init__(str(cause))
        self.cause = cause


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

    dialect: Dialect = SQLITE

    def __init__(self, conn: SqliteConnection, thread: _Thread) -> None:
        self._connection = conn
        self._thread = thread
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        synchronous: str = "NORMAL",
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> Database:
        """Open (creating if needed), set the pragmas, migrate; IndexUnavailable for a file
        SQLite cannot use."""
        thread = _Thread()
        try:
            conn = await _retrying(
                lambda: thread.submit(_connect, path, synchronous, migrations),
                f"opening {path.name}",
            )
        except BaseException:
            thread.stop()
            raise
        return cls(conn, thread)

    async def write(self, work: Work[T]) -> T:
        """`work` inside one IMMEDIATE transaction on the database thread; any exception
        rolls it back and is raised here.

        `work` runs on that thread: only SQLite calls and light Python (it holds the GIL
        and the database throughout). A lock met at `BEGIN` (before `work` ran) is waited
        out and the call tried again; one met later is a `DatabaseBusy` at once, since
        `work` may have done something besides SQL (a daily note is appended in it).
        """
        return await self._submit(_in_transaction, work)

    async def read(self, work: Work[T]) -> T:
        """`work`'s reads on the database thread, outside any explicit transaction: each
        statement sees a snapshot of its own (WAL readers never block writers). Fetch
        everything inside `work`: a cursor must not leave it. A locked database is waited
        out and `work` run again."""
        return await self._submit(_call, work)

    async def autocommit(self, work: Work[T]) -> T:
        """`work` on the database thread outside any explicit transaction, each statement
        committed by itself: a write of one statement, or `VACUUM`. A locked database is
        waited out and `work` run again, which is safe for a single statement (a locked
        statement changed nothing). It runs as `read` does: only the name differs."""
        return await self.read(work)

    async def data_version(self) -> int:
        """SQLite's `PRAGMA data_version`: it moves when another connection commits."""
        return await self.read(data_version)

    async def _submit(self, runner: Callable[[SqliteConnection, Work[T]], T], work: Work[T]) -> T:
        def attempt() -> asyncio.Future[T]:
            if self._closed:
                raise IndexUnavailable("the database is closed")
            return self._thread.submit(runner, self._connection, work)

        try:
            return await _retrying(attempt, "waiting for another process's write")
        except sqlite3.Error as exc:
            # A disk that refuses (full, read-only, size limit) is the person's to fix:
            # one line for them, not a traceback (issue 11, item 8); every other failure
            # reads as PostgreSQL's would.
            raise storage_error(exc) from exc

    async def close(self) -> None:
        """Finish what is queued, then close the connection on its own thread."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._thread.submit(self._connection.close)
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc
        finally:
            self._thread.stop()


async def _retrying(attempt: Callable[[], Awaitable[T]], doing: str) -> T:
    """`attempt()` until it does not meet a lock, waiting from the event loop in between
    (the database thread serves other calls meanwhile); DatabaseBusy after
    `BUSY_RETRY_SECONDS`. On the system clock on purpose, unlike the caches and
    cool-downs (`clock.Monotonic`): every attempt is a real wait inside SQLite
    (`BUSY_TIMEOUT_MS`) for a lock another connection holds, which no injected clock
    could shorten."""

    def said(busy: BaseException, wait: float) -> None:
        log.debug("database locked (%s) while %s; trying again in %.2f s", busy, doing, wait)

    try:
        return await retrying(
            attempt,
            Backoff(BUSY_FIRST_WAIT, BUSY_MAX_WAIT),
            sleep=system_sleep,
            monotonic=system_monotonic,
            retry_on=(_Retry,),
            within=BUSY_RETRY_SECONDS,
            on_retry=said,
        )
    except _Retry as busy:
        raise DatabaseBusy(
            f"the database stayed locked by another process for"
            f" {BUSY_RETRY_SECONDS:.0f} s ({busy.cause}); try again later"
        ) from busy.cause


def _in_transaction(conn: SqliteConnection, work: Work[T]) -> T:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise _Retry(exc) from exc
        raise
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException as exc:
        # A failed COMMIT leaves the transaction open: end it, or the next BEGIN fails.
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as rollback:
                log.error("rollback failed after %r: %s", exc, rollback)
        if is_busy(exc) and not isinstance(exc, DatabaseBusy):
            raise DatabaseBusy(f"the database was locked in the middle of a write: {exc}") from exc
        raise
    return result


def _call(conn: SqliteConnection, work: Work[T]) -> T:
    try:
        return work(conn)
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise _Retry(exc) from exc
        raise


def _connect(path: Path, synchronous: str, migrations: Sequence[Migration]) -> SqliteConnection:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
            factory=SqliteConnection,
        )
    except sqlite3.Error as exc:
        raise IndexUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
        applied = migrate(conn, migrations)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_busy(exc):
            raise _Retry(exc) from exc  # opened again from the start; migrations are idempotent
        raise IndexUnavailable(f"cannot open {path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    return conn


def migrate(conn: SqliteConnection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; return the
    names applied."""
    if not migrations:
        return []
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied: list[str] = []
    for name, sql in migrations:

        def step(conn: Connection, name: str = name, sql: Step = sql) -> None:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                return
            if callable(sql):
                sql(conn)
            else:
                for statement in _statements(sql):
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (name, system_clock().isoformat()),
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


def read_only_rows(path: Path, sql: str) -> list[tuple[Any, ...]] | None:
    """`sql`'s rows from the database file at `path`, opened read-only (blocking; the
    doctor and `--version` look without writing). None when the table is not there yet;
    another failure is a `StorageError`."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2)
    except sqlite3.Error as exc:
        raise storage_error(exc) from exc
    try:
        return [tuple(row) for row in conn.execute(sql)]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise storage_error(exc) from exc
    except sqlite3.Error as exc:
        raise storage_error(exc) from exc
    finally:
        conn.close()


BACKUP_BUSY_MS = 60_000


def copy_database(source: Path, target: Path) -> bool:
    """Copy the database at `source` to `target` in one step of SQLite's online backup
    API (one read transaction: a single consistent version, however busy the writers).
    False when there is no database to copy. Blocking: run it on a worker thread."""
    if not source.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with contextlib.closing(sqlite3.connect(source, timeout=BACKUP_BUSY_MS / 1000)) as reader:
            reader.execute(f"PRAGMA busy_timeout = {BACKUP_BUSY_MS}")
            with contextlib.closing(sqlite3.connect(target)) as writer:
                reader.backup(writer)
                # The copy is one file: no -wal beside it to lose on the way to the backup.
                writer.execute("PRAGMA journal_mode = DELETE")
    except sqlite3.Error as exc:
        raise storage_error(exc) from exc
    return True
