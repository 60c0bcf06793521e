"""The long-term memory entry and the small vocabularies around it."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum


class Importance(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


CATEGORIES: tuple[str, ...] = (
    "preference",
    "fact",
    "experience",
    "workflow",
    "decision",
    "skill_usage",
    "todo",
)
"""The seed's categories; files may carry others (a person may invent one), which are kept."""


class ArchiveReason(StrEnum):
    """Why an entry sits in Archived although its score alone would not put it there."""

    MANUAL = "manual"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One `### [id] category | score | last_activated | hits` block of MEMORY.md.

    `score` is the value as of `scored_at`; decay is always computed forward from that
    pair, so applying it twice at the same instant changes nothing.
    """

    id: str
    content: str
    category: str
    score: float
    created_at: datetime
    last_activated: datetime
    scored_at: datetime
    hits: int = 0
    source_session: str | None = None
    confidence: float | None = None
    expires_at: datetime | None = None
    pinned: bool = False
    archived: ArchiveReason | None = None
    sessions: tuple[str, ...] = field(default=())
    """Recent sessions that created or reinforced the entry, newest last (idempotency)."""

    def with_(self, **changes: object) -> MemoryEntry:
        return replace(self, **changes)  # type: ignore[arg-type]

    def rescored(self, score: float, when: datetime) -> MemoryEntry:
        """`with_(score=..., scored_at=...)` without `dataclasses.replace`'s introspection:
        decay rescores every entry at every merge, so this is the hot path."""
        return MemoryEntry(
            self.id,
            self.content,
            self.category,
            score,
            self.created_at,
            self.last_activated,
            when,
            self.hits,
            self.source_session,
            self.confidence,
            self.expires_at,
            self.pinned,
            self.archived,
            self.sessions,
        )


def new_entry_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
    """Short random hex id like the seed's `a1b2c3`, widened to 8 digits, never reused."""
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def is_valid_entry_id(value: str) -> bool:
    return 1 <= len(value) <= 32 and all(c.isalnum() or c in "-_" for c in value)


SESSION_MEMORY = 8
"""How many recent session ids an entry remembers for idempotent re-extraction."""
