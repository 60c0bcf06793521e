"""The memory service: long-term entries, captures, daily notes, search, recall and
memory_get. It knows nothing of sessions or the model; the conversation layer is built
on it."""

from __future__ import annotations

import time
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime

from memory_core.base.clock import Monotonic
from memory_core.base.locks import LockRegistry
from memory_core.base.meter import NO_METER, Meter
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.longterm.after_writes import AfterWrites
from memory_core.longterm.forgotten import ForgottenFile
from memory_core.longterm.forgotten_keeper import ForgottenKeeper
from memory_core.longterm.long_term import LongTermMemory
from memory_core.longterm.long_term_views import HOT_PATH_MAX_AGE, ScopeStatus, ValidationProblem
from memory_core.longterm.staging import Staging
from memory_core.longterm.store import LongTermStore, SettledStore
from memory_core.notes.daily_notes import DailyNotes
from memory_core.notes.event_log import EventLog
from memory_core.recall.finder import Finder
from memory_core.recall.guard import IndexGuard
from memory_core.recall.index.files import prepare_chunk
from memory_core.snapshot.snapshots import Snapshots
from memory_core.storage.interfaces import ActivationBackend, AuditBackend
from memory_core.storage.journal import CaptureJournal

__all__ = [
    "DailyNotes",
    "Finder",
    "IndexGuard",
    "LongTermMemory",
    "MemoryService",
    "ScopeStatus",
    "ValidationProblem",
    "build_memory_service",
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


def build_memory_service(
    config: Config,
    workspace: Workspace,
    locks: LockRegistry,
    now: Callable[[], datetime],
    guard: IndexGuard | None = None,
    *,
    monotonic: Monotonic = time.monotonic,
    audit: AuditBackend | None = None,
    activations: ActivationBackend | None = None,
    journal: CaptureJournal | None = None,
    meter: Meter = NO_METER,
) -> MemoryService:
    """The service over a workspace; without a guard holding an index it searches files.

    Without the audit log and activations (no database) the service still reads and
    writes every memory file; without a journal every capture writes MEMORY.md itself
    (with one, `long_term.staging` must be recovered, and closed, by its owner).
    `monotonic` times the caches (the long-term file's stat interval, the recall cache's
    TTL). Built bottom-up, each part from parts already built: the files, what follows
    their writes, the staging over both, the settled view of the files, the memory.
    """
    guard = guard or IndexGuard(monotonic=monotonic)
    zone = zoneinfo.ZoneInfo(config.timezone)
    policy = config.scoring.policy()
    files = LongTermStore(workspace, locks, policy.archive_below, monotonic=monotonic)
    forgotten = ForgottenFile(workspace, config.long_term.forgotten_keep_days, policy.archive_below)
    after = AfterWrites(
        files, ForgottenKeeper(forgotten, workspace, locks, now), guard, workspace, audit
    )
    staging = None
    if journal is not None:
        staging = Staging(
            files,
            journal,
            policy,
            config.long_term.write_delay_seconds,
            now,
            after.staged,
            view_max_age=HOT_PATH_MAX_AGE,
            monotonic=monotonic,
        )
    store = SettledStore(files, staging.settle if staging is not None else None)
    long_term = LongTermMemory(
        config,
        workspace,
        store,
        after,
        now,
        staging=staging,
        audit=audit,
        activations=activations,
        meter=meter,
    )
    notes = DailyNotes(
        workspace, locks, guard, prepare_chunk, zone, now, config.prompt.daily_max_chars
    )
    finder = Finder(
        workspace,
        guard,
        config.recall,
        zone,
        notes.today,
        long_term.flush,
        long_term.entities,
        monotonic=monotonic,
        meter=meter,
    )
    events = EventLog(workspace, notes.today)
    snapshots = Snapshots(config, workspace, long_term, events, now, zone)
    return MemoryService(long_term, notes, finder, guard, now, events, snapshots, meter)
