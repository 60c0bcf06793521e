"""Long-term memory of every scope: entries, captures, edits, decay and the prompt block.

MEMORY.md is the truth; this class orders reads and writes of it (the store's locks, the
staged captures written first), records each change in the audit log and tells the index
what changed. It knows nothing of sessions or the model: a merge takes a session id only
to stay idempotent.

An entry that leaves the file by being forgotten (by request, or by decay in any write) is
kept in the scope's forgotten file (`forgotten.py`) right after the write that dropped it,
under the scope's `forgotten` lock. That lock is never held across a write of the
long-term file (which may first wait for a staged write, whose follow-up keeps what it
forgot under that very lock): each step takes it for its own read-change-write only.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memory_core.activations import Activation
from memory_core.config import Config
from memory_core.entities import Entity, extract_entities
from memory_core.entries import ArchiveReason, Importance, MemoryClass, MemoryEntry
from memory_core.errors import ChatmemError, DatabaseUnreachable, EntryNotFound
from memory_core.forgotten import ForgottenFile
from memory_core.inputs import choice, storable
from memory_core.memory.guard import IndexGuard
from memory_core.memory_md import QuarantinedBlock
from memory_core.memory_md_parser import ParsedMemory
from memory_core.merge import merge
from memory_core.merge_values import Candidate, Change, ChangeKind, MergeResult
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

RewriteFn = Callable[[list[MemoryEntry], datetime], tuple[list[MemoryEntry], list[Change]]]
EditFn = Callable[[MemoryEntry, datetime], tuple[MemoryEntry | None, ChangeKind, str]]
"""An edit of one entry: the entry after it (None: forgotten), the change and its detail.
Returning the very entry it was given means "nothing to do": no write, no audit row."""


class _Unchanged(Exception):
    """Raised inside a store update to leave the file as it is (nothing is written)."""


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
        self._journal_away = False
        self.forgotten = ForgottenFile(
            workspace, config.long_term.forgotten_keep_days, self.policy.archive_below
        )
        # The store's registry: its process layer may be the database's advisory locks.
        self._locks = store.locks
        self._ranked_cache: dict[ScopeKey, tuple[ParsedMemory, list[MemoryEntry]]] = {}
        self._entities: dict[str, tuple[ParsedMemory, list[Entity]]] = {}
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
        """What follows the background write of staged captures: forgotten entries kept,
        audit rows and index."""
        # Read before any await: the next write of the scope replaces the record.
        written = self.store.last_write.get(scope)
        if written is not None:
            await self._keep_forgotten(scope, _forgotten_entries(written.before, decayed, when))
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

    async def entities(self, scope: ScopeKey) -> list[Entity]:
        """The entities the scope's Active memories name (best first), found again only
        when the file changed: the store hands out the same parse until then."""
        parsed = await self.store.load(scope)
        cached = self._entities.get(scope.value)
        if cached is not None and cached[0] is parsed:
            return cached[1]
        active = [e for e in parsed.entries if e.archived is None]
        found = await asyncio.to_thread(extract_entities, active)
        self._entities[scope.value] = (parsed, found)
        return found

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
        activations = await self._pending_uses(scope)
        # A merge that brings nothing (no candidates, no uses, no session to record) and
        # changes nothing (a second consolidation the same day) writes nothing.
        idle = not batch and not activations and session_id is None
        unchanged: list[MergeResult] = []

        def change(
            parsed: ParsedMemory,
        ) -> tuple[list[MemoryEntry], tuple[MergeResult, list[MemoryEntry]]]:
            result = _merged(
                parsed.entries, activations, batch, when, session_id, seen, self.policy
            )
            if idle and not result.changes:
                unchanged.append(result)
                raise _Unchanged
            forgotten = _forgotten_entries(parsed.entries, result.changes, when)
            return result.entries, (result, forgotten)

        try:
            result, forgotten = await self.store.update(scope, change, when)
        except _Unchanged:
            await self._keep_forgotten(scope, [])  # kept entries past their days still go
            return unchanged[0]
        if self.activations is not None and activations:
            try:
                await self.activations.clear(scope, activations)
            except sqlite3.DatabaseError as exc:
                log.warning("uses of memories applied but not cleared (%s)", exc)
        await self._keep_forgotten(scope, forgotten)
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
        memory_class: MemoryClass | str | None = None,
    ) -> tuple[MemoryEntry, MergeResult]:
        """Save one memory now: the entry that holds it, and the merge, whose `outcome`
        says whether it was saved new, updated an alike entry (another number, date or
        negation: the old one is contradicted) or reinforced a repeat. Labels are the enum
        members or their strings (`importance="high"`, `memory_class="event"`); anything
        else, or text UTF-8 cannot hold, is one InputRefused."""
        text = self._checked_content(content)
        storable(source, "the source")
        cand = Candidate(
            content=text,
            category=storable(category, "the category"),
            importance=choice(Importance, importance, "importance"),
            expires_at=expires_at,
            memory_class=None
            if memory_class is None
            else choice(MemoryClass, memory_class, "memory_class"),
        )
        result: MergeResult | None = None
        if self.staging is not None:
            try:
                result = await self.staging.capture(scope, cand, source, self.now())
            except DatabaseUnreachable as exc:
                # The journal lives in the database: without it the capture is written
                # to MEMORY.md at once, as without a journal. Said once per outage.
                if not self._journal_away:
                    self._journal_away = True
                    log.warning("capture journal unreachable, writing MEMORY.md directly: %s", exc)
            else:
                self._journal_away = False
        if result is None:
            result = await self.merge_candidates(scope, [cand], session_id=None, source=source)
        outcome = result.outcome
        if outcome is None:
            raise ChatmemError("the memory was not stored (already expired?)")
        entry = next(e for e in reversed(result.entries) if e.id == outcome.entry_id)
        return entry, result

    async def _pending_uses(self, scope: ScopeKey) -> list[Activation]:
        """Uses of the scope's entries in replies, not yet applied; none while the
        database cannot be read (they wait there for the next merge)."""
        if self.activations is None:
            return []
        try:
            return await self.activations.pending(scope)
        except sqlite3.DatabaseError as exc:
            log.warning("uses of memories not applied this time (%s)", exc)
            return []

    async def consolidate(self, scope: ScopeKey, *, now: datetime | None = None) -> MergeResult:
        """Decay, expire, archive and forget as of `now` (no new memories). Nothing is
        written when nothing would change (a second run the same day)."""
        return await self.merge_candidates(
            scope, (), session_id=None, source="consolidate", now=now
        )

    async def preview_consolidate(
        self, scope: ScopeKey, *, now: datetime | None = None
    ) -> MergeResult:
        """What `consolidate` would do as of `now`, computed on the loaded entries with the
        same pure merge (pending uses in replies included); nothing is written."""
        when = now or self.now()
        parsed = await self.store.load(scope)
        activations = await self._pending_uses(scope)
        return _merged(parsed.entries, activations, (), when, None, frozenset(), self.policy)

    async def forget(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Delete an entry from the file; it is kept in the scope's forgotten file for
        `long_term.forgotten_keep_days` (restorable) and the audit log keeps its text."""
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

        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            if e.pinned == pinned:
                return e, kind, ""  # already so
            # Freeze (or resume decay from) the score as it is now, not as last stored.
            current = score_at(e, now, self.policy)
            return e.with_(pinned=pinned, score=current, scored_at=now), kind, ""

        return await self._edit_one(scope, entry_id, source, change)

    async def archive(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            if e.archived is not None:
                return e, ChangeKind.ARCHIVED, ""  # already archived by request or expiry
            current = score_at(e, now, self.policy)
            return (
                e.with_(archived=ArchiveReason.MANUAL, score=current, scored_at=now),
                ChangeKind.ARCHIVED,
                "archived by request",
            )

        return await self._edit_one(scope, entry_id, source, change)

    async def restore(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Back to Active, from the archive or from the scope's forgotten entries; a decayed
        entry is lifted to the low-importance start score and counted as activated now, or
        it would fall straight back into the archive."""

        def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
            if e.archived is None and score_at(e, now, self.policy) >= self.policy.archive_below:
                return e, ChangeKind.RESTORED, ""  # already Active
            return self._revived(e, now), ChangeKind.RESTORED, "restored by request"

        try:
            entry = await self._edit_one(scope, entry_id, source, change)
        except EntryNotFound:
            return await self._restore_forgotten(scope, entry_id, source)
        await self._drop_kept(scope, entry.id)
        return entry

    def _revived(self, entry: MemoryEntry, now: datetime) -> MemoryEntry:
        current = score_at(entry, now, self.policy)
        if current < self.policy.archive_below:
            floor = initial_score(Importance.LOW)
            return entry.with_(archived=None, score=floor, scored_at=now, last_activated=now)
        return entry.with_(archived=None, score=current, scored_at=now)

    async def _restore_forgotten(self, scope: ScopeKey, entry_id: str, source: str) -> MemoryEntry:
        """Put a kept forgotten entry back into the long-term file, then drop it from the
        forgotten file: a crash in between leaves it in both (the live one wins, and the
        next restore drops the copy), never in neither."""
        when = self.now()
        kept = await asyncio.to_thread(self.forgotten.live, scope, when)
        entry = next((e for e in kept if e.id == entry_id), None)
        if entry is None:
            raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")
        revived = self._revived(entry, when)

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], None]:
            if any(e.id == entry_id for e in parsed.entries):
                raise _Unchanged  # restored meanwhile (another task or process)
            return [*parsed.entries, revived], None

        try:
            await self.store.update(scope, change, when)
        except _Unchanged:
            await self._drop_kept(scope, entry_id)
            return await self.get_entry(scope, entry_id)
        await self._drop_kept(scope, entry_id)
        record = Change(
            ChangeKind.RESTORED,
            entry_id,
            entry.score,
            revived.score,
            revived.content,
            revived.category,
            "restored from forgotten",
        )
        await self._record(scope, [record], source, when)
        await self._written(scope)
        return revived

    async def edit(
        self, scope: ScopeKey, entry_id: str, content: str, *, source: str = "user"
    ) -> MemoryEntry:
        text = self._checked_content(content)
        return await self._edit_one(
            scope, entry_id, source, lambda e, now: (e.with_(content=text), ChangeKind.EDITED, "")
        )

    async def touch(self, scope: ScopeKey) -> Path:
        """Make the scope's file (with its headings) if there is none."""
        path = self.store.path(scope)
        if not await asyncio.to_thread(path.exists):
            await self.store.update(scope, lambda parsed: (parsed.entries, None), self.now())
        return path

    async def rewrite(
        self, scope: ScopeKey, plan: RewriteFn, *, source: str, now: datetime | None = None
    ) -> list[Change]:
        """Apply a pure plan over all of the scope's entries (consolidation's phases) in
        one locked write: the file gets every change of the plan or none. The plan runs
        on what is on disk at write time, so it decides again if the file moved since the
        caller last read it; no write at all when it changes nothing."""
        when = now or self.now()

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], list[Change]]:
            entries, changes = plan(list(parsed.entries), when)
            if not changes:
                raise _Unchanged
            return entries, changes

        try:
            changes = await self.store.update(scope, change, when)
        except _Unchanged:
            return []
        await self._record(scope, changes, source, when)
        await self._written(scope)
        return changes

    async def _edit_one(
        self, scope: ScopeKey, entry_id: str, source: str, fn: EditFn
    ) -> MemoryEntry:
        when = self.now()
        unchanged: list[MemoryEntry] = []

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], tuple[MemoryEntry, Change]]:
            for index, entry in enumerate(parsed.entries):
                if entry.id == entry_id:
                    updated, kind, detail = fn(entry, when)
                    if updated is entry:
                        unchanged.append(entry)
                        raise _Unchanged
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

        try:
            entry, record = await self.store.update(scope, change, when)
        except _Unchanged:
            return unchanged[0]
        if record.kind is ChangeKind.FORGOTTEN:
            # `entry` is the one removed, as it was: kept with its score as of now.
            await self._keep_forgotten(scope, _forgotten_entries([entry], [record], when))
        await self._record(scope, [record], source, when)
        await self._written(scope)
        return entry

    def _checked_content(self, content: str) -> str:
        """The text kept: as given (inside; spaces around it dropped), or refused."""
        text = storable(content, "the memory").strip()
        if not text:
            raise ChatmemError("a memory needs some content")
        limit = self.config.long_term.max_capture_bytes
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise ChatmemError(
                f"a memory of {size} bytes is over the limit of {limit} bytes"
                " (long_term.max_capture_bytes)"
            )
        return text

    # --- forgotten entries ----------------------------------------------------------
    @asynccontextmanager
    async def _forgotten_lock(self, scope: ScopeKey) -> AsyncIterator[None]:
        async with self._locks.hold(self.workspace.lock_name(scope, "forgotten")):
            yield

    async def _keep_forgotten(self, scope: ScopeKey, entries: list[MemoryEntry]) -> None:
        """Keep entries a write just dropped, and drop kept ones past their days. Nothing
        to do (no lock, no write) when nothing was forgotten and no file is kept."""
        if not entries and not await asyncio.to_thread(self.forgotten.path(scope).exists):
            return
        async with self._forgotten_lock(scope):
            await asyncio.to_thread(self.forgotten.keep, scope, entries, self.now())

    async def _drop_kept(self, scope: ScopeKey, entry_id: str) -> None:
        """Drop a live entry's copy from the forgotten file: what a crash between the two
        writes of a restore leaves (a stat when there is no file)."""
        if not await asyncio.to_thread(self.forgotten.path(scope).exists):
            return
        async with self._forgotten_lock(scope):
            await asyncio.to_thread(self.forgotten.take, scope, {entry_id}, self.now())

    async def restorable(self, scope: ScopeKey) -> list[MemoryEntry]:
        """The scope's forgotten entries that `restore` can still bring back, newest first;
        each one's `scored_at` is when it was forgotten."""
        kept = await asyncio.to_thread(self.forgotten.live, scope, self.now())
        if not kept:
            return kept
        live = {e.id for e in await self.entries(scope)}
        return [e for e in kept if e.id not in live]

    async def forgotten_entries(self, scope: ScopeKey, ids: Collection[str]) -> list[MemoryEntry]:
        """The kept forgotten entries with these ids; EntryNotFound names the first id that
        is not one (and says so when it is a live entry, which must be forgotten first)."""
        kept = {e.id: e for e in await self.restorable(scope)}
        for entry_id in ids:
            if entry_id not in kept:
                if any(e.id == entry_id for e in await self.entries(scope)):
                    raise EntryNotFound(
                        f"entry {entry_id!r} of scope {scope} is not forgotten:"
                        f" forget it first (chatmem forget {entry_id})"
                    )
                raise EntryNotFound(f"no forgotten entry {entry_id!r} in scope {scope}")
        return [kept[entry_id] for entry_id in dict.fromkeys(ids)]

    async def erase_forgotten(self, scope: ScopeKey, ids: Collection[str]) -> list[MemoryEntry]:
        """Remove kept forgotten entries for good from the memory files: the forgotten file,
        and the long-term file's `.bak` (the previous version, which may still hold one).
        The audit log is the caller's part (`MemoryCore.purge`)."""
        async with self._forgotten_lock(scope):
            taken = await asyncio.to_thread(self.forgotten.take, scope, set(ids), self.now())
        if not taken:
            return taken
        if await asyncio.to_thread(self.workspace.backup_path(scope).exists):
            # Rewriting the file unchanged makes the current version (which holds no
            # forgotten entry) the backup, in place of the one that may hold the text.
            await self.store.update(scope, lambda parsed: (parsed.entries, None), self.now())
            await self._written(scope)
        return taken

    async def match_id(self, scope: ScopeKey, text: str) -> str:
        """The id of the entry (live or kept forgotten) that `text` names: the whole id, or
        a prefix of exactly one. An ambiguous prefix is an error listing the candidates."""
        wanted = text.strip()
        ids = [e.id for e in await self.entries(scope)]
        ids += [e.id for e in await self.restorable(scope) if e.id not in ids]
        if wanted in ids:
            return wanted
        matches = [i for i in ids if wanted and i.startswith(wanted)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise EntryNotFound(f"no entry {text!r} in scope {scope}")
        shown = ", ".join(matches[:10]) + (", …" if len(matches) > 10 else "")
        raise EntryNotFound(
            f"id prefix {text!r} matches {len(matches)} entries of scope {scope}: {shown}"
        )

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


def _merged(
    entries: Sequence[MemoryEntry],
    activations: Sequence[Activation],
    batch: Sequence[Candidate],
    when: datetime,
    session_id: str | None,
    seen: frozenset[str],
    policy: ScoringPolicy,
) -> MergeResult:
    """A merge as `merge_candidates` writes it: recorded uses first (a merge per session
    that used entries), then the candidates. Pure, so a preview computes the same."""
    changes: list[Change] = []
    for used_in, candidates in _activation_batches(entries, activations):
        applied = merge(entries, candidates, when, used_in, policy)
        entries, changes = applied.entries, changes + applied.changes
    result = merge(entries, batch, when, session_id, policy, seen)
    return MergeResult(result.entries, changes + result.changes)


def _forgotten_entries(
    before: Sequence[MemoryEntry], changes: Iterable[Change], when: datetime
) -> list[MemoryEntry]:
    """The entries `changes` forgot, as they were in `before` with the score they had when
    forgotten and `scored_at` = that time (the forgotten file's convention). One that is
    not in `before` (added by a staged capture and forgotten in the same write: only a
    clock that jumps does that) is made from its change."""
    gone = {c.entry_id: c for c in changes if c.kind is ChangeKind.FORGOTTEN}
    if not gone:
        return []
    found = {e.id: e for e in before if e.id in gone}
    kept = []
    for entry_id, c in gone.items():
        score = max(0.0, min(1.0, c.old_score or 0.0))
        entry = found.get(entry_id)
        if entry is None:
            entry = MemoryEntry(entry_id, c.content, c.category, score, when, when, when)
        kept.append(entry.with_(score=score, scored_at=when))
    return kept


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
