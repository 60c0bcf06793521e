"""Moving a workspace's database to the other backend (`chatmem migrate --to ...`).

The memory files stay where they are; what moves is what only the database holds:
session history, archive runs, the audit log, extractions and events, activations,
schedule state, deliveries, the vectors the model made (`embeddings`) and the capture
journal. Rows keep their ids (a message's id is in its index chunk and in archive files'
references), so every row is inserted with its key and `ON CONFLICT DO NOTHING`: a move
that is interrupted is run again and takes up where it stopped, and a move run twice
copies nothing twice. The search index is then built on the target from the files (a
rebuild), and the chunks of messages not yet archived, which no file holds, are copied
with their tokens; their vectors are found again in `embeddings` by the backfill.

This module knows every table, as the migrations do; it writes them only through the
two databases' `read`/`write`, on the target inside one transaction per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.clock import parse_when
from memory_core.base.sql import Connection, Db
from memory_core.recall.index import writes

BATCH = 1000
"""Rows per read and per target transaction."""

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sessions", ("id",)),
    ("messages", ("id",)),
    ("archive_runs", ("id",)),
    ("audit", ("id",)),
    ("extractions", ("scope", "session_id")),
    ("events", ("id",)),
    ("activations", ("scope", "entry_id", "session_id")),
    ("schedule_state", ("name",)),
    ("deliveries", ("channel", "chat_id", "message_id")),
    ("embeddings", ("model", "text_hash")),
)
"""The main database's tables that move, each with its key (the order of reading)."""

IDENTITY = ("messages", "archive_runs", "audit", "events")
"""Tables whose ids the database assigns: on PostgreSQL their sequences move past the
copied ids."""

Progress = Callable[[str, int, int], None]
"""(what, done, total)."""


@dataclass
class MoveReport:
    copied: dict[str, int] = field(default_factory=dict)
    """New rows on the target per table (0 for a table moved already)."""
    read: dict[str, int] = field(default_factory=dict)
    message_chunks: int = 0
    kept_aside: list[Path] = field(default_factory=list)
    """Files the target kept aside, stale from before the workspace moved away (the
    SQLite database and journal when moving back to SQLite): the person's to delete."""


async def count(db: Db, table: str) -> int:
    rows = await db.read(lambda conn: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchall())
    return int(rows[0][0])


async def copy_table(
    source: Db,
    target: Db,
    table: str,
    key: Sequence[str],
    report: MoveReport,
    progress: Progress | None = None,
) -> None:
    """Every row of `table`, in key order, a batch per target transaction."""
    total = await count(source, table)
    order = ", ".join(key)
    done = 0
    after: tuple[Any, ...] | None = None
    columns: list[str] = []
    while True:
        page, columns = await source.read(
            partial(_page, table=table, key=key, order=order, after=after)
        )
        if not page:
            break
        names = ", ".join(columns)
        marks = ", ".join("?" * len(columns))
        sql = f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        added = await target.write(partial(_insert, sql=sql, rows=page))
        report.copied[table] = report.copied.get(table, 0) + added
        done += len(page)
        report.read[table] = done
        after = tuple(page[-1][columns.index(k)] for k in key)
        if progress is not None:
            progress(table, done, total)
    report.copied.setdefault(table, 0)
    report.read.setdefault(table, 0)
    if table in IDENTITY:
        await target.autocommit(lambda conn: conn.dialect.follow_identity(conn, table, "id"))


def _page(
    conn: Connection,
    table: str,
    key: Sequence[str],
    order: str,
    after: tuple[Any, ...] | None,
) -> tuple[list[tuple[Any, ...]], list[str]]:
    where, params = "", []
    if after is not None:
        where = f"WHERE ({order}) > ({', '.join('?' * len(key))})"
        params = list(after)
    cursor = conn.execute(
        f"SELECT * FROM {table} {where} ORDER BY {order} LIMIT ?", [*params, BATCH]
    )
    rows = [tuple(r) for r in cursor.fetchall()]
    description = getattr(cursor, "description", None) or ()
    return rows, [str(d[0]) for d in description]


def _insert(conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> int:
    added = 0
    for row in rows:  # rowcount per row: executemany's is not the same on both drivers
        added += max(conn.execute(sql, row).rowcount, 0)
    return added


async def copy_captures(source: Db, target: Db, report: MoveReport) -> None:
    """The capture journal's rows not yet written to MEMORY.md (none when every process
    of the workspace stopped cleanly), with their sequence numbers."""
    await copy_table(source, target, "captures", ("seq",), report)
    await target.autocommit(lambda conn: conn.dialect.follow_identity(conn, "captures", "seq"))


async def copy_message_chunks(
    source: Db, target: Db, report: MoveReport, progress: Progress | None = None
) -> None:
    """Index chunks of messages (a file holds none of them until they are archived),
    under the target's scope ids; a chunk the target holds already is left alone."""
    rows = await source.read(
        lambda conn: conn.execute(
            "SELECT s.key, c.path, c.line_from, c.line_to, c.created_at, c.ref, c.text,"
            " c.tokens FROM chunks AS c JOIN scopes AS s ON s.id = c.scope_id"
            " WHERE c.kind = 'message' ORDER BY s.key, c.path, c.line_from"
        ).fetchall()
    )
    by_scope: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        by_scope.setdefault(str(row[0]), []).append(tuple(row[1:]))
    done = 0
    for key, chunks in by_scope.items():
        report.message_chunks += await target.write(
            partial(_add_message_chunks, key=key, chunks=chunks)
        )
        done += len(chunks)
        if progress is not None:
            progress("message chunks", done, len(rows))


def _add_message_chunks(conn: Connection, key: str, chunks: list[tuple[Any, ...]]) -> int:
    sid = writes.ensure_scope(conn, key)
    held = {
        (str(r[0]), int(r[1]))
        for r in conn.execute(
            "SELECT path, line_from FROM chunks WHERE scope_id = ? AND kind = 'message'", (sid,)
        )
    }
    by_path: dict[str, list[tuple[Chunk, str]]] = {}
    for path, line_from, line_to, created_at, ref, text, tokens in chunks:
        if (str(path), int(line_from)) in held:
            continue
        chunk = Chunk(
            int(line_from),
            int(line_to),
            str(text),
            parse_when(str(created_at)) if created_at else None,
            ref=str(ref) if ref is not None else None,
        )
        by_path.setdefault(str(path), []).append((chunk, str(tokens)))
    for path, prepared in by_path.items():
        writes.insert_chunks(conn, sid, path, ChunkKind.MESSAGE, prepared)
    return sum(len(p) for p in by_path.values())
