"""The memory service: long-term entries, captures, daily notes, search, recall and
memory_get. It knows nothing of sessions or the model; the conversation layer is built
on it. Its parts are built in memory_core/services.py (`build_memory_service`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime

from memory_core.base.meter import NO_METER, Meter
from memory_core.longterm.long_term import LongTermMemory
from memory_core.longterm.long_term_views import ScopeStatus, ValidationProblem
from memory_core.notes.daily_notes import DailyNotes
from memory_core.notes.event_log import EventLog
from memory_core.recall.finder import Finder
from memory_core.recall.guard import IndexGuard
from memory_core.snapshot.snapshots import Snapshots

__all__ = [
    "DailyNotes",
    "Finder",
    "IndexGuard",
    "LongTermMemory",
    "MemoryService",
    "ScopeStatus",
    "ValidationProblem",
]


@dataclass(frozen=True, slots=True)
class MemoryService:
    long_term: LongTermMemory
    notes: DailyNotes
    finder: Finder
    guard: IndexGuard
    now: Callable[[], datetime]
    events: EventLog
    snapshots: Snapshots
    meter: Meter = NO_METER
    """What the parts above it (the chat turn, consolidation) report their work to."""

    def today(self, when: datetime | None = None) -> date:
        return self.notes.today(when)

    @property
    def indexed(self) -> bool:
        """Whether the search index is usable now (messages get index rows)."""
        return self.guard.index is not None
