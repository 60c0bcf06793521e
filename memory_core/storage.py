"""The storage interfaces: what the memory and conversation layers need of a backend.

Written from the callers' side, not from what SQLite offers: a PostgreSQL backend
implements these next to the SQLite classes (`SearchIndex`, `HistoryStore`, `AuditLog`,
`Activations`, `ScheduleState`) without touching the layers above. Every method is
scoped: a backend filters by the scope it is given and by nothing the caller could
smuggle in through text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from typing import Any, Protocol

from memory_core.activations import Activation
from memory_core.chunking import Chunk, ChunkKind
from memory_core.index.model import Appended, Hit, SyncStats, VectorSearch
from memory_core.merge_values import Change
from memory_core.query import Query
from memory_core.records import (
    ArchiveRun,
    AuditRecord,
    FailedArchive,
    ScopeEvent,
    SessionArchive,
)
from memory_core.scope import ScopeKey
from memory_core.sessions import (
    AfterInsert,
    ArchiveState,
    CapReport,
    Session,
    StoredMessage,
    TurnContext,
)
from memory_core.store import WriteRecord


class IndexBackend(Protocol):
    """Chunks of a scope's files and messages, and BM25 over them."""

    async def sync_scope(self, scope: ScopeKey, *, force: bool = False) -> SyncStats: ...
    async def sync_if_stale(self, scope: ScopeKey) -> None: ...
    async def sync_file(self, scope: ScopeKey, relative_path: str) -> None: ...
    async def sync_all(self, progress: Callable[[int, int], None] | None = None) -> SyncStats: ...
    async def rebuild(self, progress: Callable[[int, int], None] | None = None) -> SyncStats: ...
    async def add_prepared(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        prepared: Sequence[tuple[Chunk, str]],
        *,
        stamp: tuple[int, int] | None,
        previous: tuple[int, int] | None = None,
    ) -> None: ...
    async def add_appended(
        self,
        scope: ScopeKey,
        relative_path: str,
        kind: ChunkKind,
        append: Callable[[], Appended | None],
    ) -> Appended | None: ...
    async def update_long_term(
        self, scope: ScopeKey, relative_path: str, record: WriteRecord
    ) -> None: ...
    async def message_step(
        self, scope: ScopeKey, session_id: str, speaker: str, text: str, created_at: datetime
    ) -> AfterInsert: ...
    async def remove_messages(self, scope: ScopeKey, message_ids: Sequence[int]) -> None: ...
    async def search(
        self,
        scope: ScopeKey,
        query: str | Sequence[str] | Query,
        *,
        limit: int = 10,
        kinds: Iterable[ChunkKind] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_score: float = 0.0,
        rank_budget: int = ...,
        exclude_paths: Sequence[str] = (),
        today: date | None = None,
    ) -> list[Hit]: ...

    vectors: VectorSearch | None

    def embed_all(self) -> None: ...
    async def data_version(self) -> int: ...
    def generation(self, scope: ScopeKey, *, besides_session: str | None = None) -> int: ...
    async def session_messages(
        self, scope: ScopeKey, session_id: str, first_id: int, count: int
    ) -> list[tuple[int, str]]: ...
    async def message_context(
        self, scope: ScopeKey, session_id: str, message_id: int, before: int = 1, after: int = 2
    ) -> list[tuple[int, str]]: ...


