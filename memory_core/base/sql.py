"""What the table owners need of a database connection: the part of DB-API both backends
share.

The table owners (history, audit, activations, schedules, the index, the journal) write
their statements once, in the SQL that SQLite 3.35+ and PostgreSQL 15+ both speak (`?`
placeholders, `ON CONFLICT`, `RETURNING`), and run them as whole functions on a
database thread (`Database.run` / `Database.call` for SQLite, `PgDatabase.run` /
`PgDatabase.call` for PostgreSQL). *Why one set of statements and not one module per
backend:* the two backends then cannot drift apart in what they store or how they rank,
which the parametrised test suite checks; what truly differs (FTS5 against a GIN index,
`PRAGMA data_version`, id allocation, `VACUUM`) is asked of `conn.backend` in the few
places that need it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, Protocol, TypeVar

Backend = Literal["sqlite", "postgres"]


class Cursor(Protocol):
    """The rows of one statement (sqlite3's cursor, psycopg's cursor)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection inside one database function: `execute`, `executemany`, and which
    backend it is. Rows are plain tuples on both."""

    backend: Backend

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


def data_version(conn: Connection) -> int:
    """A number that moves when another process commits a change: SQLite's `PRAGMA
    data_version`; on PostgreSQL the sum of the other processes' write transactions
    (`writers`, see memory_core/storage/pg/migrations.py)."""
    if conn.backend == "sqlite":
        return int(conn.execute("PRAGMA data_version").fetchone()[0])
    writer = getattr(conn, "writer", "")
    row = conn.execute("SELECT COALESCE(SUM(commits), 0) FROM writers WHERE id <> ?", (writer,))
    return int(row.fetchone()[0])


T = TypeVar("T")


class Db(Protocol):
    """A database the table owners run their functions on: the SQLite `Database`
    (memory_core/storage/db.py) or the PostgreSQL `PgDatabase` (memory_core/storage/pg/database.py)."""

    backend: Backend

    async def run(self, work: Callable[[Connection], T]) -> T:
        """`work` in one transaction."""
        ...

    async def call(self, work: Callable[[Connection], T]) -> T:
        """`work` outside a transaction: reads, or one statement."""
        ...

    async def data_version(self) -> int:
        """A number that moves when another process commits."""
        ...

    async def close(self) -> None: ...
