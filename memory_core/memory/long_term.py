"""Long-term memory of every scope: entries, captures, edits, decay and the prompt block.

MEMORY.md is the truth; this class orders reads and writes of it (the store's locks, the
staged captures written first), records each change in the audit log and tells the index
what changed. It knows nothing of sessions or the model: a merge takes a session id only
to stay idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memory_core.activations import Activation
from memory_core.config import Config
from memory_core.entries import ArchiveReason, Importance, MemoryEntry
from memory_core.errors import ChatmemError, EntryNotFound
from memory_core.memory.guard import IndexGuard
from memory_core.memory_md import ParsedMemory, QuarantinedBlock
from memory_core.merge import Candidate, Change, ChangeKind, MergeResult, merge
from memory_core.prompt import render_prompt_memories, select_prompt_entries_until
from memory_core.scope import ScopeKey
from memory_core.scoring import ScoringPolicy, Status, initial_score, score_at, status_of
from memory_core.staging import Applied, Staging
from memory_core.storage import ActivationBackend, AuditBackend
from memory_core.store import LongTermStore
from memory_core.workspace import Workspace

log = logging.getLogger(__name__)

HOT_PATH_MAX_AGE = 1.0
"""Seconds a chat turn may reuse the last check that MEMORY.md is unchanged on disk."""

EditFn = Callable[[MemoryEntry, datetime], tuple[MemoryEntry | None, ChangeKind, str]]


@dataclass(frozen=True, slots=True)
class ScopeStatus:
    scope: ScopeKey
    active: list[MemoryEntry]
    archived: list[MemoryEntry]
    quarantined: list[QuarantinedBlock]
    daily_files: int
    path: str


@dataclass(frozen=True, slots=True)
class ValidationProblem:
    scope: ScopeKey
    path: str
    block: QuarantinedBlock


class LongTermMemory:
    def __init__(
        self,
        config: Config,
        workspace: Workspace,
        store: LongTermStore,
        guard: IndexGuard,
        now: Callable[[], datetime],
        *,
        audit: AuditBackend | None = None,
        activations: ActivationBackend | None = None,
    ) -> None:
        self.config = config
        self.policy: ScoringPolicy = config.scoring.policy()
        self.workspace = workspace
        self.store = store
        self.guard = guard
        self.now = now
        self.audit = audit
        self.activations = activations
        self.staging: Staging | None = None
        self._ranked_cache: dict[ScopeKey, tuple[ParsedMemory, list[MemoryEntry]]] = {}
        # Per scope: the ranked entries a prompt block was made from, the instants it holds
        # for (from, until) and the block itself.
        self._prompt_cache: dict[ScopeKey, tuple[list[MemoryEntry], datetime, datetime, str]] = {}

    # --- staged captures ------------------------------------------------------------
    def use_staging(self, staging: Staging | None) -> None:
        """Journalled captures; without a journal every capture writes MEMORY.md itself."""
        self.staging = staging
        self.store.settle = staging.settle if staging is not None else None

    async def staged_written(
        self, scope: ScopeKey, applied: list[Applied], decayed: list[Change], when: datetime
    ) -> None:
        """What follows the background write of staged captures: audit rows and index."""
        for capture in applied:
            await self._record(scope, capture.changes, capture.source, capture.when)
        await self._record(scope, decayed, applied[-1].source if applied else "capture", when)
        await self._written(scope)

    async def flush(self, scope: ScopeKey | None = None) -> None:
        """Write staged captures to MEMORY.md now (of one scope, or of all)."""
        if self.staging is None:
            return
        if scope is None:
            await self.staging.settle_all()
        else:
            await self.staging.settle(scope)

    async def _written(self, scope: ScopeKey) -> None:
        record = self.store.last_write.get(scope)
        if record is not None:
            await self.guard.long_term_written(scope, self.relative_path(scope), record)

    # --- reading --------------------------------------------------------------------
    def path(self, scope: ScopeKey) -> Path:
        return self.store.path(scope)

    def relative_path(self, scope: ScopeKey) -> str:
        return self.workspace.relative(self.store.path(scope))

    async def load(self, scope: ScopeKey) -> ParsedMemory:
        return await self.store.load(scope)

    async def entries(self, scope: ScopeKey) -> list[MemoryEntry]:
        return list((await self.store.load(scope)).entries)

    async def get_entry(self, scope: ScopeKey, entry_id: str) -> MemoryEntry:
        for entry in await self.entries(scope):
            if entry.id == entry_id:
                return entry
        raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")

    # --- writing --------------------------------------------------------------------
    async def merge_candidates(
        self,
        scope: ScopeKey,
        candidates: Iterable[Candidate],
        *,
        session_id: str | None,
        source: str,
        now: datetime | None = None,
    ) -> MergeResult:
        """Decay, then add or reinforce candidates; audit and record the session."""
        when = now or self.now()
        batch = list(candidates)
        seen = (
            await self.audit.seen_sessions(scope)
            if session_id is not None and self.audit is not None
            else frozenset()
        )
        if session_id is not None and session_id in seen:
            # Already merged: no write at all (a rewrite would also clobber the .bak).
            parsed = await self.store.load(scope)
            return MergeResult(entries=list(parsed.entries), skipped=True)
        activations = await self.activations.pending(scope) if self.activations else []

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], MergeResult]:
            entries = parsed.entries
            changes: list[Change] = []
            for used_in, candidates in _activation_batches(entries, activations):
                applied = merge(entries, candidates, when, used_in, self.policy)
                entries, changes = applied.entries, changes + applied.changes
            result = merge(entries, batch, when, session_id, self.policy, seen)
            return result.entries, MergeResult(result.entries, changes + result.changes)

        result = await self.store.update(scope, change, when)
        if self.activations is not None:
            await self.activations.clear(scope, activations)
        if not result.skipped:
            await self._record(scope, result.changes, source, when)
            if session_id is not None and self.audit is not None:
                await self.audit.mark_session(scope, session_id, when, result.stats)
            await self._written(scope)
        return result

    async def capture(
        self,
        scope: ScopeKey,
        content: str,
        *,
        category: str = "fact",
        importance: Importance | str = Importance.MEDIUM,
        source: str = "capture",
        expires_at: datetime | None = None,
    ) -> tuple[MemoryEntry, MergeResult]:
        """Save one memory now (a repeat of an existing one reinforces it)."""
        text = content.strip()
        if not text:
            raise ChatmemError("a memory needs some content")
        cand = Candidate(
            content=text,
            category=category,
            importance=Importance(importance),
            expires_at=expires_at,
        )
        if self.staging is not None:
            result = await self.staging.capture(scope, cand, source, self.now())
        else:
            result = await self.merge_candidates(scope, [cand], session_id=None, source=source)
        touched = [c for c in result.changes if c.kind in (ChangeKind.ADDED, ChangeKind.REINFORCED)]
        if not touched:
            raise ChatmemError("the memory was not stored (already expired?)")
        entry = next(e for e in reversed(result.entries) if e.id == touched[-1].entry_id)
        return entry, result

    async def consolidate(self, scope: ScopeKey, *, now: datetime | None = None) -> MergeResult:
        """Decay, expire, archive and forget as of `now` (no new memories)."""
        return await self.merge_candidates(
            scope, (), session_id=None, source="consolidate", now=now
        )

    async def forget(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Delete an entry from the file; the audit log keeps its last text."""
        return await self._edit_one(
            scope,
            entry_id,
            source,
            lambda e, now: (None, ChangeKind.FORGOTTEN, "forgotten by request"),
        )

    async def set_pinned(
        self, scope: ScopeKey, entry_id: str, pinned: bool, *, source: str = "user"
    ) -> MemoryEntry:
        kind = ChangeKind.PINNED if pinned else ChangeKind.UNPINNED
        return await self._edit_one(
            scope,
            entry_id,
            source,
            # Freeze (or resume decay from) the score as it is now, not as last stored.
            lambda e, now: (
                e.with_(pinned=pinned, score=score_at(e, now, self.policy), scored_at=now),
                kind,
                "",
            ),
        )

    async def archive(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            current = score_at(e, now, self.policy)
            return (
                e.with_(archived=ArchiveReason.MANUAL, score=current, scored_at=now),
                ChangeKind.ARCHIVED,
                "archived by request",
            )

        return await self._edit_one(scope, entry_id, source, change)

    async def restore(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Back to Active; a decayed entry is lifted to the low-importance start score and
        counted as activated now, or it would fall straight back into the archive."""

        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            current = score_at(e, now, self.policy)
            floor = initial_score(Importance.LOW)
            if current < self.policy.archive_below:
                restored = e.with_(archived=None, score=floor, scored_at=now, last_activated=now)
            else:
                restored = e.with_(archived=None, score=current, scored_at=now)
            return restored, ChangeKind.RESTORED, "restored by request"

        return await self._edit_one(scope, entry_id, source, change)

    async def edit(
        self, scope: ScopeKey, entry_id: str, content: str, *, source: str = "user"
    ) -> MemoryEntry:
        text = content.strip()
        if not text:
            raise ChatmemError("a memory needs some content")
        return await self._edit_one(
            scope, entry_id, source, lambda e, now: (e.with_(content=text), ChangeKind.EDITED, "")
        )

    async def touch(self, scope: ScopeKey) -> Path:
        """Make the scope's file (with its headings) if there is none."""
        path = self.store.path(scope)
        if not await asyncio.to_thread(path.exists):
            await self.store.update(scope, lambda parsed: (parsed.entries, None), self.now())
        return path

    async def _edit_one(
        self, scope: ScopeKey, entry_id: str, source: str, fn: EditFn
    ) -> MemoryEntry:
        when = self.now()

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], tuple[MemoryEntry, Change]]:
            for index, entry in enumerate(parsed.entries):
                if entry.id == entry_id:
                    updated, kind, detail = fn(entry, when)
                    entries = list(parsed.entries)
                    if updated is None:
                        del entries[index]
                    else:
                        entries[index] = updated
                    after = updated or entry
                    record = Change(
                        kind,
                        entry.id,
                        score_at(entry, when, self.policy),
                        None if updated is None else after.score,
                        after.content,
                        after.category,
                        detail,
                    )
                    return entries, (after, record)
            raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")

        entry, record = await self.store.update(scope, change, when)
        await self._record(scope, [record], source, when)
        await self._written(scope)
        return entry

    async def _record(
        self, scope: ScopeKey, changes: list[Change], source: str, when: datetime
    ) -> None:
        if self.audit is None:
            return
        try:
            await self.audit.record(scope, changes, source, when)
        except sqlite3.Error as exc:
            log.warning("audit log write failed (%s); the memory file was written", exc)

    # --- prompt ---------------------------------------------------------------------
    async def prompt_memories(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """The prompt's memory block, rendered once per version of the long-term file and
        reused until a score it depends on can change (a day boundary of an entry)."""
        when = now or self.now()
        settings = self.config.prompt
        ranked = await self._ranked_entries(scope)
        cached = self._prompt_cache.get(scope)
        if cached is not None and cached[0] is ranked and cached[1] <= when < cached[2]:
            return cached[3]
        chosen, until = select_prompt_entries_until(
            ranked,
            when,
            min_score=settings.min_score,
            top_k=settings.top_k,
            policy=self.policy,
            ranked=True,
        )
        block = render_prompt_memories(chosen, settings.max_tokens)
        self._prompt_cache[scope] = (ranked, when, until, block)
        return block

    async def _ranked_entries(self, scope: ScopeKey) -> list[MemoryEntry]:
        """Entries by stored score, highest first, sorted once per version of the file."""
        parsed = await self.store.load(scope, max_age=HOT_PATH_MAX_AGE)
        cached = self._ranked_cache.get(scope)
        if cached is not None and cached[0] is parsed:
            return cached[1]
        ranked = sorted(parsed.entries, key=lambda e: -e.score)
        self._ranked_cache[scope] = (parsed, ranked)
        return ranked

    # --- reports --------------------------------------------------------------------
    async def scopes(self) -> list[ScopeKey]:
        await self.flush()  # a scope's first capture creates its directory
        return await asyncio.to_thread(self.workspace.scopes)

    async def status(self, scope: ScopeKey, *, now: datetime | None = None) -> ScopeStatus:
        when = now or self.now()
        parsed = await self.store.load(scope)
        current = [
            e.with_(score=score_at(e, when, self.policy), scored_at=when) for e in parsed.entries
        ]
        active = [e for e in current if status_of(e, self.policy) is Status.ACTIVE]
        archived = [e for e in current if status_of(e, self.policy) is not Status.ACTIVE]
        daily_files = await asyncio.to_thread(_count_daily, self.workspace.memory_dir(scope))
        return ScopeStatus(
            scope=scope,
            active=sorted(active, key=lambda e: -e.score),
            archived=sorted(archived, key=lambda e: -e.score),
            quarantined=list(parsed.quarantined),
            daily_files=daily_files,
            path=self.relative_path(scope),
        )

    async def validate(self) -> list[ValidationProblem]:
        """Every quarantined block in every scope's long-term file."""
        problems: list[ValidationProblem] = []
        for scope in await self.scopes():
            parsed = await self.store.load(scope)
            rel = self.relative_path(scope)
            problems.extend(ValidationProblem(scope, rel, block) for block in parsed.quarantined)
        return problems


def _activation_batches(
    entries: Sequence[MemoryEntry], activations: Sequence[Activation]
) -> list[tuple[str, list[Candidate]]]:
    """Recorded uses of entries, as reinforcing candidates grouped by session."""
    by_id = {e.id: e for e in entries}
    grouped: dict[str, list[Candidate]] = {}
    for entry_id, session_id in activations:
        entry = by_id.get(entry_id)
        if entry is not None:
            grouped.setdefault(session_id, []).append(
                Candidate(content=entry.content, category=entry.category, matches=entry_id)
            )
    return list(grouped.items())


def _count_daily(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(1 for p in directory.glob("????-??-??.md"))
