"""What the index hands around: hits, sync counts, files and rows ready to write."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory_core.base.chunks import Appended, Chunk, ChunkKind
from memory_core.base.records import Hit as Hit
from memory_core.base.scope import ScopeKey
from memory_core.longterm.store import WriteRecord
from memory_core.recall.index.summaries import LongTermSeen
from memory_core.recall.request import QueryInput, SearchRequest
from memory_core.storage.interfaces import VectorSearch
from memory_core.storage.sessions import AfterInsert

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class SyncStats:
    files_seen: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0

    def add(self, other: SyncStats) -> None:
        self.files_seen += other.files_seen
        self.files_indexed += other.files_indexed
        self.files_removed += other.files_removed
        self.chunks_added += other.chunks_added
        self.chunks_removed += other.chunks_removed


@dataclass(frozen=True, slots=True)
class PreparedFile:
    """A file read, chunked and tokenized off the event loop, ready to write."""

    path: str
    mtime_ns: int
    size: int
    hash: str
    kind: ChunkKind
    chunks: list[tuple[Chunk, str]]
    summary: LongTermSeen | None = None
    """A long-term file read as its store reads it: its part of the scope's summary."""


FileRow = tuple[str, int, int, int, str, str]
"""(path, scope id, mtime_ns, size, hash, kind) of a `files` row."""
ChunkRow = tuple[int, str, int, int, int, str, str | None, str | None, str, str, str | None]
"""(scope id, path, line_from, line_to, piece, kind, created_at, ref, text, tokens, dates)
of a chunk."""

PreparedRows = tuple[list[FileRow], list[ChunkRow]]
"""What a rebuild worker sends back for a group of files: file rows and chunk rows."""


class IndexBackend(Protocol):
    """Chunks of a scope's files and messages, and BM25 over them."""

    async def scope_id(self, scope: ScopeKey, *, create: bool = True) -> int | None: ...
    async def sync_scope(self, scope: ScopeKey, *, force: bool = False) -> SyncStats: ...
    async def sync_if_stale(self, scope: ScopeKey) -> None: ...
    async def sync_file(self, scope: ScopeKey, relative_path: str) -> None: ...
    async def sync_all(self, progress: Callable[[int, int], None] | None = None) -> SyncStats: ...
    async def sync_opened(
        self, progress: Callable[[int, int], None] | None = None
    ) -> SyncStats: ...
    async def embed_every_scope(self) -> None: ...
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
    async def search(self, scope: ScopeKey, asked: SearchRequest | QueryInput) -> list[Hit]: ...

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
