"""The `scope_summaries` table: per scope, what `chatmem scopes` and `stats` need of its
files (the entries' scoring fields, quarantined blocks, daily files) and the stamp of
the files it was read from, so a listing of 10 000 scopes reads no memory file that has
not changed since (`memory_core/scope_listing/`). Made by the listing, a reindex and a
scope's sync, by the rules of `summary_format.py`. The same on both backends."""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.base.sql import Connection

SCOPE_SUMMARIES = """
    CREATE TABLE scope_summaries (
        scope_id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        stamp TEXT NOT NULL,
        payload TEXT NOT NULL
    );
"""
"""`key` beside `scope_id`: a row is used only while the id still names that key (an id
SQLite hands out again after a reset names another scope). `payload` is
`summary_format.encode`'s JSON. PostgreSQL's `scope_id` is a BIGINT, as its
`scopes.id`."""


def read_all(conn: Connection) -> dict[str, tuple[int, str, str]]:
    """key → (scope id, stamp, payload) of every summary whose scope row still holds it."""
    rows = conn.execute(
        "SELECT s.key, s.id, m.stamp, m.payload FROM scope_summaries m"
        " JOIN scopes s ON s.id = m.scope_id AND s.key = m.key"
    )
    return {str(r[0]): (int(r[1]), str(r[2]), str(r[3])) for r in rows}


_UPSERT = (
    "INSERT INTO scope_summaries (scope_id, key, stamp, payload) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (scope_id) DO UPDATE SET key = excluded.key,"
    " stamp = excluded.stamp, payload = excluded.payload"
)


def write(conn: Connection, sid: int, key: str, stamp: str, payload: str) -> None:
    """Scope `sid`'s summary, made or replaced."""
    conn.execute(_UPSERT, (sid, key, stamp, payload))


def write_many(conn: Connection, rows: Sequence[tuple[int, str, str, str]]) -> None:
    """`write` of each (scope id, key, stamp, payload), in one statement."""
    conn.executemany(_UPSERT, rows)
