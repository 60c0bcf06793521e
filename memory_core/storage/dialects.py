"""The two SQL dialects, one object per kind of database, and the one place a
`storage.backend` name becomes one (`dialect_for`).

The table owners write their statements once (memory_core/base/sql.py); what the two
databases do differently is a method or an attribute here, asked of the connection
(`conn.dialect`) or of the configured kind. No code compares a backend's name, so a third
backend is one more class and one more entry in `DIALECTS` (a test greps for the
comparisons: tests/unit/test_rule_dialect.py). Neither class imports a driver: the CLI
asks them before any database is opened.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from memory_core.base.errors import ConfigError
from memory_core.base.sql import BackendName, Connection, Dialect, FullText


class SqliteDialect:
    """SQLite 3.35+: files of the workspace, FTS5, `PRAGMA data_version`."""

    name: BackendName = "sqlite"
    is_server = False
    full_text: FullText = "fts5"
    begin_read_snapshot = "BEGIN"

    def data_version(self, conn: Connection) -> int:
        return int(conn.execute("PRAGMA data_version").fetchone()[0])

    def any_of(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def rows_as(
        self, name: str, columns: Mapping[str, str], rows: Sequence[Sequence[object]]
    ) -> tuple[str, list[object]]:
        # One JSON text, read once (MATERIALIZED: flattened into the statement, it was
        # read again for each row of the table it is joined to).
        picked = ", ".join(f"json_extract(value, '$[{n}]')" for n in range(len(columns)))
        return (
            f"WITH {name}({', '.join(columns)}) AS MATERIALIZED"
            f" (SELECT {picked} FROM json_each(?))",
            [json.dumps(list(rows), ensure_ascii=False)],
        )

    def vacuum(self, conn: Connection, tables: Sequence[str]) -> bool:
        # SQLite keeps deleted text in free parts of its pages and old pages in the WAL:
        # the whole file is rewritten, whatever `tables` names, then the WAL emptied.
        conn.execute("VACUUM")
        return not conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]

    def follow_identity(self, conn: Connection, table: str, column: str) -> None:
        return None  # a rowid after the largest one already


class PostgresDialect:
    """PostgreSQL 15+: a server shared by the workspace's processes, a GIN index of
    postings, arrays as parameters."""

    name: BackendName = "postgres"
    is_server = True
    full_text: FullText = "gin"
    begin_read_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    def data_version(self, conn: Connection) -> int:
        # The other processes' write transactions, counted in `writers`
        # (memory_core/storage/pg/migrations.py): never this process's own.
        writer = getattr(conn, "writer", "")
        row = conn.execute("SELECT COALESCE(SUM(commits), 0) FROM writers WHERE id <> ?", (writer,))
        return int(row.fetchone()[0])

    def any_of(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        # One array parameter: as many parameters as values slowed parsing and planning.
        return f"{column} = ANY(?)", [list(values)]

    def rows_as(
        self, name: str, columns: Mapping[str, str], rows: Sequence[Sequence[object]]
    ) -> tuple[str, list[object]]:
        # One array per column, side by side, typed (an untyped array matches no unnest).
        marks = ", ".join(f"?::{kind}[]" for kind in columns.values())
        return (
            f"WITH {name}({', '.join(columns)}) AS (SELECT * FROM unnest({marks}))",
            [list(column) for column in zip(*rows, strict=True)] or [[] for _ in columns],
        )

    def vacuum(self, conn: Connection, tables: Sequence[str]) -> bool:
        for table in dict.fromkeys(tables):
            conn.execute(f"VACUUM FULL {table}")
        return True

    def follow_identity(self, conn: Connection, table: str, column: str) -> None:
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
            f" GREATEST((SELECT COALESCE(MAX({column}), 0) FROM {table}), 1))"
        )


SQLITE = SqliteDialect()
POSTGRES = PostgresDialect()
DIALECTS: dict[str, Dialect] = {dialect.name: dialect for dialect in (SQLITE, POSTGRES)}
"""Every dialect by its `storage.backend` name."""


def dialect_for(name: str) -> Dialect:
    """The dialect a `storage.backend` value names; a `ConfigError` for any other."""
    try:
        return DIALECTS[name]
    except KeyError:
        known = ", ".join(repr(n) for n in DIALECTS)
        raise ConfigError(f"storage.backend = {name!r} is not one of {known}") from None
