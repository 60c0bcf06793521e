"""Session history in SQLite: sessions per scope, every message, and the archive state.

The caps follow the reference rules exactly: past the soft cap (200) the oldest archived
messages go first; an unarchived or pending message is never dropped, the history may run
over and an archive is forced instead; past the hard cap (300 messages or 10 MB) the same,
plus a `history_overflow` event.
"""

from __future__ import annotations

import functools
import json
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import aiosqlite

from memory_core.clock import format_when, parse_when
from memory_core.config import HistorySettings
from memory_core.db import Database, first
from memory_core.scope import ScopeKey


class ArchiveState(StrEnum):
    FALSE = "false"
    PENDING = "pending"
    TRUE = "true"


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    scope: str
    session_id: str
    role: str
    speaker: str
    content: str
    created_at: datetime
    archived: ArchiveState
    archive_attempts: int
    archive_next_at: datetime | None
    compacted: bool
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    scope: str
    started_at: datetime
    last_at: datetime
    status: str
    extract_attempts: int
    next_extract_at: datetime | None
    flushed_at: datetime | None


@dataclass(frozen=True, slots=True)
class CapReport:
    removed: list[int]
    over_soft: bool
    overflow: bool
    """True when the hard cap is still exceeded by unarchived messages: archive now."""


_MESSAGE_COLUMNS = (
    "id, scope, session_id, role, speaker, content, created_at, archived, archive_attempts,"
    " archive_next_at, compacted, meta"
)


_ARCHIVE_STATES = {state.value: state for state in ArchiveState}


@functools.lru_cache(maxsize=4096)
def _when(text: str) -> datetime:
    """`parse_when`, remembered: every turn re-reads the same few dozen message times."""
    return parse_when(text)


def _message(row: aiosqlite.Row) -> StoredMessage:
    meta = row[11]
    return StoredMessage(
        id=int(row[0]),
        scope=row[1],
        session_id=row[2],
        role=row[3],
        speaker=row[4],
        content=row[5],
        created_at=_when(row[6]),
        archived=_ARCHIVE_STATES.get(row[7]) or ArchiveState(row[7]),
        archive_attempts=int(row[8]),
        archive_next_at=_when(row[9]) if row[9] else None,
        compacted=bool(row[10]),
        meta=json.loads(meta) if meta and meta != "{}" else {},
    )


def _session(row: aiosqlite.Row) -> Session:
    return Session(
        id=row[0],
        scope=row[1],
        started_at=parse_when(row[2]),
        last_at=parse_when(row[3]),
        status=row[4],
        extract_attempts=int(row[5]),
        next_extract_at=parse_when(row[6]) if row[6] else None,
        flushed_at=parse_when(row[7]) if row[7] else None,
    )


@dataclass(frozen=True, slots=True)
class TurnContext:
    messages: list[StoredMessage]
    """Newest live messages of the session, oldest first, its summary in front."""
    chars: int
    """Characters of the session's live messages (SQLite `LENGTH`), as `session_chars`."""


AfterInsert = Callable[[sqlite3.Connection, int], None]
"""A step of a message's insert transaction, given the new message id; it runs on the
database thread (`Database.run`), so it must not touch the event loop."""

SUMMARY_ROLE = "summary"
"""The role of a compaction summary (prompting.SUMMARY_ROLE; prompting imports this module)."""


def sql_length(text: str) -> int:
    """What SQLite's `LENGTH` gives for a text value: characters before the first NUL."""
    return len(text.partition("\x00")[0])


_SESSION_COLUMNS = (
    "id, scope, started_at, last_at, status, extract_attempts, next_extract_at, flushed_at"
)


