"""Per-scope counts for the scopes pane, and a scope's archive state for the archive pane."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import IndexUnavailable
from memory_core.base.policy import ScoringPolicy
from memory_core.base.records import (
    ArchiveRun,
    AuditRecord,
    FailedArchive,
    ScopeEvent,
    SessionArchive,
)
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.longterm.scoring import Status
from tui.loading import EntryLoader, Quarantined
from tui.model import what_if

_DAILY = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
_RAW = re.compile(r"^\d{4}-\d{2}-\d{2}-.+\.md$")
_MONTH = re.compile(r"^\d{4}-\d{2}\.md$")
ARCHIVED_LIMIT = 500


@dataclass(frozen=True, slots=True)
class ScopeCounts:
    scope: ScopeKey
    active: int
    archived: int
    daily_notes: int
    unarchived: int
    pending: int
    archived_messages: int
    quarantined: int = 0


@dataclass(frozen=True, slots=True)
class ArchivedEntry:
    entry: MemoryEntry
    score: float
    reason: str
    status: Status = Status.ARCHIVED


@dataclass(frozen=True, slots=True)
class ScopeArchive:
    scope: ScopeKey
    when: datetime
    archived: list[ArchivedEntry] = field(default_factory=list)
    archived_total: int = 0
    """Entries that are not active (still in the file), as the scopes pane counts them."""
    to_forget: int = 0
    """Of those, the ones below the forget line: the next consolidation deletes them."""
    quarantined: list[Quarantined] = field(default_factory=list)
    path: str = ""
    """The long-term file, relative to the workspace."""
    forgotten: list[AuditRecord] = field(default_factory=list)
    messages: dict[str, int] = field(default_factory=lambda: {"false": 0, "pending": 0, "true": 0})
    sessions: list[SessionArchive] = field(default_factory=list)
    failures: list[FailedArchive] = field(default_factory=list)
    backlog: list[ScopeEvent] = field(default_factory=list)
    last_run: ArchiveRun | None = None
    summary_days: list[str] = field(default_factory=list)
    summary_months: list[str] = field(default_factory=list)
    raw_files: list[str] = field(default_factory=list)
    database: bool = True


def list_files(directory: Path) -> list[str]:
    try:
        return sorted(p.name for p in directory.iterdir() if p.is_file())
    except (FileNotFoundError, NotADirectoryError):
        return []


def status_tally(
    entries: Sequence[MemoryEntry], when: datetime, policy: ScoringPolicy
) -> Counter[Status]:
    return Counter(what_if(e, when, policy)[1] for e in entries)


async def scope_counts(core: MemoryCore, loader: EntryLoader, when: datetime) -> list[ScopeCounts]:
    scopes = await core.memories.scopes()
    messages: dict[str, dict[str, int]] = {}
    if core.has_database:
        messages = await core.history.counts_by_scope()
        known = {s.value for s in scopes}
        scopes += [ScopeKey(s) for s in sorted(messages) if s not in known]

    async def one(scope: ScopeKey) -> ScopeCounts:
        entries = await loader.load(scope)
        quarantined = await loader.quarantined(scope)
        tally = await asyncio.to_thread(status_tally, entries, when, core.policy)
        files = await asyncio.to_thread(list_files, core.workspace.memory_dir(scope))
        counts = messages.get(scope.value, {})
        return ScopeCounts(
            scope=scope,
            active=tally[Status.ACTIVE],
            archived=tally[Status.ARCHIVED] + tally[Status.FORGOTTEN],
            daily_notes=sum(1 for name in files if _DAILY.match(name)),
            unarchived=counts.get("false", 0),
            pending=counts.get("pending", 0),
            archived_messages=counts.get("true", 0),
            quarantined=len(quarantined),
        )

    return list(await asyncio.gather(*(one(scope) for scope in scopes)))


def _archived_entries(
    entries: Sequence[MemoryEntry], when: datetime, policy: ScoringPolicy
) -> list[ArchivedEntry]:
    found: list[ArchivedEntry] = []
    for entry in entries:
        score, status = what_if(entry, when, policy)
        if status is Status.ACTIVE:
            continue
        if entry.archived is not None:
            reason = entry.archived.value
        elif status is Status.FORGOTTEN:
            reason = "below forget line (next consolidation)"
        else:
            reason = "score below archive line"
        found.append(ArchivedEntry(entry, score, reason, status))
    return sorted(found, key=lambda a: -a.score)


async def archive_state(
    core: MemoryCore, loader: EntryLoader, scope: ScopeKey, when: datetime
) -> ScopeArchive:
    entries = await loader.load(scope)
    quarantined = await loader.quarantined(scope)
    archived = await asyncio.to_thread(_archived_entries, entries, when, core.policy)
    directory = core.workspace.memory_dir(scope)
    summaries = await asyncio.to_thread(list_files, core.workspace.summary_dir(scope))
    files = await asyncio.to_thread(list_files, directory)
    base = ScopeArchive(
        scope=scope,
        when=when,
        archived=archived[:ARCHIVED_LIMIT],
        archived_total=len(archived),
        to_forget=sum(1 for a in archived if a.status is Status.FORGOTTEN),
        quarantined=quarantined,
        path=core.workspace.long_term_path(scope).relative_to(core.workspace.root).as_posix(),
        summary_days=[n[:-3] for n in summaries if _DAILY.match(n)],
        summary_months=[n[:-3] for n in summaries if _MONTH.match(n)],
        raw_files=[n for n in files if _RAW.match(n)],
        database=core.has_database,
    )
    if not core.has_database:
        return base
    try:
        forgotten = await core.audit.forgotten(scope, limit=ARCHIVED_LIMIT)
        backlog = await core.audit.events(scope, kind="archive_backlog", limit=20)
    except IndexUnavailable:
        forgotten, backlog = [], []
    counts = (await core.history.counts_by_scope()).get(scope.value, {})
    return replace(
        base,
        forgotten=forgotten,
        messages={k: counts.get(k, 0) for k in ("false", "pending", "true")},
        sessions=await core.history.sessions_by_state(scope),
        failures=await core.history.failed_archives(scope),
        backlog=backlog,
        last_run=await core.history.last_archive_run(scope),
    )
