"""Values the public API returns: plain frozen records, no behaviour, no I/O.

Front ends import these types from here, never from the modules that own the tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memory_core.base.chunks import ChunkKind


@dataclass(frozen=True, slots=True)
class Contribution:
    """What one ranking step did to a hit: multiplied its score's factor by `value`
    (`how` "×") or added `value` to what it measures (`how` "+")."""

    step: str
    how: Literal["+", "×"]
    value: float

    def __str__(self) -> str:
        if self.how == "×":
            return f"{self.step} ×{self.value:.4g}"
        return f"{self.step} {self.value:+.4g}"


def explained(steps: Sequence[Contribution]) -> str:
    """A hit's ranking steps on one line: "words +1.2 · context +0.8 · time ×1.5"."""
    return " · ".join(str(c) for c in steps) or "(no step changed its score)"


@dataclass(frozen=True, slots=True)
class Hit:
    path: str
    line_from: int
    line_to: int
    score: float
    text: str
    kind: ChunkKind
    created_at: datetime | None
    ref: str | None = None
    confidence: float = 0.0
    """0..1: how sure the ranking is that this hit answers the query (the injection's tiers read it)."""
    anchor: int | None = None
    """The first line of the chunk the ranking scored (the turn a hit stands for; the
    lines around it are context). None when the hit is that chunk alone."""
    steps: tuple[Contribution, ...] = ()
    """What each ranking step contributed, in order: only when the search was explained
    (`recall.index.steps.explaining`), else empty."""

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line_from}"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    id: int
    at: datetime
    scope: str
    entry_id: str
    action: str
    old_score: float | None
    new_score: float | None
    source: str
    category: str | None
    content: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class ScopeEvent:
    id: int
    at: datetime
    scope: str
    kind: str
    detail: dict[str, object]


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


@dataclass(frozen=True, slots=True)
class RecordedMessage:
    """A message of a conversation held elsewhere (an export, a migration, a demo), to be
    stored with its own time and archive state ('false', 'pending' or 'true'), its
    metadata and whether compaction set it aside."""

    role: str
    speaker: str
    content: str
    at: datetime
    archived: str = "false"
    speaker_id: str | None = None
    """The sender's platform id, when the conversation kept one (`messages.speaker_id`)."""
    meta: Mapping[str, Any] | None = None
    compacted: bool = False