class HistoryStore:
    def __init__(self, db: Database, settings: HistorySettings) -> None:
        self._db = db
        self._conn = db.conn
        self.settings = settings

    # --- sessions -------------------------------------------------------------------
    async def open_session(self, scope: ScopeKey, now: datetime) -> Session:
        """The scope's open session, started if there is none."""
        current = await self.current_session(scope)
        if current is not None:
            return current
        session_id = f"{now.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(4)}"
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO sessions (id, scope, started_at, last_at) VALUES (?, ?, ?, ?)",
                (session_id, scope.value, format_when(now), format_when(now)),
            )
        session = await self.get_session(session_id)
        assert session is not None
        return session

    async def current_session(self, scope: ScopeKey) -> Session | None:
        rows = await self._conn.execute_fetchall(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE scope = ? AND status = 'open'"
            " ORDER BY started_at DESC LIMIT 1",
            (scope.value,),
        )
        row = first(rows)
        return _session(row) if row else None

    async def get_session(self, session_id: str) -> Session | None:
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ) as cur:
            row = await cur.fetchone()
        return _session(row) if row else None

    async def close_session(self, session_id: str, now: datetime) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET status = 'closed', closed_at = ? WHERE id = ? AND status = 'open'",
                (format_when(now), session_id),
            )

    async def mark_extracted(self, session_id: str, stats: dict[str, int]) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET status = 'extracted', next_extract_at = NULL, stats = ?"
                " WHERE id = ?",
                (json.dumps(stats), session_id),
            )

    async def mark_extract_failed(self, session_id: str, next_at: datetime) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET status = 'extract_failed', extract_attempts ="
                " extract_attempts + 1, next_extract_at = ? WHERE id = ?",
                (format_when(next_at), session_id),
            )

    async def mark_flushed(self, session_id: str, now: datetime) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET flushed_at = ? WHERE id = ?", (format_when(now), session_id)
            )

    async def sessions_due(self, now: datetime, idle_before: datetime) -> list[Session]:
        """Open sessions idle since `idle_before`, and failed extractions due for a retry."""
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE (status = 'open' AND last_at < ?)"
            " OR (status IN ('closed', 'extract_failed') AND (next_extract_at IS NULL"
            " OR next_extract_at <= ?)) ORDER BY last_at",
            (format_when(idle_before), format_when(now)),
        ) as cur:
            return [_session(r) for r in await cur.fetchall()]

    async def open_sessions(self) -> list[Session]:
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE status = 'open'"
        ) as cur:
            return [_session(r) for r in await cur.fetchall()]

    # --- messages -------------------------------------------------------------------
    async def add_message(
        self,
        scope: ScopeKey,
        session_id: str,
        role: str,
        content: str,
        now: datetime,
        *,
        speaker: str = "",
        meta: dict[str, Any] | None = None,
        then: AfterInsert | None = None,
    ) -> StoredMessage:
        """Store one message and touch its session.

        The transaction runs in one call on the database thread (`run`), and
        `then` adds to the same transaction (see `AfterInsert`): a chat turn indexes the
        message (and records used entries) there, so one commit and one round trip cover
        what took two or three commits and a dozen round trips, and the message is never
        stored without its index row.
        """
        encoded = json.dumps(meta or {}, ensure_ascii=False)
        row = (
            scope.value,
            session_id,
            role,
            speaker,
            content,
            format_when(now),
            len(content.encode("utf-8")) + len(encoded),
            encoded,
        )

        def write(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO messages (scope, session_id, role, speaker, content, created_at,"
                " bytes, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            message_id = int(cursor.lastrowid or 0)
            conn.execute(
                "UPDATE sessions SET last_at = ? WHERE id = ?", (format_when(now), session_id)
            )
            if then is not None:
                then(conn, message_id)
            return message_id

        message_id = await self._db.run(write)
        return StoredMessage(
            id=message_id,
            scope=scope.value,
            session_id=session_id,
            role=role,
            speaker=speaker,
            content=content,
            created_at=now,
            archived=ArchiveState.FALSE,
            archive_attempts=0,
            archive_next_at=None,
            compacted=False,
            meta=meta or {},
        )

    async def session_messages(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[StoredMessage]:
        extra = "" if include_compacted else " AND compacted = 0"
        async with self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ?{extra} ORDER BY id",
            (session_id,),
        ) as cur:
            return [_message(r) for r in await cur.fetchall()]

    async def latest_session_messages(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The session's newest `limit` messages that are not compacted, oldest first; a
        turn needs only the tail, not a history that grows with every message."""
        rows = await self._conn.execute_fetchall(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND compacted = 0"
            " ORDER BY id DESC LIMIT ?",
            (session_id, limit),
        )
        return [_message(r) for r in reversed(list(rows))]

    async def turn_context(self, session_id: str, limit: int) -> TurnContext:
        """What a chat turn reads from the history, in one round trip instead of three.

        The session's newest `limit` live messages (oldest first), preceded by its latest
        summary when none of them is one (`latest_session_messages` + `latest_of_role`),
        and the characters of its live messages (`session_chars`) before the turn.
        """
        rows = await self._conn.execute_fetchall(
            f"SELECT * FROM (SELECT {_MESSAGE_COLUMNS}, 0 FROM messages WHERE session_id = ?1"
            " AND compacted = 0 ORDER BY id DESC LIMIT ?2)"
            f" UNION ALL SELECT * FROM (SELECT {_MESSAGE_COLUMNS}, 1 FROM messages"
            " WHERE session_id = ?1 AND role = ?3 ORDER BY id DESC LIMIT 1)"
            " UNION ALL SELECT COALESCE(SUM(LENGTH(content)), 0), NULL, NULL, NULL, NULL, NULL,"
            " NULL, NULL, NULL, NULL, NULL, NULL, 2 FROM messages WHERE session_id = ?1"
            " AND compacted = 0",
            (session_id, limit, SUMMARY_ROLE),
        )
        latest: list[StoredMessage] = []
        summary: StoredMessage | None = None
        chars = 0
        for row in rows:
            part = row[12]
            if part == 0:
                latest.append(_message(row))
            elif part == 1:
                summary = _message(row)
            else:
                chars = int(row[0])
        latest.reverse()
        if latest and summary is not None and not any(m.role == SUMMARY_ROLE for m in latest):
            latest.insert(0, summary)
        return TurnContext(latest, chars)

    async def latest_of_role(self, session_id: str, role: str) -> StoredMessage | None:
        async with self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND role = ?"
            " ORDER BY id DESC LIMIT 1",
            (session_id, role),
        ) as cur:
            row = await cur.fetchone()
        return _message(row) if row else None

    async def session_chars(self, session_id: str) -> int:
        """Characters of the session's live (uncompacted) messages: an upper bound of its
        tokens, cheap enough to check after every turn."""
        row = first(
            await self._conn.execute_fetchall(
                "SELECT COALESCE(SUM(LENGTH(content)), 0) FROM messages WHERE session_id = ?"
                " AND compacted = 0",
                (session_id,),
            )
        )
        return int(row[0]) if row else 0

    async def recent_messages(self, scope: ScopeKey, limit: int) -> list[StoredMessage]:
        """The scope's newest messages (any session), oldest first."""
        async with self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = ? ORDER BY id DESC LIMIT ?",
            (scope.value, limit),
        ) as cur:
            rows = list(await cur.fetchall())
        return [_message(r) for r in reversed(rows)]

    async def mark_compacted(self, message_ids: list[int]) -> None:
        if not message_ids:
            return
        async with self._db.transaction() as conn:
            await conn.executemany(
                "UPDATE messages SET compacted = 1 WHERE id = ?", [(i,) for i in message_ids]
            )

    async def counts(self, scope: ScopeKey) -> dict[str, int]:
        async with self._conn.execute(
            "SELECT archived, COUNT(*) FROM messages WHERE scope = ? GROUP BY archived",
            (scope.value,),
        ) as cur:
            rows = await cur.fetchall()
        counts = {state.value: 0 for state in ArchiveState}
        counts.update({r[0]: int(r[1]) for r in rows})
        return counts

    # --- caps -----------------------------------------------------------------------
    async def enforce_caps(self, scope: ScopeKey) -> CapReport:
        """Drop the oldest archived messages past the caps; never an unarchived one."""
        s = self.settings
        async with self._conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM messages WHERE scope = ?",
            (scope.value,),
        ) as cur:
            row = await cur.fetchone()
        count, size = (int(row[0]), int(row[1])) if row else (0, 0)
        if count <= s.soft_cap and size <= s.hard_cap_bytes:
            return CapReport(removed=[], over_soft=False, overflow=False)
        async with self._conn.execute(
            "SELECT id, bytes FROM messages WHERE scope = ? AND archived = 'true' ORDER BY id",
            (scope.value,),
        ) as cur:
            archived = [(int(r[0]), int(r[1])) for r in await cur.fetchall()]
        removed: list[int] = []
        for message_id, nbytes in archived:
            if count <= s.soft_cap and size <= s.hard_cap_bytes:
                break
            removed.append(message_id)
            count -= 1
            size -= nbytes
        if removed:
            async with self._db.transaction() as conn:
                await conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in removed])
        return CapReport(
            removed=removed,
            over_soft=count > s.soft_cap,
            overflow=count > s.hard_cap or size > s.hard_cap_bytes,
        )
