"""A PostgreSQL database reached by whole functions, like the SQLite `Database`.

Every call hands a function to a worker thread that borrows a pooled psycopg connection
for it: reads (`read`), statements that each commit by themselves (`autocommit`), or a
transaction (`write`, committed when the function returns, rolled back on any exception). The table owners' functions
are the very ones the SQLite backend runs (`memory_core/base/sql.py`).

*Why psycopg's synchronous API on threads, not its asyncio API:* a chat turn's write is
several statements in one function; on a thread they cost one hop from the event loop,
where the asyncio API would cost an await per statement and a second copy of every
table owner. The pool (psycopg_pool) and the driver are psycopg 3's own; no call blocks
the event loop.

Errors come back in the project's `StorageError` family (`base/errors.py`), the same the
SQLite backend raises (`db.storage_error`): a deadlock or lock timeout is a
`DatabaseBusy`, a refused or lost connection a `DatabaseUnreachable`, a full disk or a
read-only transaction a `DatabaseUnwritable`, a unique key met a `DatabaseConflict`,
damaged data a `DatabaseCorrupt`, the rest a `DatabaseFailure`. No psycopg error leaves
this module; the connection string is never part of a message.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_core.base.clock import Monotonic, system_clock, system_monotonic
from memory_core.base.errors import (
    ConfigError,
    DatabaseBusy,
    DatabaseConflict,
    DatabaseCorrupt,
    DatabaseFailure,
    DatabaseForeign,
    DatabaseUnreachable,
    DatabaseUnwritable,
    StorageError,
)
from memory_core.base.retry import CoolDown
from memory_core.base.sql import Connection, Dialect, data_version
from memory_core.storage.dialects import POSTGRES
from memory_core.storage.migrations import Migration
from memory_core.storage.pg import in_use
from memory_core.storage.pg.connection import PgConnection
from memory_core.storage.pg.migrations import PG_MIGRATIONS

log = logging.getLogger(__name__)
# The pool logs every failed reconnection attempt; an outage is logged once, by the core.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

T = TypeVar("T")
Work = Callable[[Connection], T]

CONNECT_TIMEOUT_SECONDS = 5.0
"""How long a call waits for a connection (a free one of the pool, or a new one); a
server that gives none in this time is taken for unreachable."""
STATEMENT_LOCK_TIMEOUT = "30s"
"""How long one statement waits for a row lock before it is a `DatabaseBusy`."""
FIRST_CONTACT_SECONDS = 3.0
"""How long the start of a workspace that never reached its server waits to connect: a
mistyped or unreachable DSN is one line within about this long (libpq counts whole
seconds)."""
DOWN_SECONDS = 5.0
"""After a call found the server unreachable, calls fail at once for this long instead of
each waiting `CONNECT_TIMEOUT_SECONDS` for a connection: a turn during an outage goes on
degraded (files, spool) without stalling."""

_BUSY = (
    psycopg.errors.DeadlockDetected,
    psycopg.errors.SerializationFailure,
    psycopg.errors.LockNotAvailable,
    psycopg.errors.QueryCanceled,
)
_UNWRITABLE = (
    psycopg.errors.DiskFull,
    psycopg.errors.ReadOnlySqlTransaction,
    psycopg.errors.InsufficientResources,
)
_CORRUPT = (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted)


@dataclass(frozen=True)
class Owner:
    """The workspace that opens a database: its id is recorded there at first use and
    must match at every later open. `adopt`: a database that holds data but no owner
    (made before owners were recorded) becomes this workspace's; a move into a database
    (`chatmem migrate`) never adopts, it wants an empty one or its own."""

    workspace_id: str
    adopt: bool = True


class PgDatabase:
    """Open with `await PgDatabase.open(dsn)`; `close()` when done."""

    dialect: Dialect = POSTGRES

    def __init__(
        self,
        pool: ConnectionPool,
        threads: ThreadPoolExecutor,
        migrations: Sequence[Migration] = PG_MIGRATIONS,
        owner: Owner | None = None,
        *,
        monotonic: Monotonic = system_monotonic,
    ) -> None:
        """`monotonic` times the `DOWN_SECONDS` after the server was found unreachable."""
        self._pool = pool
        self._threads = threads
        self._migrations = migrations
        self._owner = owner
        self._migrated = False
        self._migrating = asyncio.Lock()
        self._closed = False
        self._down = CoolDown(DOWN_SECONDS, monotonic)
        self.writer = uuid.uuid4().hex
        """This process's row in `writers`: its write transactions are counted there."""

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        pool_size: int = 4,
        migrations: Sequence[Migration] = PG_MIGRATIONS,
        owner: Owner | None = None,
        monotonic: Monotonic = system_monotonic,
        known: bool = True,
    ) -> PgDatabase:
        """Connect and migrate, on a connection of its own first: its failure says why
        at once (a refused connection, a name that does not resolve), where the pool
        would only time out.

        A server that cannot be reached now is no error when it is `known` (this
        workspace reached it before: storage/pg/reached.py): every call is a
        `DatabaseUnreachable` until it answers (the core works from its files and its
        spool meanwhile), and the first call that reaches it migrates. One never reached
        is a `ConfigError` within `FIRST_CONTACT_SECONDS`, and so is a server that
        refuses this DSN for good (no such database or role, a password refused) and a
        DSN that is no connection string: one line, never a wait. With an `owner`, a
        database of another workspace is a `DatabaseForeign`, at open or at that first
        call."""
        pool = ConnectionPool(
            dsn,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_SECONDS)},
            configure=_configure_serving,
            # A connection the server dropped (a restart) is found out before use, not by
            # the call that borrows it.
            check=ConnectionPool.check_connection,
            timeout=CONNECT_TIMEOUT_SECONDS,
            open=False,
            name="chatmem",
        )
        threads = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="chatmem-pg")
        database = cls(pool, threads, migrations, owner, monotonic=monotonic)
        wait = CONNECT_TIMEOUT_SECONDS if known else FIRST_CONTACT_SECONDS
        try:
            await database._first_contact(dsn, wait)
            await database._submit(pool.open, False)
        except DatabaseUnreachable as exc:
            refused = refusal(exc)
            if refused is not None or not known:
                await database.close()
                raise ConfigError(_not_reached(refused, exc)) from exc
            log.warning("database unreachable at start, working without it for now: %s", exc)
            await asyncio.get_running_loop().run_in_executor(threads, pool.open, False)
        except BaseException:
            await database.close()
            raise
        return database

    @property
    def migrated(self) -> bool:
        """Whether the server answered and the migrations (and owner) were checked."""
        return self._migrated

    async def _first_contact(self, dsn: str, wait: float) -> None:
        """Migrate over a connection of its own, made with `wait` seconds to connect."""

        def contact() -> list[str]:
            try:
                raw = psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, int(wait)))
            except psycopg.ProgrammingError as exc:  # its text may quote the DSN: not shown
                raise ConfigError(
                    "storage.postgres_dsn is not a PostgreSQL connection string (expected"
                    " postgresql://user@host:port/dbname or key=value pairs)"
                ) from exc
            with raw:
                _configure(raw)
                return migrate(PgConnection(raw, self.writer), self._migrations, self._owner)

        async with self._migrating:
            applied = await self._submit(contact)
            self._migrated = True
        if applied:
            log.info("applied PostgreSQL migrations: %s", ", ".join(applied))

    async def _migrate(self) -> None:
        async with self._migrating:
            if self._migrated:
                return
            applied = await self._submit(
                self._with_connection, lambda conn: migrate(conn, self._migrations, self._owner)
            )
            self._migrated = True
        if applied:
            log.info("applied PostgreSQL migrations: %s", ", ".join(applied))

    async def write(self, work: Work[T]) -> T:
        """`work` inside one transaction; any exception rolls it back and is raised here."""
        if not self._migrated:
            await self._migrate()
        return await self._submit(self._in_transaction, work)

    async def read(self, work: Work[T]) -> T:
        """`work`'s reads outside an explicit transaction. Fetch everything inside
        `work`: a cursor must not leave it."""
        if not self._migrated:
            await self._migrate()
        return await self._submit(self._with_connection, work)

    async def autocommit(self, work: Work[T]) -> T:
        """`work` outside an explicit transaction, each statement committed by itself: a
        write of one statement, or `VACUUM`. It runs as `read` does: only the name differs."""
        return await self.read(work)

    def is_down(self) -> bool:
        """Whether a call found the server unreachable in the last `DOWN_SECONDS`."""
        return self._down.resting()

    def mark_down(self) -> None:
        """Another part of the process (its locks) found the server unreachable."""
        self._down.start()

    async def data_version(self) -> int:
        """The other processes' write transactions, counted: it moves when another
        process commits, never for this one's own writes (like SQLite's)."""
        return await self.read(data_version)

    def _with_connection(self, work: Work[T]) -> T:
        with self._pool.connection() as raw:
            return work(PgConnection(raw, self.writer))

    def _in_transaction(self, work: Work[T]) -> T:
        with self._pool.connection() as raw, raw.transaction():
            conn = PgConnection(raw, self.writer)
            result = work(conn)
            conn.execute(
                "INSERT INTO writers (id, commits) VALUES (?, 1)"
                " ON CONFLICT (id) DO UPDATE SET commits = writers.commits + 1",
                (self.writer,),
            )
            return result

    async def _submit(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise DatabaseUnreachable("the database is closed")
        if self.is_down():
            raise DatabaseUnreachable("the database is unreachable (trying again shortly)")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._threads, fn, *args)
        except psycopg.Error as exc:
            error = translate(exc)
            if isinstance(error, DatabaseUnreachable):
                self.mark_down()
            raise error from exc
        except PoolTimeout as exc:
            self.mark_down()
            raise DatabaseUnreachable(f"no database connection within {exc}") from exc

    async def close(self) -> None:
        """Finish what is queued, then close every connection."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._threads, self._pool.close)
        finally:
            self._threads.shutdown(wait=False)


UNREACHABLE = "the database is unreachable: "


def translate(exc: psycopg.Error) -> StorageError:
    """The project's error for a psycopg one: its message, never the connection string."""
    text = _message(exc)
    if isinstance(exc, _BUSY):
        return DatabaseBusy(f"the database was locked by another writer: {text}")
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return DatabaseConflict(f"database conflict: {text}")
    if isinstance(exc, _UNWRITABLE):
        return DatabaseUnwritable(f"the database cannot write: {text}")
    if isinstance(exc, _CORRUPT):
        return DatabaseCorrupt(f"the database's data is damaged: {text}")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return DatabaseUnreachable(f"{UNREACHABLE}{text}")
    return DatabaseFailure(f"database error: {text}")


