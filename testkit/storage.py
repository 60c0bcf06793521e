"""In-memory storage backends: enough of the storage interfaces (memory_core.storage.interfaces)
to build the conversation layer without a database, and to show that nothing above the
interfaces depends on SQLite.

Each fake behaves as the real class it stands for, as far as callers rely on it:
tests/unit/test_storage_contract.py runs one contract against both, so a fake that
drifts fails there and not, unnoticed, in the tests built on it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from memory_core.base.merge_values import Change
from memory_core.base.records import (
    ArchiveRun,
    AuditRecord,
    FailedArchive,
    ScopeEvent,
    SessionArchive,
)
from memory_core.base.scope import ScopeKey
from memory_core.storage.audit import AUDITED
from memory_core.storage.sessions import (
    SUMMARY_ROLE,
    ArchiveState,
    CapReport,
    NewMessage,
    Session,
    StoredMessage,
    TurnContext,
    sql_length,
)


class MemoryHistory:
    """Sessions and messages in lists; archive runs counted.

    Stands for `memory_core.storage.history.HistoryStore`, except for the caps: `enforce_caps`
    never drops a message (no sizes are kept), so caps are no part of its contract.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.messages: list[StoredMessage] = []
        self.runs: list[tuple[str, datetime, datetime | None, tuple[int, int, int]]] = []
        self.indexed: list[int] = []
        self.archive_failed_at: dict[int, datetime] = {}

    async def open_session(self, scope: ScopeKey, now: datetime) -> Session:
        current = await self.current_session(scope)
        if current is not None:
            return current
        number = len(self.sessions) + 1
        while f"s{number}" in self.sessions:  # a recorded session may hold the next id
            number += 1
        await self.add_session(scope, f"s{number}", now)
        return self.sessions[f"s{number}"]

    async def add_session(
        self, scope: ScopeKey, session_id: str, started_at: datetime, status: str = "open"
    ) -> None:
        self.sessions[session_id] = Session(
            session_id, scope.value, started_at, started_at, status, 0, None, None
        )

    async def current_session(self, scope: ScopeKey) -> Session | None:
        """The newest open session of the scope."""
        return max(
            (s for s in self.sessions.values() if s.scope == scope.value and s.status == "open"),
            key=lambda s: s.started_at,
            default=None,
        )

    async def get_session(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    async def close_session(self, session_id: str, now: datetime) -> None:
        """Only an open session closes: an extracted one stays extracted."""
        session = self.sessions.get(session_id)
        if session is not None and session.status == "open":
            self._set(session_id, status="closed")

    async def mark_extracted(self, session_id: str, stats: dict[str, int]) -> None:
        self._set(session_id, status="extracted", next_extract_at=None)

    async def mark_extract_failed(self, session_id: str, next_at: datetime) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            self._set(
                session_id,
                status="extract_failed",
                extract_attempts=session.extract_attempts + 1,
                next_extract_at=next_at,
            )

    async def mark_flushed(self, session_id: str, now: datetime) -> None:
        self._set(session_id, flushed_at=now)

    def _set(self, session_id: str, **changes: Any) -> None:
        """Update a session; an unknown id changes nothing (an SQL UPDATE of no row)."""
        if session_id in self.sessions:
            self.sessions[session_id] = replace(self.sessions[session_id], **changes)

    async def sessions_due(self, now: datetime, idle_before: datetime) -> list[Session]:
        """Open sessions idle since `idle_before`, and ended ones not yet extracted whose
        retry time (if any) has come; oldest activity first."""

        def due(s: Session) -> bool:
            if s.status == "open":
                return s.last_at < idle_before
            return s.status in ("closed", "extract_failed") and (
                s.next_extract_at is None or s.next_extract_at <= now
            )

        return sorted((s for s in self.sessions.values() if due(s)), key=lambda s: s.last_at)

    async def open_sessions(self) -> list[Session]:
        return [s for s in self.sessions.values() if s.status == "open"]

    async def add_message(self, message: NewMessage) -> StoredMessage:
        stored = message.stored(len(self.messages) + 1)
        self.messages.append(stored)
        if message.indexed:
            self.indexed.append(stored.id)
        self._set(message.session_id, last_at=message.created_at)
        return stored

    async def session_messages(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[StoredMessage]:
        return [
            m
            for m in self.messages
            if m.session_id == session_id and (include_compacted or not m.compacted)
        ]

    async def messages_by_id(self, ids: Sequence[int]) -> list[StoredMessage]:
        wanted = set(ids)
        return [m for m in self.messages if m.id in wanted]

    async def turn_context(self, session_id: str, limit: int) -> TurnContext:
        """The newest `limit` live messages, the latest summary in front when none of them
        is one, and the characters of all live messages."""
        live = await self.session_messages(session_id)
        latest = live[-limit:] if limit > 0 else []
        summaries = [
            m for m in self.messages if m.session_id == session_id and m.role == SUMMARY_ROLE
        ]
        if latest and summaries and not any(m.role == SUMMARY_ROLE for m in latest):
            latest.insert(0, summaries[-1])
        return TurnContext(latest, sum(sql_length(m.content) for m in live))

    async def last_message_at(self) -> datetime | None:
        return max((m.created_at for m in self.messages), default=None)

    async def mark_compacted(self, message_ids: list[int]) -> None:
        self._update(message_ids, compacted=True)

    def _update(self, ids: Iterable[int], **changes: Any) -> None:
        wanted = set(ids)
        self.messages = [replace(m, **changes) if m.id in wanted else m for m in self.messages]

    async def counts(self, scope: ScopeKey) -> dict[str, int]:
        counts = {state.value: 0 for state in ArchiveState}
        for m in self.messages:
            if m.scope == scope.value:
                counts[m.archived.value] += 1
        return counts

    async def counts_by_scope(self, scope: ScopeKey | None = None) -> dict[str, dict[str, int]]:
        """Only scopes with messages."""
        scopes = {m.scope for m in self.messages if scope is None or m.scope == scope.value}
        return {s: await self.counts(ScopeKey(s)) for s in scopes}

    async def scopes_with_unarchived(self) -> list[ScopeKey]:
        return sorted(
            {ScopeKey(m.scope) for m in self.messages if m.archived is ArchiveState.FALSE},
            key=lambda s: s.value,
        )

    def _ended(self, m: StoredMessage, whole_sessions: bool) -> bool:
        session = self.sessions.get(m.session_id)
        return not whole_sessions or session is None or session.status != "open"

    async def oldest_unarchived(
        self, scope: ScopeKey, *, whole_sessions: bool = False
    ) -> datetime | None:
        return min(
            (
                m.created_at
                for m in self.messages
                if m.scope == scope.value
                and m.archived is ArchiveState.FALSE
                and self._ended(m, whole_sessions)
            ),
            default=None,
        )

    async def begin_archive_run(
        self, scope: ScopeKey, now: datetime, *, whole_sessions: bool = False
    ) -> tuple[int, list[int]]:
        """Pending messages (orphans of a run that died) go back to unarchived first; then
        the unarchived ones due (past their retry time) become pending."""
        self.runs.append((scope.value, now, None, (0, 0, 0)))
        orphans = [
            m.id
            for m in self.messages
            if m.scope == scope.value and m.archived is ArchiveState.PENDING
        ]
        self._update(orphans, archived=ArchiveState.FALSE)
        ids = [
            m.id
            for m in self.messages
            if m.scope == scope.value
            and m.archived is ArchiveState.FALSE
            and (m.archive_next_at is None or m.archive_next_at <= now)
            and self._ended(m, whole_sessions)
        ]
        self._update(ids, archived=ArchiveState.PENDING)
        return len(self.runs), ids

    async def finish_archive_run(
        self, run_id: int, now: datetime, moved: int, summarized: int, failed: int
    ) -> None:
        scope, started, _, _ = self.runs[run_id - 1]
        self.runs[run_id - 1] = (scope, started, now, (moved, summarized, failed))

    async def mark_archived(self, ids: Sequence[int]) -> None:
        self._update(ids, archived=ArchiveState.TRUE, archive_next_at=None)

    async def mark_archive_failed(
        self, ids: Sequence[int], now: datetime, next_at: datetime
    ) -> None:
        wanted = set(ids)
        self.messages = [
            replace(
                m,
                archived=ArchiveState.FALSE,
                archive_attempts=m.archive_attempts + 1,
                archive_next_at=next_at,
            )
            if m.id in wanted
            else m
            for m in self.messages
        ]
        self.archive_failed_at.update(dict.fromkeys(wanted, now))

    async def last_archive_run(self, scope: ScopeKey) -> ArchiveRun | None:
        runs = [r for r in self.runs if r[0] == scope.value]
        if not runs:
            return None
        _, started, finished, (moved, summarized, failed) = runs[-1]
        return ArchiveRun(started, finished, moved, summarized, failed)

    def _by_session(self, scope: ScopeKey) -> dict[str, list[StoredMessage]]:
        grouped: dict[str, list[StoredMessage]] = {}
        for m in self.messages:
            if m.scope == scope.value:
                grouped.setdefault(m.session_id, []).append(m)
        return grouped

    async def sessions_by_state(self, scope: ScopeKey, limit: int = 100) -> list[SessionArchive]:
        """Each session's messages by archive state, newest session first."""
        rows = []
        for session_id, messages in self._by_session(scope).items():
            session = self.sessions.get(session_id)
            states = [m.archived for m in messages]
            rows.append(
                SessionArchive(
                    session_id,
                    min(m.created_at for m in messages),
                    session.status if session is not None else "?",
                    states.count(ArchiveState.FALSE),
                    states.count(ArchiveState.PENDING),
                    states.count(ArchiveState.TRUE),
                )
            )
        rows.sort(key=lambda r: r.first_at, reverse=True)
        return rows[:limit]

    async def failed_archives(self, scope: ScopeKey) -> list[FailedArchive]:
        """Per session, the unarchived messages whose archive failed, next retry first."""
        rows = []
        for session_id, messages in self._by_session(scope).items():
            failed = [
                m for m in messages if m.archived is ArchiveState.FALSE and m.archive_attempts > 0
            ]
            if not failed:
                continue
            failed_at = [
                self.archive_failed_at[m.id] for m in failed if m.id in self.archive_failed_at
            ]
            next_at = [m.archive_next_at for m in failed if m.archive_next_at is not None]
            rows.append(
                FailedArchive(
                    session_id,
                    len(failed),
                    max(m.archive_attempts for m in failed),
                    min(m.created_at for m in failed),
                    max(failed_at, default=None),
                    min(next_at, default=None),
                )
            )
        return sorted(rows, key=lambda r: r.next_at or r.first_at)

    async def enforce_caps(self, scope: ScopeKey) -> CapReport:
        """Never drops a message: the fake keeps no sizes (caps are no part of its contract)."""
        return CapReport(removed=[], over_soft=False, overflow=False)


class MemoryAudit:
    """Changes and events in lists."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.sessions: dict[str, set[str]] = {}
        self.event_log: list[ScopeEvent] = []

    async def record(
        self, scope: ScopeKey, changes: Iterable[Change], source: str, at: datetime
    ) -> int:
        """Every change but decay (`audit.AUDITED`); how many rows that made."""
        before = len(self.records)
        for c in changes:
            if c.kind not in AUDITED:
                continue
            self.records.append(
                AuditRecord(
                    len(self.records) + 1,
                    at,
                    scope.value,
                    c.entry_id,
                    c.kind.value,
                    c.old_score,
                    c.new_score,
                    source,
                    c.category,
                    c.content,
                    c.detail,
                )
            )
        return len(self.records) - before

    async def history(self, scope: ScopeKey, entry_id: str) -> list[AuditRecord]:
        return [r for r in self.records if r.scope == scope.value and r.entry_id == entry_id]

    async def recent(
        self, scope: ScopeKey | None = None, limit: int = 100, after_id: int = 0
    ) -> list[AuditRecord]:
        rows = [r for r in self.records if scope is None or r.scope == scope.value]
        return [r for r in reversed(rows) if r.id > after_id][:limit]

    async def forgotten(self, scope: ScopeKey, limit: int = 500) -> list[AuditRecord]:
        """The newest `limit` forget rows (the limit counts those alone)."""
        rows = await self.recent(scope, limit=len(self.records))
        return [r for r in rows if r.action == "forget"][:limit]

    async def last_id(self) -> int:
        return len(self.records)

    async def action_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r.action] = counts.get(r.action, 0) + 1
        return counts

    async def seen_sessions(self, scope: ScopeKey) -> frozenset[str]:
        return frozenset(self.sessions.get(scope.value, set()))

    async def mark_session(
        self, scope: ScopeKey, session_id: str, at: datetime, stats: dict[str, int]
    ) -> None:
        self.sessions.setdefault(scope.value, set()).add(session_id)

    async def add_event(
        self, scope: ScopeKey, kind: str, at: datetime, detail: dict[str, object] | None = None
    ) -> None:
        self.event_log.append(
            ScopeEvent(len(self.event_log) + 1, at, scope.value, kind, detail or {})
        )

    async def events(
        self, scope: ScopeKey | None = None, kind: str | None = None, limit: int = 100
    ) -> list[ScopeEvent]:
        return [
            e
            for e in reversed(self.event_log)
            if (scope is None or e.scope == scope.value) and (kind is None or e.kind == kind)
        ][:limit]
