"""A short read-only visit of a PostgreSQL database for `chatmem --version` and `chatmem
doctor` (memory_core/ops): the migrations it recorded, the capture journal's depth and
pgvector, on a connection of its own (no pool, nothing written). Blocking; psycopg's
errors pass to the caller, whose one line says them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True)
class Probe:
    migrations: set[str]
    journal_rows: int | None
    """Captures waiting in the journal; None when its table is not made yet."""
    pgvector: str | None
    """The installed version, "" when the server has none, None when it could not tell."""
    pgvector_available: bool


def migrations(dsn: str, connect_seconds: int) -> set[str]:
    with psycopg.connect(dsn, connect_timeout=connect_seconds, autocommit=True) as conn:
        return _migrations(conn)


def probe(dsn: str, connect_seconds: int) -> Probe:
    with psycopg.connect(dsn, connect_timeout=connect_seconds, autocommit=True) as conn:
        journal: int | None = None
        if _has_table(conn, "captures"):
            row = conn.execute("SELECT COUNT(*) FROM captures").fetchone()
            journal = int(row[0]) if row else 0
        version: str | None
        try:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            version = str(row[0]) if row else ""
            available = (
                conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            ).fetchone() is not None
        except psycopg.Error:
            version, available = None, False
        return Probe(_migrations(conn), journal, version, available)


def _migrations(conn: Any) -> set[str]:
    if not _has_table(conn, "_migrations"):
        return set()
    return {str(r[0]) for r in conn.execute("SELECT name FROM _migrations")}


def _has_table(conn: Any, name: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
    return row is not None and row[0] is not None


def unreachable(dsn: str, connect_seconds: int) -> str | None:
    """Why the server cannot be reached now (one line, never the DSN), or None when a
    connection opens."""
    from memory_core.storage.pg.database import translate

    try:
        psycopg.connect(dsn, connect_timeout=connect_seconds, autocommit=True).close()
    except psycopg.Error as exc:
        return str(translate(exc))
    return None
