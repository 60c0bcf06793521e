"""SQLite's one FTS5 table of every scope's chunks, and the step that moves an index of
per-scope tables into it (docs/decisions/0010-one-fts-table.md).

A table per scope put ~5 schema objects per scope in the database, which every
connection's first statement loads (50 000 at 10 000 scopes), and made a reindex drop
and create them all. The shared table is contentless (`chunks.tokens` holds the text);
each term is prefixed by its scope's id and `x` (`12xtea`), so a scope's postings are
its own terms, as PostgreSQL keys its GIN postings by (scope, term).
"""

from __future__ import annotations

import re

from memory_core.base.sql import Connection

FTS_TABLE = "fts_scoped"
FTS_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(tokens, content='',"
    " tokenize='unicode61 remove_diacritics 0')"
)
_PER_SCOPE = re.compile(r"fts_[0-9]+")


def scoped(sid: int, tokens: str) -> str:
    """A chunk's terms as the shared table indexes them, each prefixed by its scope.
    Every term is one unicode61 token (tests/unit/test_text.py), and digits and `x` are
    token characters, so a prefixed term stays one token; `scoped_sql` is the same in SQL."""
    prefix = f"{int(sid)}x"
    return prefix + tokens.replace(" ", " " + prefix) if tokens else ""


def scoped_sql(sid: str, tokens: str) -> str:
    """`scoped` as an SQL expression of the columns `sid` and `tokens`."""
    prefix = f"CAST({sid} AS TEXT) || 'x'"
    return f"CASE WHEN {tokens} = '' THEN '' ELSE {prefix} || replace({tokens}, ' ', ' ' || {prefix}) END"


def scope_range(sid: int) -> tuple[str, str]:
    """One scope's scoped terms as a half-open range of the table's vocabulary: `12x` up
    to `12y` (`123x...` sorts before `12x`, so no other scope's term falls in it)."""
    return f"{int(sid)}x", f"{int(sid)}y"


def fill_shared(conn: Connection) -> None:
    """Every chunk's scoped terms into the (empty) shared table, in id order, in one
    statement: the migration from per-scope tables, and a reset's kept messages."""
    conn.execute(
        f"INSERT INTO {FTS_TABLE} (rowid, tokens) SELECT id,"
        f" {scoped_sql('scope_id', 'tokens')} FROM chunks ORDER BY id"
    )


def one_table(conn: Connection) -> None:
    """Migration step: the shared table made and filled from `chunks`, and every
    per-scope table (`fts_<scope id>`, with its shadow tables) dropped."""
    conn.execute(FTS_DDL)
    fill_shared(conn)
    names = [
        str(name)
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'fts_[0-9]*'"
        ).fetchall()
    ]
    for name in names:
        if _PER_SCOPE.fullmatch(name):
            conn.execute(f"DROP TABLE IF EXISTS {name}")