REFUSED_FOR_GOOD = (
    "does not exist",
    "authentication failed",
    "no pg_hba.conf entry",
    "permission denied",
)
"""A server's answer to a connection that no retry changes (a database or role that does
not exist, a password or host refused), as libpq words it: the server's SQLSTATE does not
reach a client that could not connect."""


def refusal(exc: DatabaseUnreachable) -> str | None:
    """The server's own words when it answered and refused the connection for good; None
    when it could not be reached (or refused only for now: starting up, shutting down)."""
    cause = exc.__cause__
    text = str(cause) if isinstance(cause, psycopg.Error) else ""
    if "FATAL:" not in text:
        return None
    said = text.split("FATAL:", 1)[1].strip().splitlines()[0].strip()
    return said if any(words in said for words in REFUSED_FOR_GOOD) else None


def _not_reached(refused: str | None, exc: DatabaseUnreachable) -> str:
    if refused is not None:
        return f"the PostgreSQL server refused storage.postgres_dsn: {refused}"
    cause = str(exc).removeprefix(UNREACHABLE)
    return (
        "cannot reach the PostgreSQL server of storage.postgres_dsn, which this workspace"
        f" has never reached: {cause} (check its host, port and database name)"
    )


def _message(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    first = (primary or str(exc)).strip().splitlines()
    return first[0] if first else type(exc).__name__


def _configure(raw: psycopg.Connection[Any]) -> None:
    """Each new connection: a row lock held too long is an error, not an endless wait
    (the DSN's own options, a search_path for instance, stay as given)."""
    raw.execute(f"SET lock_timeout = '{STATEMENT_LOCK_TIMEOUT}'")


def _configure_serving(raw: psycopg.Connection[Any]) -> None:
    """A connection of a process serving the workspace: also marked as in use, so a
    restore refuses while it lives (storage/pg/in_use.py)."""
    _configure(raw)
    in_use.mark(raw)


MIGRATION_LOCK = "chatmem:migrations"
"""Advisory lock name (hashed within the schema) that orders processes migrating at once."""


def migrate(
    conn: Connection,
    migrations: Sequence[Migration] = PG_MIGRATIONS,
    owner: Owner | None = None,
) -> list[str]:
    """Apply every migration not yet recorded, all in one transaction under an advisory
    lock, so two processes starting against a new database cannot both apply one; then
    check (or record) the workspace the database serves."""
    assert isinstance(conn, PgConnection)
    raw = conn.raw
    applied: list[str] = []
    with raw.transaction():
        raw.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))",
            (MIGRATION_LOCK,),
        )
        raw.execute(
            "CREATE TABLE IF NOT EXISTS _migrations"
            " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done = {str(r[0]) for r in raw.execute("SELECT name FROM _migrations")}
        for name, sql in migrations:
            if name in done:
                continue
            if callable(sql):
                sql(conn)
            else:
                raw.execute(sql.encode())  # several statements: the simple query protocol
            raw.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
                (name, system_clock().isoformat()),
            )
            applied.append(name)
        if owner is not None:
            _check_owner(raw, owner)
    return applied


