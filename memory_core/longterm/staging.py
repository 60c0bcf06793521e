"""Group commit for captures: acknowledged from the journal, written to MEMORY.md together.

Rewriting MEMORY.md is a render, two fsyncs and an index update: milliseconds for a small
file, tens of them for a large one, paid again by every memory of a burst (a `/new`
extraction, a chatty user, the `memory_save` tool). So a capture is applied to the scope's
in-memory view and committed to the capture journal (`storage/journal.py`, on disk when `capture`
returns); one background write per scope, `write_delay_seconds` after the first unwritten
capture, then puts everything staged meanwhile into MEMORY.md, the audit log and the index.

Consistency rules:

* Every read or other write of the scope through `MemoryCore` settles the scope first, so
  callers always see their own captures and writes stay in order.
* A staged change is a pure function of the entries. If MEMORY.md changed on disk since
  the view was built (a person's edit, another process), the write re-applies the staged
  captures to what is on disk instead of overwriting it. Entry ids are fixed at staging,
  so a replayed capture keeps the id its caller was given.
* A write that fails keeps its captures staged (and journalled) and is retried with
  backoff; a crash leaves them in the journal, replayed by the next process to start.
* A replay is per scope: a scope whose file cannot be read or written (a bad byte, a
  directory where the file should be) keeps its rows in the journal and is tried again
  when the scope is next used; every other scope is served meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from memory_core.base.clock import (
    Monotonic,
    Sleep,
    format_when,
    parse_when,
    system_monotonic,
    system_sleep,
)
from memory_core.base.entries import Importance, MemoryClass, MemoryEntry
from memory_core.base.errors import ChatmemError
from memory_core.base.merge_values import Change, ChangeKind, MergeResult, Proposal
from memory_core.base.policy import ScoringPolicy
from memory_core.base.retry import Backoff
from memory_core.base.scope import ScopeKey
from memory_core.longterm.decay import decay_all
from memory_core.longterm.matching import EntryView
from memory_core.longterm.memory_md_parser import ParsedMemory
from memory_core.longterm.merge import apply_candidates
from memory_core.longterm.store import LongTermStore
from memory_core.storage.journal import CaptureJournal, JournalRow

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0


def _backoff() -> Backoff:
    """Read at each use: a test may set the first wait lower."""
    return Backoff(RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS)


@dataclass(frozen=True, slots=True)
class Applied:
    """One staged capture as it landed in the file."""

    source: str
    when: datetime
    changes: list[Change]


WrittenHook = Callable[[ScopeKey, list[Applied], list[Change], datetime], Awaitable[None]]
"""Called after a write with what each capture did and what decay did (audit, index)."""


@dataclass(slots=True)
class _Staged:
    candidate: Proposal
    source: str
    when: datetime
    seq: int | None
    changes: list[Change]
    touched: str = ""
    """The entry the capture added or reinforced when it was staged."""
    added: bool = False
    hits_after: int = 0
    """The touched entry's hits once the capture is applied: a replay finding the entry
    there with at least these hits knows the capture reached the file already."""

    def apply(self, view: EntryView, policy: ScoringPolicy) -> list[Change]:
        """Apply to `view` in place (again, when replayed)."""
        self.changes = apply_candidates(view, [self.candidate], self.when, policy)
        return self.changes


@dataclass(slots=True)
class _Queue:
    mutex: asyncio.Lock = field(default_factory=asyncio.Lock)
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    base: ParsedMemory | None = None
    """The parsed file the view was built on (the store's object, compared by identity)."""
    view: EntryView | None = None
    staged: list[_Staged] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _Kept:
    """Journalled captures of a scope whose replay failed, and when to try again."""

    staged: list[_Staged]
    retry_at: float
    wait: float


class Staging:
    def __init__(
        self,
        store: LongTermStore,
        journal: CaptureJournal,
        policy: ScoringPolicy,
        delay: float,
        now: Callable[[], datetime],
        on_written: WrittenHook,
        view_max_age: float = 1.0,
        *,
        monotonic: Monotonic = system_monotonic,
        sleep: Sleep = system_sleep,
    ) -> None:
        """`monotonic` times the backoff of a scope whose journalled captures could not
        be replayed (`_kept`); `sleep` waits `delay` before a write and the backoff
        between failed writes."""
        self._store = store
        self._monotonic = monotonic
        self._sleep = sleep
        self.journal = journal
        self._policy = policy
        self._delay = delay
        self._now = now
        self._on_written = on_written
        self._view_max_age = view_max_age
        self._queues: dict[ScopeKey, _Queue] = {}
        self._kept: dict[ScopeKey, _Kept] = {}
        self._closed = False

    async def capture(
        self, scope: ScopeKey, candidate: Proposal, source: str, when: datetime
    ) -> MergeResult:
        """Apply `candidate` to the view and journal it; the file follows shortly."""
        if self._closed:
            raise ChatmemError("the memory core is closing")
        await self._replay_kept(scope)  # older captures first
        queue = self._queues.setdefault(scope, _Queue())
        async with queue.mutex:
            view = await self._view(scope, queue)
            staged = _Staged(candidate, source, when, None, [])
            changes = staged.apply(view, self._policy)
            if not changes:
                return MergeResult(view.entries(), [])  # nothing to keep (expired already)
            staged.touched = changes[-1].entry_id
            staged.added = changes[-1].kind is ChangeKind.ADDED
            staged.hits_after = view.by_id[staged.touched].hits
            # A replay must give an added entry the id its caller was given now.
            staged.candidate = replace(candidate, new_id=staged.touched)
            try:
                staged.seq = await self.journal.append(scope.value, _payload(staged))
            except BaseException:
                # Not acknowledged, so not kept: rebuild the view without it.
                await self._rebuild_view(scope, queue)
                raise
            queue.staged.append(staged)
            result = MergeResult(view.entries(), changes)
        if queue.task is None or queue.task.done():
            queue.task = asyncio.create_task(self._write_later(scope, queue))
        return result

    async def _view(self, scope: ScopeKey, queue: _Queue) -> EntryView:
        """The view captures apply to (under the mutex): built on the file as it is, unless
        captures wait to be written, whose view it is (their write replays them onto a
        file that changed meanwhile)."""
        if queue.view is None or not (queue.staged or queue.writing.locked()):
            parsed = await self._store.load(scope, max_age=self._view_max_age)
            if queue.view is None or parsed is not queue.base:
                # In a worker thread: normalizing every entry of a large file takes a
                # fraction of a second the event loop would otherwise stand still for.
                view = await asyncio.to_thread(EntryView.of, parsed.entries)
                queue.base, queue.view = parsed, view
        assert queue.view is not None
        return queue.view

    async def warm(self, scope: ScopeKey) -> None:
        """Build the scope's view now (a bot's start), so that its first capture matches
        against it at once instead of reading and indexing the whole file first. It is
        checked against the file at that capture (a stat), and built again if the file
        changed meanwhile."""
        queue = self._queues.setdefault(scope, _Queue())
        async with queue.mutex:
            # The grouping passes over every entry: off the event loop too (the mutex
            # keeps every capture off the view meanwhile).
            await asyncio.to_thread((await self._view(scope, queue)).ready)

    async def _rebuild_view(self, scope: ScopeKey, queue: _Queue) -> None:
        """The view from the file plus the captures still staged (under the mutex)."""
        parsed = await self._store.load(scope)
        view = await asyncio.to_thread(EntryView.of, parsed.entries)
        for staged in queue.staged:
            staged.apply(view, self._policy)
        queue.base, queue.view = None, view

    async def settle(self, scope: ScopeKey) -> None:
        """Write the scope's staged captures now, if any, or wait for the write that has
        them in hand (errors reach the caller)."""
        await self._replay_kept(scope)
        queue = self._queues.get(scope)
        if queue is not None and (queue.staged or queue.writing.locked()):
            await self._write(scope, queue)

    async def settle_all(self) -> None:
        for scope in list(self._queues):
            await self.settle(scope)

    async def close(self) -> None:
        """Write everything staged; what cannot be written stays in the journal."""
        self._closed = True
        for queue in self._queues.values():
            if queue.task is not None:
                queue.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await queue.task
        for scope in list(self._queues):
            try:
                await self.settle(scope)
            except Exception as exc:  # kept in the journal for the next start
                log.error("staged captures of %s not written (%s); kept in the journal", scope, exc)

    async def recover(self) -> int:
        """Replay captures journalled by processes that died before writing them.

        Scope by scope: one that fails is logged and keeps its rows (`_kept`, tried again
        when the scope is used), and the others are replayed and served regardless.
        """
        rows = await self.journal.adopt_orphans()
        by_scope: dict[str, list[JournalRow]] = {}
        for row in rows:
            by_scope.setdefault(row.scope, []).append(row)
        replayed = 0
        for scope_value, scope_rows in by_scope.items():
            staged = [s for s in map(_staged_from, scope_rows) if s is not None]
            if not staged:
                continue
            try:
                scope = ScopeKey(scope_value)
            except ChatmemError as exc:
                log.error("capture journal names a bad scope %r (%s); rows kept", scope_value, exc)
                continue
            replayed += await self._replay(scope, staged, RETRY_FIRST_SECONDS)
        if replayed:
            log.info("replayed %d journalled captures", replayed)
        return replayed

    async def _replay(self, scope: ScopeKey, staged: list[_Staged], wait: float) -> int:
        """Write `staged` (journalled by a dead process) to the scope's file; how many were
        replayed, 0 when the write failed and they were kept for a later try."""
        try:
            await self._write_staged(scope, staged, base=None, entries=None)
        except Exception as exc:  # this scope only: the others must still be served
            log.error(
                "%d journalled captures of scope %s cannot be written (%s); they stay in"
                " the journal and are tried again when the scope is used",
                len(staged),
                scope,
                exc,
            )
            self._kept[scope] = _Kept(staged, self._monotonic() + wait, _backoff().after(wait))
            return 0
        try:
            await self.journal.remove([s.seq for s in staged if s.seq is not None])
        except Exception as exc:  # in the file now; a second replay would skip them
            log.error("replayed captures of scope %s left in the journal (%s)", scope, exc)
        log.info("replayed %d journalled captures of scope %s", len(staged), scope)
        return len(staged)

    async def _replay_kept(self, scope: ScopeKey) -> None:
        """Try the scope's kept captures again once their wait is over (a person may have
        fixed the file); a failure is logged, not raised: reads of the scope may work."""
        kept = self._kept.get(scope)
        if kept is None or self._monotonic() < kept.retry_at:
            return
        del self._kept[scope]  # one task replays; others go on meanwhile
        await self._replay(scope, kept.staged, kept.wait)

    # --- writing -----------------------------------------------------------------------
    async def _write_later(self, scope: ScopeKey, queue: _Queue) -> None:
        await self._sleep(self._delay)
        waits = _backoff().waits()
        while queue.staged and not self._closed:
            try:
                # Shielded: `close` cancels this task, but a write under way must finish
                # (its thread would go on writing after the file lock was let go).
                await asyncio.shield(self._write(scope, queue))
            except Exception as exc:  # retried; the captures stay journalled
                log.warning("writing staged captures of %s failed (%s); retrying", scope, exc)
                await self._sleep(next(waits))

    async def _write(self, scope: ScopeKey, queue: _Queue) -> None:
        async with queue.writing:
            async with queue.mutex:
                staged, base, view = queue.staged, queue.base, queue.view
                queue.staged = []
                # The view as these captures left it: captures made while the file is
                # written change the view, and must not reach this write (they are
                # re-applied to the written file below, so would count twice).
                entries = view.entries() if view is not None else None
            if not staged:
                return
            try:
                written = await self._write_staged(scope, staged, base, entries)
            except BaseException:
                async with queue.mutex:
                    queue.staged = staged + queue.staged
                raise
            async with queue.mutex:
                if queue.staged:
                    # Captured while we wrote: rebuild their view on what is on disk now.
                    view = EntryView.of(written.entries)
                    for later in queue.staged:
                        later.apply(view, self._policy)
                    queue.base, queue.view = written, view
                else:
                    queue.base = queue.view = None
            try:
                await self.journal.remove([s.seq for s in staged if s.seq is not None])
            except Exception as exc:
                # The captures are in the file: left in the journal, a replay finds them
                # there and skips them. Failing the write now would make callers retry it.
                log.error("written captures of %s left in the journal (%s)", scope, exc)

    async def _write_staged(
        self,
        scope: ScopeKey,
        staged: list[_Staged],
        base: ParsedMemory | None,
        entries: list[MemoryEntry] | None,
    ) -> ParsedMemory:
        """One write of MEMORY.md with `staged` applied (`entries`: the view with exactly
        them, when the file is still `base`); the written file.

        The file is decayed to the time of the newest capture in it, not to the time of
        the write: it records the captures as of when they were made.
        """
        when = max(s.when for s in staged) if staged else self._now()
        policy = self._policy

        def change(
            parsed: ParsedMemory,
        ) -> tuple[list[MemoryEntry], tuple[list[Applied], list[Change]]]:
            if parsed is base and entries is not None:
                result = entries
                applied = [Applied(s.source, s.when, s.changes) for s in staged]
            else:
                # The file is not the one the view was built on: replay onto it.
                replayed, applied = EntryView.of(parsed.entries), []
                for s in staged:
                    if not _already_in(s, replayed):
                        applied.append(Applied(s.source, s.when, s.apply(replayed, policy)))
                result = replayed.entries()
            decayed = decay_all(result, when, policy)
            return decayed.entries, (applied, decayed.changes)

        applied, decay_changes = await self._store.update(scope, change, when)
        await self._on_written(scope, applied, decay_changes, when)
        return self._store.last_write[scope].after


def _payload(staged: _Staged) -> dict[str, Any]:
    cand = staged.candidate
    payload: dict[str, Any] = {
        "content": cand.content,
        "category": cand.category,
        "importance": cand.importance.value,
        "expires_at": format_when(cand.expires_at) if cand.expires_at else None,
        "memory_class": cand.memory_class.value if cand.memory_class else None,
        "new_id": cand.new_id,
        "touched": staged.touched,
        "added": staged.added,
        "hits_after": staged.hits_after,
        "source": staged.source,
        "when": format_when(staged.when),
    }
    if cand.speaker is not None:
        payload["speaker"] = cand.speaker  # a group member's capture (longterm/claims.py)
    if cand.speaker_id is not None:
        payload["speaker_id"] = cand.speaker_id
    return payload


def _staged_from(row: JournalRow) -> _Staged | None:
    """A journal row back as a staged capture; None (logged) for a row we cannot read."""
    data = row.payload
    try:
        expires = data.get("expires_at")
        candidate = Proposal(
            content=str(data["content"]),
            category=str(data["category"]),
            importance=Importance(data["importance"]),
            expires_at=parse_when(expires) if expires else None,
            new_id=str(data["new_id"]) if data.get("new_id") else None,
            memory_class=MemoryClass(data["memory_class"]) if data.get("memory_class") else None,
            speaker=str(data["speaker"]) if data.get("speaker") else None,
            speaker_id=str(data["speaker_id"]) if data.get("speaker_id") else None,
        )
        return _Staged(
            candidate,
            str(data.get("source", "capture")),
            parse_when(str(data["when"])),
            row.seq,
            [],
            str(data.get("touched") or ""),
            bool(data.get("added")),
            int(data.get("hits_after") or 0),
        )
    except (KeyError, ValueError, TypeError) as exc:
        log.error("capture journal row %d unreadable (%s): %r", row.seq, exc, data)
        return None


def _already_in(staged: _Staged, view: EntryView) -> bool:
    """A replayed capture that is already in the file (its write finished before a crash
    could remove it from the journal) is not applied twice.

    An added entry is there by its id (ids are random and never reused). A reinforcement
    is there when the entry has the hits it gave; if another process reinforced the same
    entry between the crash and the replay, that one reinforcement is counted once, not
    twice."""
    entry = view.by_id.get(staged.touched) if staged.touched else None
    if entry is None:
        return False
    return staged.added or entry.hits >= staged.hits_after
