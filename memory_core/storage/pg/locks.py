"""PostgreSQL advisory locks as the cross-process layer of `LockRegistry`.

Several bot processes on different hosts share one workspace (a shared volume) and one
database; a lock file on a network file system is only as good as that file system's
locking, an advisory lock is the database's own. Each held lock keeps one connection of
a pool of its own (a session-level lock lives as long as its connection), so holding
locks never starves the queries. The key is the lock's name hashed within the schema: two
workspaces in two schemas of one database never share a lock.

If the connection of a held lock breaks, the server releases the lock; the holder is not
told. What the locks guard tolerates that (a MEMORY.md write is atomic and re-reads the
file under the lock), and the database is the one place that still orders the writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.errors
from filelock import Timeout
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_core.base.errors import DatabaseUnreachable
from memory_core.storage.pg.database import CONNECT_TIMEOUT_SECONDS

KEY = "hashtextextended(current_schema() || ':' || %s, 0)"
"""A lock name's 64-bit advisory key, per schema."""


@dataclass(frozen=True, slots=True)
class Held:
    name: str
    conn: psycopg.Connection[Any]


class AdvisoryLocks:
    """`ProcessLocks` over `pg_advisory_lock`; `close()` when done."""

    fast_path = False

    def __init__(self, dsn: str, *, timeout: float = 60.0, max_held: int = 32) -> None:
        self._timeout = timeout
        self._pool = ConnectionPool(
            dsn,
            min_size=0,
            max_size=max_held,
            kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT_SECONDS)},
            configure=self._configure,
            # Waiting for a connection is not waiting for the lock: a server that gives
            # none soon is away, and the caller falls back to lock files.
            timeout=CONNECT_TIMEOUT_SECONDS,
            open=False,
            name="chatmem-locks",
        )

    def _configure(self, raw: psycopg.Connection[Any]) -> None:
        raw.execute(f"SET lock_timeout = '{int(self._timeout * 1000)}ms'")

    def open(self) -> None:
        """Blocking: make the pool (its connections come on first use)."""
        self._pool.open(wait=False)

    def take(self, name: str) -> object:
        conn = self._connection()
        try:
            conn.execute(f"SELECT pg_advisory_lock({KEY})", (name,))
        except psycopg.errors.LockNotAvailable as exc:
            self._pool.putconn(conn)
            raise Timeout(name) from exc
        except psycopg.Error as exc:
            self._pool.putconn(conn)
            raise DatabaseUnreachable(f"cannot take lock {name}: {exc}") from exc
        return Held(name, conn)

    def try_take(self, name: str) -> object | None:
        conn = self._connection()
        try:
            row = conn.execute(f"SELECT pg_try_advisory_lock({KEY})", (name,)).fetchone()
        except psycopg.Error as exc:
            self._pool.putconn(conn)
            raise DatabaseUnreachable(f"cannot take lock {name}: {exc}") from exc
        if not (row and row[0]):
            self._pool.putconn(conn)
            return None
        return Held(name, conn)

    def give_back(self, handle: object) -> None:
        assert isinstance(handle, Held)
        try:
            handle.conn.execute(f"SELECT pg_advisory_unlock({KEY})", (handle.name,))
        except psycopg.Error:
            # Broken, or the lock state unknown: never hand this session out again (the
            # server releases whatever it held when it closes).
            handle.conn.close()
        finally:
            self._pool.putconn(handle.conn)

    def _connection(self) -> psycopg.Connection[Any]:
        try:
            return self._pool.getconn()
        except PoolTimeout as exc:
            raise DatabaseUnreachable(f"no connection for a lock within {exc}") from exc

    def close(self) -> None:
        self._pool.close()
