"""Read-only SQL over the workspace database for what the core has no query for yet.

Only SELECTs on the shared aiosqlite connection: WAL readers never block a bot's writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from memory_core.clock import parse_when
from memory_core.db import Database
from memory_core.scope import ScopeKey


@dataclass(frozen=True, slots=True)
class SessionArchive:
    """One session's messages by archive state."""

    session_id: str
    first_at: datetime
    status: str
    unarchived: int
    pending: int
    archived: int


@dataclass(frozen=True, slots=True)
class FailedArchive:
    """Messages whose summary failed and wait for a retry."""

    session_id: str
    messages: int
    attempts: int
    first_at: datetime
    failed_at: datetime | None
    next_at: datetime | None


@dataclass(frozen=True, slots=True)
class ArchiveRun:
    started_at: datetime
    finished_at: datetime | None
    moved: int
    summarized: int
    failed: int


def _when(value: object) -> datetime | None:
    return parse_when(value) if isinstance(value, str) and value else None


async def message_counts(db: Database) -> dict[str, dict[str, int]]:
    """{scope: {'false': n, 'pending': n, 'true': n}} in one query for every scope."""
    async with db.conn.execute(
        "SELECT scope, archived, COUNT(*) FROM messages GROUP BY scope, archived"
    ) as cur:
        rows = await cur.fetchall()
    counts: dict[str, dict[str, int]] = {}
    for scope, state, count in rows:
        counts.setdefault(scope, {"false": 0, "pending": 0, "true": 0})[state] = int(count)
    return counts


async def sessions_by_state(
    db: Database, scope: ScopeKey, limit: int = 100
) -> list[SessionArchive]:
    async with db.conn.execute(
        "SELECT m.session_id, MIN(m.created_at), COALESCE(s.status, '?'),"
        " SUM(m.archived = 'false'), SUM(m.archived = 'pending'), SUM(m.archived = 'true')"
        " FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
        " WHERE m.scope = ? GROUP BY m.session_id ORDER BY MIN(m.created_at) DESC LIMIT ?",
        (scope.value, limit),
    ) as cur:
        rows = await cur.fetchall()
    return [
        SessionArchive(r[0], parse_when(r[1]), r[2], int(r[3]), int(r[4]), int(r[5])) for r in rows
    ]


async def failed_archives(db: Database, scope: ScopeKey) -> list[FailedArchive]:
    async with db.conn.execute(
        "SELECT session_id, COUNT(*), MAX(archive_attempts), MIN(created_at),"
        " MAX(archive_failed_at), MIN(archive_next_at) FROM messages"
        " WHERE scope = ? AND archived = 'false' AND archive_attempts > 0"
        " GROUP BY session_id ORDER BY MIN(archive_next_at)",
        (scope.value,),
    ) as cur:
        rows = await cur.fetchall()
    return [
        FailedArchive(r[0], int(r[1]), int(r[2]), parse_when(r[3]), _when(r[4]), _when(r[5]))
        for r in rows
    ]


async def last_archive_run(db: Database, scope: ScopeKey) -> ArchiveRun | None:
    async with db.conn.execute(
        "SELECT started_at, finished_at, moved, summarized, failed FROM archive_runs"
        " WHERE scope = ? ORDER BY id DESC LIMIT 1",
        (scope.value,),
    ) as cur:
        row = await cur.fetchone()
    if row is None:
        return None
    return ArchiveRun(parse_when(row[0]), _when(row[1]), int(row[2]), int(row[3]), int(row[4]))


async def change_marks(db: Database) -> tuple[int, int]:
    """(PRAGMA data_version, max audit id): the first moves when another connection
    commits, the second when anyone (this process included) audits a change."""
    async with db.conn.execute("PRAGMA data_version") as cur:
        row = await cur.fetchone()
    version = int(row[0]) if row else 0
    async with db.conn.execute("SELECT COALESCE(MAX(id), 0) FROM audit") as cur:
        row = await cur.fetchone()
    return version, int(row[0]) if row else 0


def event_detail(detail: dict[str, object]) -> str:
    return json.dumps(detail, ensure_ascii=False, sort_keys=True)