class HistoryBackend(Protocol):
    """Sessions, their messages and the archive state of those messages."""

    async def open_session(self, scope: ScopeKey, now: datetime) -> Session: ...
    async def add_session(
        self, scope: ScopeKey, session_id: str, started_at: datetime, status: str = "open"
    ) -> None: ...
    async def current_session(self, scope: ScopeKey) -> Session | None: ...
    async def get_session(self, session_id: str) -> Session | None: ...
    async def close_session(self, session_id: str, now: datetime) -> None: ...
    async def mark_extracted(self, session_id: str, stats: dict[str, int]) -> None: ...
    async def mark_extract_failed(self, session_id: str, next_at: datetime) -> None: ...
    async def mark_flushed(self, session_id: str, now: datetime) -> None: ...
    async def sessions_due(self, now: datetime, idle_before: datetime) -> list[Session]: ...
    async def open_sessions(self) -> list[Session]: ...
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
        indexed: bool = False,
        used_entry_ids: Sequence[str] = (),
        archived: ArchiveState = ...,
    ) -> StoredMessage: ...
    async def session_messages(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[StoredMessage]: ...
    async def messages_by_id(self, ids: Sequence[int]) -> list[StoredMessage]: ...
    async def turn_context(self, session_id: str, limit: int) -> TurnContext: ...
    async def last_message_at(self) -> datetime | None: ...
    async def mark_compacted(self, message_ids: list[int]) -> None: ...
    async def counts(self, scope: ScopeKey) -> dict[str, int]: ...
    async def counts_by_scope(self, scope: ScopeKey | None = None) -> dict[str, dict[str, int]]: ...
    async def scopes_with_unarchived(self) -> list[ScopeKey]: ...
    async def oldest_unarchived(
        self, scope: ScopeKey, *, whole_sessions: bool = False
    ) -> datetime | None: ...
    async def begin_archive_run(
        self, scope: ScopeKey, now: datetime, *, whole_sessions: bool = False
    ) -> tuple[int, list[int]]: ...
    async def finish_archive_run(
        self, run_id: int, now: datetime, moved: int, summarized: int, failed: int
    ) -> None: ...
    async def mark_archived(self, ids: Sequence[int]) -> None: ...
    async def mark_archive_failed(
        self, ids: Sequence[int], now: datetime, next_at: datetime
    ) -> None: ...
    async def last_archive_run(self, scope: ScopeKey) -> ArchiveRun | None: ...
    async def sessions_by_state(
        self, scope: ScopeKey, limit: int = 100
    ) -> list[SessionArchive]: ...
    async def failed_archives(self, scope: ScopeKey) -> list[FailedArchive]: ...
    async def enforce_caps(self, scope: ScopeKey) -> CapReport: ...


class AuditBackend(Protocol):
    """Every change to an entry, sessions already merged, and scope events."""

    async def record(
        self, scope: ScopeKey, changes: Iterable[Change], source: str, at: datetime
    ) -> int: ...
    async def history(self, scope: ScopeKey, entry_id: str) -> list[AuditRecord]: ...
    async def recent(
        self, scope: ScopeKey | None = None, limit: int = 100, after_id: int = 0
    ) -> list[AuditRecord]: ...
    async def forgotten(self, scope: ScopeKey, limit: int = 500) -> list[AuditRecord]: ...
    async def last_id(self) -> int: ...
    async def action_counts(self) -> dict[str, int]: ...
    async def seen_sessions(self, scope: ScopeKey) -> frozenset[str]: ...
    async def mark_session(
        self, scope: ScopeKey, session_id: str, at: datetime, stats: dict[str, int]
    ) -> None: ...
    async def add_event(
        self, scope: ScopeKey, kind: str, at: datetime, detail: dict[str, object] | None = None
    ) -> None: ...
    async def events(
        self, scope: ScopeKey | None = None, kind: str | None = None, limit: int = 100
    ) -> list[ScopeEvent]: ...


class ActivationBackend(Protocol):
    """Uses of long-term entries in replies, until the next merge applies them."""

    async def record(
        self, scope: ScopeKey, entry_ids: Iterable[str], session_id: str, at: str
    ) -> None: ...
    async def pending(self, scope: ScopeKey) -> list[Activation]: ...
    async def clear(self, scope: ScopeKey, pairs: list[Activation]) -> None: ...


class ScheduleBackend(Protocol):
    """When each scheduled job last ran (one value per job name)."""

    async def last(self, name: str) -> str | None: ...
    async def mark(self, name: str, value: str) -> None: ...
