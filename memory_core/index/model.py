"""What the index hands around: hits, sync counts, files and rows ready to write."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memory_core.chunking import Chunk, ChunkKind
from memory_core.records import Hit as Hit

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Appended:
    """Tokenized chunks just appended to a file, with the file's stamps around the
    append (see `SearchIndex.add_prepared`)."""

    prepared: list[tuple[Chunk, str]]
    stamp: tuple[int, int]
    previous: tuple[int, int]


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


FileRow = tuple[str, int, int, int, str, str]
"""(path, scope id, mtime_ns, size, hash, kind) of a `files` row."""
ChunkRow = tuple[int, str, int, int, int, str, str | None, str | None, str, str, str | None]
"""(scope id, path, line_from, line_to, piece, kind, created_at, ref, text, tokens, dates)
of a chunk."""

PreparedRows = tuple[list[FileRow], list[ChunkRow]]
"""What a rebuild worker sends back for a group of files: file rows and chunk rows."""


class VectorSearch(Protocol):
    """What ranking needs of the vector index (memory_core/index/vector_index.py).

    Vectors are typed `Any` here so the core imports without numpy: dense recall is an
    optional extra."""

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

    def schedule(self, scope_id: int) -> None: ...

    async def settle(self, scope_id: int, within: float) -> bool: ...

    def invalidate(self, scope_id: int | None = None) -> None: ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...
