"""Long-term memory of every scope: entries, captures, edits, decay and the prompt block.

MEMORY.md is the truth; this class orders reads and writes of it (the store's locks, the
staged captures written first), records each change in the audit log and tells the index
what changed. It knows nothing of sessions or the model: a merge takes a session id only
to stay idempotent.

An entry that leaves the file by being forgotten (by request, or by decay in any write) is
kept in the scope's forgotten file right after the write that dropped it
(`forgotten_keeper.py` says under which lock). What each write does to the entries is
decided by the pure functions of `long_term_changes.py`; what is read out of the file
(prompt block, entities, status, problems) by `long_term_views.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from pathlib import Path

from memory_core.base.entries import Importance, MemoryClass, MemoryEntry
from memory_core.base.errors import (
    ChatmemError,
    DatabaseUnreachable,
    EntryNotFound,
    FileRefused,
    StorageError,
)
from memory_core.base.inputs import choice, storable
from memory_core.base.merge_values import (
    UPDATES_DETAIL,
    Change,
    ChangeKind,
    MergeResult,
    Proposal,
)
from memory_core.base.meter import NO_METER, CaptureAction, Meter
from memory_core.base.policy import ScoringPolicy
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.longterm.after_writes import AfterWrites
from memory_core.longterm.claims import group_speaker, is_group
from memory_core.longterm.entities import Entity
from memory_core.longterm.long_term_changes import (
    EditFn,
    RewriteFn,
    archive_edit,
    content_edit,
    edited,
    forget_edit,
    kept_forgotten,
    merged,
    pin_edit,
    restore_edit,
    revived,
)
from memory_core.longterm.long_term_views import LongTermViews, ScopeStatus, ValidationProblem
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.settled_store import SettledStore
from memory_core.longterm.staging import Staging
from memory_core.storage.interfaces import Activation, ActivationBackend, AuditBackend

log = logging.getLogger(__name__)


class _Unchanged(Exception):
    """Raised inside a store update to leave the file as it is (nothing is written)."""


def kept_actions(changes: Iterable[Change]) -> list[CaptureAction]:
    """How each candidate of a merge was kept (what the meter counts): an added entry is
    new, or updated when it replaces an alike one; a repeat is reinforced."""
    actions: list[CaptureAction] = []
    for change in changes:
        if change.kind is ChangeKind.REINFORCED:
            actions.append("reinforced")
        elif change.kind is ChangeKind.ADDED:
            actions.append("updated" if change.detail.startswith(UPDATES_DETAIL) else "new")
    return actions


class LongTermMemory:
    def __init__(
        self,
        config: Config,
        workspace: Workspace,
        store: SettledStore,
        after: AfterWrites,
        now: Callable[[], datetime],
        *,
        staging: Staging | None = None,
        audit: AuditBackend | None = None,
        activations: ActivationBackend | None = None,
        meter: Meter = NO_METER,
    ) -> None:
        """`store` settles staged captures before each read and write; `after` follows
        each write (forgotten entries, audit, index), as it follows the staging's;
        `meter` counts captures by how they were kept."""
        self.config = config
        self.policy: ScoringPolicy = config.scoring.policy()
        self.workspace = workspace
        self.store = store
        self.after = after
        self.now = now
        self.staging = staging
        self.audit = audit
        self.activations = activations
        self.meter = meter
        self._journal_away = False
        self.kept = after.kept
        self.views = LongTermViews(config, workspace, store, self.kept, self.policy)
        self._warming: asyncio.Task[None] | None = None
        self.read_ahead = False
        """Whether the first search starts `warm_later` (a serving core's)."""

    async def warm(self, scope: ScopeKey) -> None:
        """Read the scope's file and build what its captures match against now, so that
        the first capture or recall does not wait for it (a bot's start; on a file of
        100 000 entries, about a second from its parse cache). A file that cannot be read
        is logged and left for its first use to report."""
        try:
            await self.store.load(scope)
            if self.staging is not None:
                await self.staging.warm(scope)
        except FileRefused:
            pass  # the workspace boundary refused it: its first use says so, in one line
        except (ChatmemError, OSError) as exc:
            log.warning("long-term memory of %s not read ahead: %s", scope, exc)

    def warm_later(self, scope: ScopeKey) -> None:
        """`warm` in the background (nothing waits for it)."""
        self._warming = asyncio.create_task(self.warm(scope), name=f"chatmem-warm-{scope}")

    def searched(self, scope: ScopeKey) -> None:
        """A search was answered: a serving core (`read_ahead`) reads the main scope ahead
        now, once. Not at the open, nor during that search: the decoding holds the
        interpreter for most of a second at 100 000 entries, and a search needs only the
        entities (read from their own file)."""
        if self.read_ahead and self._warming is None:
            self.warm_later(MAIN)

    async def warmed(self) -> None:
        """Wait for the read-ahead `warm_later` started, if any."""
        if self._warming is not None:
            await asyncio.shield(self._warming)

    async def stop_warming(self) -> None:
        """Cancel the read-ahead (at close: it is an optimisation, never waited for)."""
        if self._warming is not None:
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming

    async def flush(self, scope: ScopeKey | None = None) -> None:
        """Write staged captures to MEMORY.md now (of one scope, or of all)."""
        if self.staging is None:
            return
        if scope is None:
            await self.staging.settle_all()
        else:
            await self.staging.settle(scope)

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
        """The entities the scope's Active memories name (best first), cached per version
        of the file."""
        return await self.views.entities(scope)

    async def get_entry(self, scope: ScopeKey, entry_id: str) -> MemoryEntry:
        for entry in await self.entries(scope):
            if entry.id == entry_id:
                return entry
        raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")

    # --- writing --------------------------------------------------------------------
    async def merge_candidates(
        self,
        scope: ScopeKey,
        candidates: Iterable[Proposal],
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
            result = merged(parsed.entries, activations, batch, when, session_id, seen, self.policy)
            if idle and not result.changes:
                unchanged.append(result)
                raise _Unchanged
            forgotten = kept_forgotten(parsed.entries, result.changes, when)
            return result.entries, (result, forgotten)

        try:
            result, forgotten = await self.store.update(scope, change, when)
        except _Unchanged:
            await self.kept.keep(scope, [])  # kept entries past their days still go
            return unchanged[0]
        if self.activations is not None and activations:
            try:
                await self.activations.clear(scope, activations)
            except StorageError as exc:
                log.warning("uses of memories applied but not cleared (%s)", exc)
        await self.kept.keep(scope, forgotten)
        if not result.skipped:
            await self.after.record(scope, result.changes, source, when)
            if session_id is not None and self.audit is not None:
                await self.audit.mark_session(scope, session_id, when, result.stats)
            await self.after.indexed(scope)
            for action in kept_actions(result.changes) if batch else ():
                self.meter.capture(action)
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
        speaker: str | None = None,
        speaker_id: str | None = None,
    ) -> tuple[MemoryEntry, MergeResult]:
        """Save one memory now: the entry that holds it, and the merge, whose `outcome`
        says whether it was saved new, updated an alike entry (another number, date or
        negation: the old one is contradicted) or reinforced a repeat. Labels are the enum
        members or their strings (`importance="high"`, `memory_class="event"`); anything
        else, or text UTF-8 cannot hold, is one InputRefused. `speaker`, the group member
        who said it, is kept in a group scope only (longterm/claims.py: whose fact it is),
        with `speaker_id`, their platform id (what an erasure finds them by)."""
        text = self._checked_content(content)
        storable(source, "the source")
        cand = Proposal(
            content=text,
            category=storable(category, "the category"),
            importance=choice(Importance, importance, "importance"),
            expires_at=expires_at,
            memory_class=None
            if memory_class is None
            else choice(MemoryClass, memory_class, "memory_class"),
            speaker=group_speaker(scope, speaker),
            speaker_id=speaker_id if is_group(scope) and speaker_id else None,
        )
        result: MergeResult | None = None
        if self.staging is not None:
            try:
                result = await self.staging.capture(scope, cand, source, self.now())
                for action in kept_actions(result.changes)[-1:]:  # this capture's
                    self.meter.capture(action)
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
        except StorageError as exc:
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
        return merged(parsed.entries, activations, (), when, None, frozenset(), self.policy)

    async def forget(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Delete an entry from the file; it is kept in the scope's forgotten file for
        `long_term.forgotten_keep_days` (restorable) and the audit log keeps its text."""
        return await self._edit_one(scope, entry_id, source, forget_edit)

    async def set_pinned(
        self, scope: ScopeKey, entry_id: str, pinned: bool, *, source: str = "user"
    ) -> MemoryEntry:
        return await self._edit_one(scope, entry_id, source, pin_edit(pinned, self.policy))

    async def archive(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        return await self._edit_one(scope, entry_id, source, archive_edit(self.policy))

    async def restore(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Back to Active, from the archive or from the scope's forgotten entries; a decayed
        entry is lifted to the low-importance start score and counted as activated now, or
        it would fall straight back into the archive (`long_term_changes.revived`)."""
        try:
            entry = await self._edit_one(scope, entry_id, source, restore_edit(self.policy))
        except EntryNotFound:
            return await self._restore_forgotten(scope, entry_id, source)
        await self.kept.drop(scope, entry.id)
        return entry

    async def _restore_forgotten(self, scope: ScopeKey, entry_id: str, source: str) -> MemoryEntry:
        """Put a kept forgotten entry back into the long-term file, then drop it from the
        forgotten file: a crash in between leaves it in both (the live one wins, and the
        next restore drops the copy), never in neither."""
        when = self.now()
        kept = await self.kept.live(scope, when)
        entry = next((e for e in kept if e.id == entry_id), None)
        if entry is None:
            raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")
        back = revived(entry, when, self.policy)

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], None]:
            if any(e.id == entry_id for e in parsed.entries):
                raise _Unchanged  # restored meanwhile (another task or process)
            return [*parsed.entries, back], None

        try:
            await self.store.update(scope, change, when)
        except _Unchanged:
            await self.kept.drop(scope, entry_id)
            return await self.get_entry(scope, entry_id)
        await self.kept.drop(scope, entry_id)
        record = Change(
            ChangeKind.RESTORED,
            entry_id,
            entry.score,
            back.score,
            back.content,
            back.category,
            "restored from forgotten",
        )
        await self.after.record(scope, [record], source, when)
        await self.after.indexed(scope)
        return back

    async def edit(
        self, scope: ScopeKey, entry_id: str, content: str, *, source: str = "user"
    ) -> MemoryEntry:
        text = self._checked_content(content)
        return await self._edit_one(scope, entry_id, source, content_edit(text))

    async def touch(self, scope: ScopeKey) -> Path:
        """Make the scope's file (with its headings) if there is none."""
        path = self.store.path(scope)
        if not await asyncio.to_thread(path.exists):
            await self.store.update(scope, lambda parsed: (parsed.entries, None), self.now())
        return path

    async def rewrite(
        self,
        scope: ScopeKey,
        plan: RewriteFn,
        *,
        source: str,
        now: datetime | None = None,
        quarantine: Sequence[QuarantinedBlock] = (),
    ) -> list[Change]:
        """Apply a pure plan over all of the scope's entries (consolidation's phases) in
        one locked write: the file gets every change of the plan or none. The plan runs
        on what is on disk at write time, so it decides again if the file moved since the
        caller last read it; no write at all when it changes nothing. `quarantine`: blocks
        an import could not read, kept in the file's quarantine (those it lacks)."""
        when = now or self.now()

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], list[Change]]:
            entries, changes = plan(list(parsed.entries), when)
            held = {block.text for block in parsed.quarantined}
            if not changes and all(block.text in held for block in quarantine):
                raise _Unchanged
            return entries, changes

        try:
            changes = await self.store.update(scope, change, when, quarantine=quarantine)
        except _Unchanged:
            return []
        await self.after.record(scope, changes, source, when)
        await self.after.indexed(scope)
        return changes

    async def _edit_one(
        self, scope: ScopeKey, entry_id: str, source: str, fn: EditFn
    ) -> MemoryEntry:
        when = self.now()
        unchanged: list[MemoryEntry] = []

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], tuple[MemoryEntry, Change]]:
            done = edited(parsed.entries, entry_id, fn, when, self.policy)
            if done is None:
                raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")
            if done.change is None:
                unchanged.append(done.entry)
                raise _Unchanged
            return done.entries, (done.entry, done.change)

        try:
            entry, record = await self.store.update(scope, change, when)
        except _Unchanged:
            return unchanged[0]
        if record.kind is ChangeKind.FORGOTTEN:
            # `entry` is the one removed, as it was: kept with its score as of now.
            await self.kept.keep(scope, kept_forgotten([entry], [record], when))
        await self.after.record(scope, [record], source, when)
        await self.after.indexed(scope)
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
    async def restorable(self, scope: ScopeKey) -> list[MemoryEntry]:
        """The scope's forgotten entries that `restore` can still bring back, newest first;
        each one's `scored_at` is when it was forgotten."""
        return await self.views.restorable(scope, self.now())

    async def forgotten_entries(self, scope: ScopeKey, ids: Collection[str]) -> list[MemoryEntry]:
        """The kept forgotten entries with these ids; EntryNotFound names the first id that
        is not one (and says so when it is a live entry, which must be forgotten first)."""
        return await self.views.forgotten_entries(scope, ids, self.now())

    async def erase_forgotten(self, scope: ScopeKey, ids: Collection[str]) -> list[MemoryEntry]:
        """Remove kept forgotten entries for good from the memory files: the forgotten file,
        and the long-term file's `.bak` (the previous version, which may still hold one).
        The audit log is the caller's part (`MemoryCore.purge`)."""
        taken = await self.kept.take(scope, ids)
        if not taken:
            return taken
        if await asyncio.to_thread(self.workspace.backup_path(scope).exists):
            # Rewriting the file unchanged makes the current version (which holds no
            # forgotten entry) the backup, in place of the one that may hold the text.
            await self.store.update(scope, lambda parsed: (parsed.entries, None), self.now())
            await self.after.indexed(scope)
        return taken

    async def match_id(self, scope: ScopeKey, text: str) -> str:
        """The id of the entry (live or kept forgotten) that `text` names: the whole id, or
        a prefix of exactly one. An ambiguous prefix is an error listing the candidates."""
        return await self.views.match_id(scope, text, self.now())

    # --- reading out: prompt and reports (`long_term_views.py`) ------------------------
    async def prompt_memories(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """The prompt's memory block, rendered once per version of the long-term file and
        reused until a score it depends on can change (a day boundary of an entry)."""
        return await self.views.prompt_memories(scope, now or self.now())

    async def scopes(self) -> list[ScopeKey]:
        await self.flush()  # a scope's first capture creates its directory
        return await asyncio.to_thread(self.workspace.scopes)

    async def status(self, scope: ScopeKey, *, now: datetime | None = None) -> ScopeStatus:
        return await self.views.status(scope, now or self.now())

    async def validate(self) -> list[ValidationProblem]:
        """Every quarantined block in every scope's long-term file."""
        return await self.views.problems(await self.scopes())
