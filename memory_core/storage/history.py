"""Session history in SQLite: sessions per scope, every message, and the archive state.

The caps follow the reference rules exactly: past the soft cap (200) the oldest archived
messages go first; an unarchived or pending message is never dropped, the history may run
over and an archive is forced instead; past the hard cap (300 messages or 10 MB) the same,
plus a `history_overflow` event.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from memory_core.base.clock import format_when, parse_when
from memory_core.base.records import ArchiveRun, FailedArchive, SessionArchive
from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Connection, Db
from memory_core.config.memory import HistorySettings
from memory_core.storage.activations import record_step
from memory_core.storage.deliveries import claim_step
from memory_core.storage.history_rows import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    maybe_when,
    message_from_row,
    session_from_row,
)
from memory_core.storage.sessions import (
    SUMMARY_ROLE,
    AfterInsert,
    ArchiveState,
    CapReport,
    NewMessage,
    Session,
    StoredMessage,
    TurnContext,
)


class MessageIndexer(Protocol):
    """What the history needs of the search index: the insert of a message's chunk as a
    step of the message's own transaction, so a message is never stored without it."""

    def message_step(
        self, scope: ScopeKey, session_id: str, speaker: str, text: str, created_at: datetime
    ) -> Awaitable[AfterInsert | None]: ...


_OF_ENDED_SESSIONS = " AND session_id NOT IN (SELECT id FROM sessions WHERE status = 'open')"
"""Messages whose session has ended (closed, extracted or failed extraction)."""


Rows = list[Any]


