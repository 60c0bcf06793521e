"""What the table owners need of a database connection: the part of DB-API both backends
share.

The table owners (history, audit, activations, schedules, the index, the journal) write
their statements once, in the SQL that SQLite 3.35+ and PostgreSQL 15+ both speak (`?`
placeholders, `ON CONFLICT`, `RETURNING`), and run them as whole functions on a
database thread (`Db.write` for a transaction, `Db.read` for reads, `Db.autocommit` for
a write of one statement; `Database` for SQLite, `PgDatabase` for PostgreSQL). *Why one set of statements and not one module per
backend:* the two backends then cannot drift apart in what they store or how they rank,
which the parametrised test suite checks; what truly differs (FTS5 against a GIN index,
`PRAGMA data_version`, id allocation, `VACUUM`, a list of ids as one array) is asked of
the connection's `Dialect` (`conn.dialect`, one per kind in memory_core/storage/dialects.py),
never of the backend's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

BackendName = Literal["sqlite", "postgres"]
"""The `storage.backend` setting: which kind of database a workspace keeps."""

FullText = Literal["fts5", "gin"]
"""How the schema indexes a chunk's terms: SQLite's FTS5 table, or PostgreSQL's GIN index
over an array of postings (memory_core/recall/index/postings.py)."""


class Cursor(Protocol):
    """The rows of one statement (sqlite3's cursor, psycopg's cursor)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection inside one database function: `execute`, `executemany`, and the
    dialect it speaks. Rows are plain tuples on both."""

    @property
    def dialect(self) -> Dialect: ...

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


class Dialect(Protocol):
    """What differs between the two databases, as methods and attributes: the code asks
    these and never compares a backend's name, so a third backend is one more dialect
    (memory_core/storage/dialects.py, which holds one per kind)."""

    @property
    def name(self) -> BackendName:
        """The `storage.backend` value that chooses this dialect."""
        ...

    @property
    def is_server(self) -> bool:
        """A server shared by every process of the workspace, reached by a DSN (it may be
        unreachable for a while: writes are spooled; pgvector may serve vectors), rather
        than files of the workspace."""
        ...

    @property
    def full_text(self) -> FullText:
        """How the schema indexes a chunk's terms."""
        ...

    @property
    def begin_read_snapshot(self) -> str:
        """The statement that opens a read transaction seeing one state of the database."""
        ...

    def data_version(self, conn: Connection) -> int:
        """A number that moves when another process commits a change."""
        ...

    def any_of(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """A condition "`column` is one of `values`" and its parameters."""
        ...

    def rows_as(
        self, name: str, columns: Mapping[str, str], rows: Sequence[Sequence[object]]
    ) -> tuple[str, list[object]]:
        """A `WITH` clause naming `rows` the table `name` of `columns` (name → SQL type:
        TEXT, BIGINT), and its parameters: one statement over many rows, given as one
        parameter or one per column, not a statement per row (which holds the
        interpreter's lock while each row is bound)."""
        ...

    def vacuum(self, conn: Connection, tables: Sequence[str]) -> bool:
        """Drop the old versions of deleted rows of `tables` (on SQLite, of the whole
        file, then its WAL emptied); False when another reader kept some of them."""
        ...

    def follow_identity(self, conn: Connection, table: str, column: str) -> None:
        """After rows were copied in with their ids: the next id `table` makes comes
        after them."""
        ...


def data_version(conn: Connection) -> int:
    """A number that moves when another process commits a change (see `Dialect`)."""
    return conn.dialect.data_version(conn)


T = TypeVar("T")


class Db(Protocol):
    """A database the table owners run their functions on: the SQLite `Database`
    (memory_core/storage/db.py) or the PostgreSQL `PgDatabase` (memory_core/storage/pg/database.py)."""

    @property
    def dialect(self) -> Dialect: ...

    async def write(self, work: Callable[[Connection], T]) -> T:
        """`work` in one write transaction."""
        ...

    async def read(self, work: Callable[[Connection], T]) -> T:
        """`work`'s reads, outside a transaction."""
        ...

    async def autocommit(self, work: Callable[[Connection], T]) -> T:
        """`work`'s writes outside a transaction, each statement committed by itself: a
        write of one statement (no transaction to pay for), or one that cannot run in a
        transaction (`VACUUM`)."""
        ...

    async def data_version(self) -> int:
        """A number that moves when another process commits."""
        ...

    async def close(self) -> None: ...
