"""Messages workers post to the app; only message handlers touch widgets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from textual.message import Message

from memory_core.base.records import AuditRecord, Hit
from memory_core.base.scope import ScopeKey
from memory_core.longterm.entities import Entity
from memory_core.recall.injection import Injection
from memory_core.snapshot.builder import Snapshot
from tui.actions import Action
from tui.loading import EntriesSnapshot
from tui.model import RankingModel, RankingView, RankRow
from tui.overview import ScopeArchive, ScopeCounts
from tui.watch import Changes


@dataclass
class ScopesLoaded(Message):
    counts: list[ScopeCounts]


@dataclass
class EntriesLoaded(Message):
    snapshot: EntriesSnapshot


@dataclass
class RankingsReady(Message):
    model: RankingModel
    view: RankingView
    generation: int

    def can_replace(self, message: Message) -> bool:
        """A burst of refreshes only needs its newest result drawn."""
        return isinstance(message, RankingsReady)


@dataclass
class DetailLoaded(Message):
    scope: ScopeKey
    row: RankRow
    history: list[AuditRecord]
    projection: list[float]
    when: datetime


@dataclass
class ArchiveLoaded(Message):
    state: ScopeArchive


@dataclass
class ActivityLoaded(Message):
    scope: ScopeKey
    records: list[AuditRecord]


@dataclass
class RecallDone(Message):
    scope: ScopeKey
    query: str
    hits: list[Hit]
    injection: Injection
    budget: int


@dataclass
class ActionDone(Message):
    summary: str
    action: Action | None = None
    """What was done (None for a summary alone): a forget is offered for undoing."""


@dataclass
class WorkspaceChanged(Message):
    changes: Changes


@dataclass
class SnapshotLoaded(Message):
    scope: ScopeKey
    snapshot: Snapshot
    path: str
    enabled: bool
    entities: list[Entity]
