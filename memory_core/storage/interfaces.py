"""The storage interfaces: what the memory and conversation layers need of a backend.

Written from the callers' side, not from what SQLite offers: a PostgreSQL backend
implements these next to the SQLite classes (`SearchIndex`, `HistoryStore`, `AuditLog`,
`Activations`, `ScheduleState`) without touching the layers above. Every method is
scoped: a backend filters by the scope it is given and by nothing the caller could
smuggle in through text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memory_core.base.merge_values import Change
from memory_core.base.records import (
    ArchiveRun,
    AuditRecord,
    FailedArchive,
    ScopeEvent,
    SessionArchive,
)
from memory_core.base.scope import ScopeKey
from memory_core.storage.sessions import (
    CapReport,
    NewMessage,
    Session,
    StoredMessage,
    TurnContext,
)


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
    async def add_message(self, message: NewMessage) -> StoredMessage: ...
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


Activation = tuple[str, str]
"""An entry a reply used, waiting for the next merge: (entry id, session id)."""


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


Progress = Callable[[int, int], None]
"""`progress(done, total)`: vectors stored so far of those being made."""


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What making a scope's missing vectors before a search did (`VectorSearch.catch_up`).

    `missing`: texts that had no vector (when `done` is False: those the model would have
    to make, the vectors already made of the same texts left out); `made`: vectors stored;
    `done`: the scope's vectors cover its chunks, so a search compares meanings; else it
    ranks by words, because there were more than it may make or the model failed
    (`failure`, its one-line reason)."""

    missing: int
    made: int
    done: bool
    failure: str = ""


class VectorSearch(Protocol):
    """What ranking needs of the vector index (memory_core/storage/vectors/index.py).

    Vectors are typed `Any` here so the core imports without numpy: dense recall is an
    optional extra."""

    async def searches(self, scope_id: int) -> bool:
        """Whether a search of the scope compares its query with vectors: always for an
        index that makes the scope's vectors (`settle` waits for them); for a command's
        (storage/vectors/lazy.py) only where the scope has some and `catch_up` did not
        leave it to words, so the model is not loaded for nothing."""
        ...

    async def embed_query(self, text: str) -> Any: ...

    async def search(
        self,
        scope_id: int,
        query: Any,
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        exclude_paths: Sequence[str] = (),
    ) -> list[tuple[int, float]]: ...

    async def similarities(self, scope_id: int, query: Any, ids: Sequence[int]) -> dict[int, float]:
        """Cosine of `query` with each of the chunks `ids` that has a vector."""
        ...

    async def moved_toward(
        self, scope_id: int, query: Any, ids: Sequence[int], weight: float
    ) -> Any:
        """The query's vector moved toward the mean vector of `ids` (Rocchio)."""
        ...

    def schedule(self, scope_id: int) -> None: ...

    async def catch_up(
        self, scope_id: int, *, most: int | None, progress: Progress | None = None
    ) -> CatchUp:
        """Make the scope's missing vectors now, unless the model would have to make more
        than `most` (None: whatever it takes); never raises for a failing model."""
        ...

    async def settle(self, scope_id: int, within: float) -> bool: ...

    def invalidate(self, scope_id: int | None = None) -> None: ...

    async def forget(self) -> None:
        """Drop every vector no current chunk vouches for, with every copy kept beside
        them (a purge)."""
        ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...
