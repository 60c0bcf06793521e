"""What the index stores: a chunk of a file or a message, its kind, and the chunks just
appended to a file. Values only, below every layer that writes or reads them (the
storage interfaces, the notes, the index), so none of those depends on another for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum


class ChunkKind(StrEnum):
    LONG_TERM = "long_term"
    DAILY = "daily"
    ARCHIVE_RAW = "archive_raw"
    SUMMARY = "summary"
    MESSAGE = "message"


@dataclass(frozen=True, slots=True)
class Chunk:
    line_from: int
    line_to: int
    text: str
    created_at: datetime | None
    ref: str | None = None
    """For long-term chunks, the entry id (recall reinforces entries it used)."""
    speaker: str | None = None
    """For a turn of an archived conversation, who spoke (a field of its own in ranking:
    the name and the time before it are not the turn's words)."""
    dates: tuple[tuple[date, date], ...] | None = None
    """The local days its text speaks of ("last Friday"), resolved against its own date
    where it is tokenized (`recall.index.files.prepare_chunk`); None where nothing was resolved
    (a kind that is not dated so, or a chunk not yet prepared)."""


@dataclass(frozen=True, slots=True)
class Appended:
    """Tokenized chunks just appended to a file, with the file's stamps around the
    append (see `SearchIndex.add_prepared`)."""

    prepared: list[tuple[Chunk, str]]
    stamp: tuple[int, int]
    previous: tuple[int, int]