class HistoryStore:
    """Sessions, messages and archive runs: the only module that touches those tables.

    Every method is one call on the database thread (`Database.read` for reads,
    `Database.autocommit` for a single statement, `Database.write` for a transaction).
    """

    def __init__(
        self,
        db: Db,
        settings: HistorySettings,
        indexer: MessageIndexer | None = None,
    ) -> None:
        self._db = db
        self.settings = settings
        self._indexer = indexer

    async def _fetch(self, sql: str, *params: object) -> Rows:
        return await self._db.read(lambda conn: conn.execute(sql, params).fetchall())

    async def _write_one(self, sql: str, *params: object) -> None:
        await self._db.autocommit(lambda conn: conn.execute(sql, params))

    async def _execute_many(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        batch = list(rows)
        if batch:
            await self._db.write(lambda conn: conn.executemany(sql, batch))

    # --- sessions -------------------------------------------------------------------
    async def open_session(self, scope: ScopeKey, now: datetime) -> Session:
        """The scope's open session, started if there is none."""
        current = await self.current_session(scope)
        if current is not None:
            return current
        session_id = f"{now.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(4)}"
        await self.add_session(scope, session_id, now)
        session = await self.get_session(session_id)
        assert session is not None
        return session

    async def add_session(
        self, scope: ScopeKey, session_id: str, started_at: datetime, status: str = "open"
    ) -> None:
        """A session with a known id (a conversation recorded elsewhere, or a new one)."""
        when = format_when(started_at)
        await self._write_one(
            "INSERT INTO sessions (id, scope, started_at, last_at, status) VALUES (?, ?, ?, ?, ?)",
            session_id,
            scope.value,
            when,
            when,
            status,
        )

    async def current_session(self, scope: ScopeKey) -> Session | None:
        rows = await self._fetch(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE scope = ? AND status = 'open'"
            " ORDER BY started_at DESC LIMIT 1",
            scope.value,
        )
        return session_from_row(rows[0]) if rows else None

    async def get_session(self, session_id: str) -> Session | None:
        rows = await self._fetch(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", session_id)
        return session_from_row(rows[0]) if rows else None

    async def close_session(self, session_id: str, now: datetime) -> None:
        await self._write_one(
            "UPDATE sessions SET status = 'closed', closed_at = ? WHERE id = ? AND status = 'open'",
            format_when(now),
            session_id,
        )

    async def mark_extracted(self, session_id: str, stats: dict[str, int]) -> None:
        await self._write_one(
            "UPDATE sessions SET status = 'extracted', next_extract_at = NULL, stats = ?"
            " WHERE id = ?",
            json.dumps(stats),
            session_id,
        )

    async def mark_extract_failed(self, session_id: str, next_at: datetime) -> None:
        await self._write_one(
            "UPDATE sessions SET status = 'extract_failed', extract_attempts ="
            " extract_attempts + 1, next_extract_at = ? WHERE id = ?",
            format_when(next_at),
            session_id,
        )

    async def mark_flushed(self, session_id: str, now: datetime) -> None:
        await self._write_one(
            "UPDATE sessions SET flushed_at = ? WHERE id = ?", format_when(now), session_id
        )

    async def sessions_due(self, now: datetime, idle_before: datetime) -> list[Session]:
        """Open sessions idle since `idle_before`, and failed extractions due for a retry."""
        rows = await self._fetch(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE (status = 'open' AND last_at < ?)"
            " OR (status IN ('closed', 'extract_failed') AND (next_extract_at IS NULL"
            " OR next_extract_at <= ?)) ORDER BY last_at",
            format_when(idle_before),
            format_when(now),
        )
        return [session_from_row(r) for r in rows]

    async def open_sessions(self) -> list[Session]:
        rows = await self._fetch(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE status = 'open'")
        return [session_from_row(r) for r in rows]

    # --- messages -------------------------------------------------------------------
    async def add_message(
        self, message: NewMessage, *, replay_key: str | None = None
    ) -> StoredMessage:
        """Store one message and touch its session, in one transaction and one call on
        the database thread.

        `replay_key` names a message written before (a spooled one, `spool.py`): it is
        claimed in the same transaction, and a key claimed already stores nothing (the
        returned message then has id 0), so replaying twice writes once.

        `message.indexed` adds the message's search chunk and `message.used_entry_ids`
        records the long-term entries its prompt used (`activations`) in the same commit:
        one commit instead of two or three, and a message is never stored without its
        index row.
        """
        scope, session_id, now = message.scope, message.session_id, message.created_at
        content, speaker = message.content, message.speaker
        encoded = json.dumps(message.meta or {}, ensure_ascii=False)
        row = (
            scope.value,
            session_id,
            message.role,
            speaker,
            message.speaker_id or None,
            content,
            format_when(now),
            len(content.encode("utf-8")) + len(encoded),
            encoded,
            message.archived.value,
        )
        index_step = (
            await self._indexer.message_step(
                scope, session_id, speaker or message.role, content, now
            )
            if message.indexed and self._indexer is not None
            else None
        )
        used_step = (
            record_step(scope, message.used_entry_ids, session_id, format_when(now))
            if message.used_entry_ids
            else None
        )

        claim = claim_step("spool", "history", replay_key, now) if replay_key is not None else None

        def write(conn: Connection) -> int:
            if claim is not None and not claim(conn):
                return 0
            message_id = int(
                conn.execute(
                    "INSERT INTO messages (scope, session_id, role, speaker, speaker_id, content,"
                    " created_at, bytes, meta, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " RETURNING id",
                    row,
                ).fetchone()[0]
            )
            conn.execute(
                "UPDATE sessions SET last_at = ? WHERE id = ?", (format_when(now), session_id)
            )
            if index_step is not None:
                index_step(conn, message_id)
            if used_step is not None:
                used_step(conn)
            return message_id

        return message.stored(await self._db.write(write))

    async def session_messages(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[StoredMessage]:
        extra = "" if include_compacted else " AND compacted = 0"
        rows = await self._fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ?{extra} ORDER BY id",
            session_id,
        )
        return [message_from_row(r) for r in rows]

    async def messages_by_id(self, ids: Sequence[int]) -> list[StoredMessage]:
        """The messages with these ids (compacted ones too), oldest first."""

        def fetch(conn: Connection) -> Rows:
            rows: Rows = []
            for start in range(0, len(ids), 500):
                part = list(ids[start : start + 500])
                rows += conn.execute(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages"
                    f" WHERE id IN ({','.join('?' * len(part))})",
                    part,
                ).fetchall()
            return rows

        rows = await self._db.read(fetch) if ids else []
        return sorted((message_from_row(r) for r in rows), key=lambda m: m.id)

    async def turn_context(self, session_id: str, limit: int) -> TurnContext:
        """What a chat turn reads from the history, in one round trip instead of three:
        the session's newest `limit` live messages (oldest first), preceded by its latest
        summary when none of them is one, and the characters of its live messages before
        the turn (SQLite `LENGTH`: an upper bound of their tokens, for the flush check)."""
        rows = await self._fetch(
            f"SELECT * FROM (SELECT {MESSAGE_COLUMNS}, 0 FROM messages WHERE session_id = ?"
            " AND compacted = 0 ORDER BY id DESC LIMIT ?) AS latest"
            f" UNION ALL SELECT * FROM (SELECT {MESSAGE_COLUMNS}, 1 FROM messages"
            " WHERE session_id = ? AND role = ? ORDER BY id DESC LIMIT 1) AS summary"
            " UNION ALL SELECT COALESCE(SUM(LENGTH(content)), 0), NULL, NULL, NULL, NULL, NULL,"
            " NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2 FROM messages WHERE session_id = ?"
            " AND compacted = 0",
            session_id,
            limit,
            session_id,
            SUMMARY_ROLE,
            session_id,
        )
        latest: list[StoredMessage] = []
        summary: StoredMessage | None = None
        chars = 0
        for row in rows:
            part = row[len(row) - 1]
            if part == 0:
                latest.append(message_from_row(row))
            elif part == 1:
                summary = message_from_row(row)
            else:
                chars = int(row[0])
        latest.reverse()
        if latest and summary is not None and not any(m.role == SUMMARY_ROLE for m in latest):
            latest.insert(0, summary)
        return TurnContext(latest, chars)

    async def last_message_at(self) -> datetime | None:
        """When the newest message of the workspace was stored (the quiet-period clock)."""
        rows = await self._fetch("SELECT MAX(created_at) FROM messages")
        return maybe_when(rows[0][0]) if rows else None

    async def mark_compacted(self, message_ids: list[int]) -> None:
        await self._execute_many(
            "UPDATE messages SET compacted = 1 WHERE id = ?", [(i,) for i in message_ids]
        )

    # --- archive state --------------------------------------------------------------
    async def counts(self, scope: ScopeKey) -> dict[str, int]:
        """The scope's messages by archive state."""
        return (await self.counts_by_scope(scope)).get(scope.value, _empty_counts())

    async def counts_by_scope(self, scope: ScopeKey | None = None) -> dict[str, dict[str, int]]:
        """{scope: {'false': n, 'pending': n, 'true': n}} in one query."""
        where = "WHERE scope = ?" if scope is not None else ""
        rows = await self._fetch(
            f"SELECT scope, archived, COUNT(*) FROM messages {where} GROUP BY scope, archived",
            *([scope.value] if scope is not None else []),
        )
        counts: dict[str, dict[str, int]] = {}
        for key, state, count in rows:
            counts.setdefault(str(key), _empty_counts())[str(state)] = int(count)
        return counts

    async def scopes_with_unarchived(self) -> list[ScopeKey]:
        rows = await self._fetch("SELECT DISTINCT scope FROM messages WHERE archived = 'false'")
        return [ScopeKey(r[0]) for r in rows]

    async def oldest_unarchived(
        self, scope: ScopeKey, *, whole_sessions: bool = False
    ) -> datetime | None:
        """The oldest message waiting for an archive pass (with `whole_sessions`, only of
        sessions no longer open)."""
        rows = await self._fetch(
            "SELECT MIN(created_at) FROM messages WHERE scope = ? AND archived = 'false'"
            + (_OF_ENDED_SESSIONS if whole_sessions else ""),
            scope.value,
        )
        return maybe_when(rows[0][0]) if rows else None

    async def begin_archive_run(
        self, scope: ScopeKey, now: datetime, *, whole_sessions: bool = False
    ) -> tuple[int, list[int]]:
        """Record a run and take the messages due (false → pending); (run id, their ids).
        With `whole_sessions`, the messages of a session still open wait for it to end,
        so a conversation is never cut between two archive files (recall reads a turn's
        neighbours in its own file).

        The caller holds the scope's archive lock: 'pending' rows are orphans of a run that
        died mid-way, and would otherwise never be archived nor trimmed, so they are put
        back first.
        """
        when = format_when(now)

        def begin(conn: Connection) -> tuple[int, list[int]]:
            run_id = int(
                conn.execute(
                    "INSERT INTO archive_runs (scope, started_at) VALUES (?, ?) RETURNING id",
                    (scope.value, when),
                ).fetchone()[0]
            )
            conn.execute(
                "UPDATE messages SET archived = 'false' WHERE scope = ? AND archived = 'pending'",
                (scope.value,),
            )
            ids = [
                int(r[0])
                for r in conn.execute(
                    "SELECT id FROM messages WHERE scope = ? AND archived = 'false'"
                    " AND (archive_next_at IS NULL OR archive_next_at <= ?)"
                    + (_OF_ENDED_SESSIONS if whole_sessions else "")
                    + " ORDER BY id",
                    (scope.value, when),
                )
            ]
            conn.executemany(
                "UPDATE messages SET archived = 'pending' WHERE id = ?", [(i,) for i in ids]
            )
            return run_id, ids

        return await self._db.write(begin)

    async def finish_archive_run(
        self, run_id: int, now: datetime, moved: int, summarized: int, failed: int
    ) -> None:
        await self._write_one(
            "UPDATE archive_runs SET finished_at = ?, moved = ?, summarized = ?, failed = ?"
            " WHERE id = ?",
            format_when(now),
            moved,
            summarized,
            failed,
            run_id,
        )

    async def mark_archived(self, ids: Sequence[int]) -> None:
        """pending → true: the archive file answers recall for them now."""
        await self._execute_many(
            "UPDATE messages SET archived = 'true', archive_next_at = NULL WHERE id = ?",
            [(i,) for i in ids],
        )

    async def mark_archive_failed(
        self, ids: Sequence[int], now: datetime, next_at: datetime
    ) -> None:
        """pending → false, with the attempt counted and the time of the next one."""
        await self._execute_many(
            "UPDATE messages SET archived = 'false', archive_attempts = archive_attempts + 1,"
            " archive_failed_at = ?, archive_next_at = ? WHERE id = ?",
            [(format_when(now), format_when(next_at), i) for i in ids],
        )

    async def last_archive_run(self, scope: ScopeKey) -> ArchiveRun | None:
        rows = await self._fetch(
            "SELECT started_at, finished_at, moved, summarized, failed FROM archive_runs"
            " WHERE scope = ? ORDER BY id DESC LIMIT 1",
            scope.value,
        )
        if not rows:
            return None
        row = rows[0]
        return ArchiveRun(
            parse_when(row[0]), maybe_when(row[1]), int(row[2]), int(row[3]), int(row[4])
        )

    async def sessions_by_state(self, scope: ScopeKey, limit: int = 100) -> list[SessionArchive]:
        rows = await self._fetch(
            "SELECT m.session_id, MIN(m.created_at), COALESCE(MAX(s.status), '?'),"
            " COUNT(CASE WHEN m.archived = 'false' THEN 1 END),"
            " COUNT(CASE WHEN m.archived = 'pending' THEN 1 END),"
            " COUNT(CASE WHEN m.archived = 'true' THEN 1 END)"
            " FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
            " WHERE m.scope = ? GROUP BY m.session_id ORDER BY MIN(m.created_at) DESC LIMIT ?",
            scope.value,
            limit,
        )
        return [
            SessionArchive(r[0], parse_when(r[1]), r[2], int(r[3]), int(r[4]), int(r[5]))
            for r in rows
        ]

    async def failed_archives(self, scope: ScopeKey) -> list[FailedArchive]:
        rows = await self._fetch(
            "SELECT session_id, COUNT(*), MAX(archive_attempts), MIN(created_at),"
            " MAX(archive_failed_at), MIN(archive_next_at) FROM messages"
            " WHERE scope = ? AND archived = 'false' AND archive_attempts > 0"
            " GROUP BY session_id ORDER BY MIN(archive_next_at)",
            scope.value,
        )
        return [
            FailedArchive(
                r[0], int(r[1]), int(r[2]), parse_when(r[3]), maybe_when(r[4]), maybe_when(r[5])
            )
            for r in rows
        ]

    # --- caps -----------------------------------------------------------------------
    async def enforce_caps(self, scope: ScopeKey) -> CapReport:
        """Drop the oldest archived messages past the caps; never an unarchived one."""
        s = self.settings

        def enforce(conn: Connection) -> CapReport:
            row = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM messages WHERE scope = ?",
                (scope.value,),
            ).fetchone()
            count, size = (int(row[0]), int(row[1])) if row else (0, 0)
            if count <= s.soft_cap and size <= s.hard_cap_bytes:
                return CapReport(removed=[], over_soft=False, overflow=False)
            archived = conn.execute(
                "SELECT id, bytes FROM messages WHERE scope = ? AND archived = 'true' ORDER BY id",
                (scope.value,),
            ).fetchall()
            removed: list[int] = []
            for message_id, nbytes in archived:
                if count <= s.soft_cap and size <= s.hard_cap_bytes:
                    break
                removed.append(int(message_id))
                count -= 1
                size -= int(nbytes)
            conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in removed])
            return CapReport(
                removed=removed,
                over_soft=count > s.soft_cap,
                overflow=count > s.hard_cap or size > s.hard_cap_bytes,
            )

        return await self._db.write(enforce)


def _empty_counts() -> dict[str, int]:
    return {state.value: 0 for state in ArchiveState}