def apply_step(conn: Connection, step: tuple[str, str]) -> bool:
    """A numbered step decided at run time (`storage/pg/migrations.py`: pgvector's column and its
    HNSW indexes), applied once and recorded in `_migrations` as every migration is,
    inside the caller's transaction (`PgDatabase.write`); whether it was applied now.

    Two processes applying the same step at once are ordered by an advisory lock of that
    step's own, not `MIGRATION_LOCK`: building an HNSW index over many rows can take a
    while, and every process's open takes that lock."""
    assert isinstance(conn, PgConnection)
    name, sql = step
    raw = conn.raw
    raw.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || %s, 0))",
        (f"{MIGRATION_LOCK}:{name}",),
    )
    if raw.execute("SELECT 1 FROM _migrations WHERE name = %s", (name,)).fetchone():
        return False
    raw.execute(sql.encode())  # several statements: the simple query protocol
    raw.execute(
        "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
        (name, system_clock().isoformat()),
    )
    log.info("applied PostgreSQL migration %s", name)
    return True


OWNED_TABLES = ("scopes", "sessions", "messages", "audit", "captures")
"""Tables whose rows only a workspace's use makes: any row means the database is used."""


def _check_owner(raw: psycopg.Connection[Any], owner: Owner) -> None:
    """The database's workspace is `owner`'s, recorded now if it has none yet."""
    row = raw.execute("SELECT id FROM workspace").fetchone()
    if row is not None:
        if str(row[0]) != owner.workspace_id:
            raise DatabaseForeign(
                f"this PostgreSQL database belongs to another workspace (id {row[0]}; this"
                f" one is {owner.workspace_id}): give each workspace a database or a schema"
                " of its own"
            )
        return
    used = any(
        raw.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]  # type: ignore[index]
        for table in OWNED_TABLES
    )
    if used and not owner.adopt:
        raise DatabaseForeign(
            "this PostgreSQL database already holds another workspace's data: move into an"
            " empty database or a schema of its own"
        )
    if used:
        log.warning("recording this workspace as the owner of the database it has been using")
    raw.execute(
        "INSERT INTO workspace (id, claimed_at) VALUES (%s, %s)",
        (owner.workspace_id, system_clock().isoformat()),
    )
