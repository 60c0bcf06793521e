"""`MemoryCore`: the async facade every front end (bots, TUI, CLI) uses.

It owns the workspace, the locks, the long-term store and the database connection, and
takes an explicit `ScopeKey` on every call: nothing here derives a scope from anything.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import time
import zoneinfo
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite

from memory_core import daily
from memory_core.audit import AuditLog
from memory_core.chunking import Chunk, ChunkKind
from memory_core.clock import Clock, ensure_aware, format_when, system_clock
from memory_core.config import Config
from memory_core.db import Database, open_database
from memory_core.entries import ArchiveReason, Importance, MemoryEntry
from memory_core.errors import ChatmemError, EntryNotFound, IndexUnavailable
from memory_core.fallback import search_files
from memory_core.history import HistoryStore
from memory_core.index import RANK_BUDGET, Appended, Hit, SearchIndex, SyncStats
from memory_core.journal import CaptureJournal
from memory_core.llm import LLMClient
from memory_core.locks import LockRegistry, try_lock_file, unlock_file
from memory_core.memory_md import ParsedMemory, QuarantinedBlock
from memory_core.merge import Candidate, Change, ChangeKind, MergeResult, merge
from memory_core.prompt import render_prompt_memories, select_prompt_entries_until
from memory_core.reading import MemoryRead, read_memory_path
from memory_core.recall import (
    Injection,
    build_injection,
    day_bounds,
    has_recall_intent,
    recall_window,
)
from memory_core.scope import MAIN, ScopeKey
from memory_core.scoring import ScoringPolicy, Status, initial_score, score_at, status_of
from memory_core.staging import Applied, Staging
from memory_core.store import LongTermStore
from memory_core.text import ensure_loaded, extract_keywords, tokenize
from memory_core.workspace import Workspace

if TYPE_CHECKING:
    from memory_core.chat import NewSessionResult, TurnResult
    from memory_core.runtime import Runtime

log = logging.getLogger(__name__)

MESSAGE_CONTEXT_CHARS = 90
"""Each neighbouring message shown with a recalled message is cut to this length."""
HOT_PATH_MAX_AGE = 1.0
"""Seconds a chat turn may reuse the last check that MEMORY.md is unchanged on disk."""

FileListener = Callable[[ScopeKey, str], Awaitable[None]]


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


@dataclass(slots=True)
class _Listeners:
    on_file_written: list[FileListener] = field(default_factory=list)


class MemoryCore:
    """Open with `async with MemoryCore.open(config) as core:`."""

    def __init__(
        self, config: Config, *, clock: Clock = system_clock, llm: LLMClient | None = None
    ) -> None:
        self.config = config
        self.workspace = Workspace.at(config.workspace_path)
        self.policy: ScoringPolicy = config.scoring.policy()
        self.tz = zoneinfo.ZoneInfo(config.timezone)
        self._clock = clock
        self.locks = LockRegistry(self.workspace.locks_dir)
        self.store = LongTermStore(self.workspace, self.locks, self.policy.archive_below)
        self._db: Database | None = None
        self._audit: AuditLog | None = None
        self._listeners = _Listeners()
        self.degraded_reason: str | None = None
        self.index: SearchIndex | None = None
        self.llm = llm or LLMClient(config.llm)
        self._runtime: Runtime | None = None
        self._ranked_cache: dict[ScopeKey, tuple[ParsedMemory, list[MemoryEntry]]] = {}
        self._staging: Staging | None = None
        # Per scope: the ranked entries a prompt block was made from, the instants it holds
        # for (from, until) and the block itself.
        self._prompt_cache: dict[ScopeKey, tuple[list[MemoryEntry], datetime, datetime, str]] = {}

    # --- lifecycle ------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def open(
        cls, config: Config, *, clock: Clock = system_clock, llm: LLMClient | None = None
    ) -> AsyncIterator[MemoryCore]:
        core = cls(config, clock=clock, llm=llm)
        try:
            await core.start()
        except BaseException:
            # A half-started core still owns a database thread; leaving it open would keep
            # the process from exiting.
            await core.close()
            raise
        try:
            yield core
        finally:
            await core.close()

    async def start(self) -> None:
        await asyncio.to_thread(self.workspace.ensure_scope, MAIN)
        try:
            self._db = await open_database(self.workspace.db_path)
        except IndexUnavailable as exc:
            self.degraded_reason = str(exc)
            log.warning("database unavailable, running without audit log and index: %s", exc)
        else:
            self._audit = AuditLog(self._db)
            self.index = SearchIndex(
                self._db, self.workspace, self.config.recall.sync_min_interval_seconds, self.tz
            )
            self.add_file_listener(self._reindex_file)
        if self.config.long_term.journal:
            await self._open_staging()
        if self.index is None:
            return
        await ensure_loaded()
        try:
            await self.index.sync_all()
        except sqlite3.DatabaseError as exc:
            self._index_failed(exc)

    async def _open_staging(self) -> None:
        """Journalled captures; without a journal every capture writes MEMORY.md itself."""
        state = self.workspace.state_dir
        try:
            journal = await CaptureJournal.open(state / "journal.sqlite3", state / "owners")
        except (IndexUnavailable, OSError) as exc:
            log.warning("capture journal unavailable, captures write MEMORY.md directly: %s", exc)
            return
        staging = Staging(
            self.store,
            journal,
            self.policy,
            self.config.long_term.write_delay_seconds,
            self.now,
            self._staged_written,
            view_max_age=HOT_PATH_MAX_AGE,
        )
        self._staging = staging
        await staging.recover()
        self.store.settle = staging.settle

    async def _staged_written(
        self, scope: ScopeKey, applied: list[Applied], decayed: list[Change], when: datetime
    ) -> None:
        for capture in applied:
            await self._record(scope, capture.changes, capture.source, capture.when)
        await self._record(scope, decayed, applied[-1].source if applied else "capture", when)
        await self._long_term_written(scope)

    async def flush(self, scope: ScopeKey | None = None) -> None:
        """Write staged captures to MEMORY.md now (of one scope, or of all)."""
        if self._staging is None:
            return
        if scope is None:
            await self._staging.settle_all()
        else:
            await self._staging.settle(scope)

    async def close(self) -> None:
        if self._runtime is not None:
            await self._runtime.stop()
            self._runtime = None
        await self.llm.close()
        if self._staging is not None:
            self.store.settle = None
            await self._staging.close()
            await self._staging.journal.close()
            self._staging = None
        if self._db is not None:
            await self._db.close()
            self._db = None
            self._audit = None
            self.index = None

    def _index_failed(self, exc: BaseException) -> None:
        """Keep answering from files; `chatmem reindex` repairs the index."""
        self.degraded_reason = f"index unusable: {exc}"
        log.warning("search index unusable, searching files directly: %s", exc)
        self.index = None

    async def _reindex_file(self, scope: ScopeKey, path: str) -> None:
        if self.index is None:
            return
        try:
            await self.index.sync_file(scope, path)
        except sqlite3.DatabaseError as exc:
            self._index_failed(exc)

    @property
    def db(self) -> Database | None:
        return self._db

    @property
    def audit(self) -> AuditLog:
        if self._audit is None:
            raise IndexUnavailable(self.degraded_reason or "the database is not open")
        return self._audit

    def now(self) -> datetime:
        """Clock time at second precision: what files can store is what we compute with."""
        return ensure_aware(self._clock()).replace(microsecond=0)

    def today(self, when: datetime | None = None) -> date:
        return (when or self.now()).astimezone(self.tz).date()

    def add_file_listener(self, listener: FileListener) -> None:
        """Called after the core writes a memory file (the index re-reads it)."""
        self._listeners.on_file_written.append(listener)

    async def _long_term_written(self, scope: ScopeKey) -> None:
        """Index what the last long-term write changed: only added, edited and removed
        entries are (re)tokenized, not the whole file."""
        record = self.store.last_write.get(scope)
        if self.index is None or record is None:
            return
        try:
            await self.index.update_long_term(
                scope, self.workspace.relative(self.store.path(scope)), record
            )
        except sqlite3.DatabaseError as exc:
            self._index_failed(exc)

    async def notify_file_written(self, scope: ScopeKey, path: str) -> None:
        """Tell listeners (the index) that the core wrote `path` of `scope`."""
        for listener in self._listeners.on_file_written:
            await listener(scope, path)

    # --- long-term memory ------------------------------------------------------------
    async def load(self, scope: ScopeKey) -> ParsedMemory:
        return await self.store.load(scope)

    async def entries(self, scope: ScopeKey) -> list[MemoryEntry]:
        return list((await self.store.load(scope)).entries)

    async def get_entry(self, scope: ScopeKey, entry_id: str) -> MemoryEntry:
        for entry in await self.entries(scope):
            if entry.id == entry_id:
                return entry
        raise EntryNotFound(f"no entry {entry_id!r} in scope {scope}")

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
            if session_id is not None and self._audit is not None
            else frozenset()
        )
        if session_id is not None and session_id in seen:
            # Already merged: no write at all (a rewrite would also clobber the .bak).
            parsed = await self.store.load(scope)
            return MergeResult(entries=list(parsed.entries), skipped=True)
        activations = await self._pending_activations(scope)

        def change(parsed: ParsedMemory) -> tuple[list[MemoryEntry], MergeResult]:
            entries = parsed.entries
            changes: list[Change] = []
            for used_in, candidates in _activation_batches(entries, activations):
                applied = merge(entries, candidates, when, used_in, self.policy)
                entries, changes = applied.entries, changes + applied.changes
            result = merge(entries, batch, when, session_id, self.policy, seen)
            return result.entries, MergeResult(result.entries, changes + result.changes)

        result = await self.store.update(scope, change, when)
        await self._clear_activations(scope, activations)
        if not result.skipped:
            await self._record(scope, result.changes, source, when)
            if session_id is not None and self._audit is not None:
                await self._audit.mark_session(scope, session_id, when, result.stats)
            await self._long_term_written(scope)
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
        if self._staging is not None:
            result = await self._staging.capture(scope, cand, source, self.now())
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

    EditFn = Callable[[MemoryEntry, datetime], tuple[MemoryEntry | None, ChangeKind, str]]

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
        await self._long_term_written(scope)
        return entry

    async def _record(
        self, scope: ScopeKey, changes: list[Change], source: str, when: datetime
    ) -> None:
        if self._audit is None:
            return
        try:
            await self._audit.record(scope, changes, source, when)
        except aiosqlite.Error as exc:
            log.warning("audit log write failed (%s); the memory file was written", exc)

    # --- prompt ----------------------------------------------------------------------
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

    # --- daily notes -----------------------------------------------------------------
    async def append_daily(
        self, scope: ScopeKey, text: str, *, now: datetime | None = None
    ) -> tuple[str, int]:
        """Append a note to the scope's file for today; returns (path, first line).

        With an index, one round trip: on the database thread, take the file lock without
        waiting, append and tokenize the note, then index it in one transaction while a
        worker thread fsyncs the file; the call returns once both are done.
        If another process holds the file lock, the slow path waits for it in a worker
        thread instead. The file is always written first: if the index write fails, the
        note stays in the file and the next sync indexes it.
        """
        if not text.strip():
            raise ChatmemError("a note needs some text")
        when = (now or self.now()).astimezone(self.tz)
        path = self.workspace.daily_path(scope, when.date())
        relative = self.workspace.relative(path)
        name = self.workspace.lock_name(scope, "daily")
        index = self.index
        if index is not None:
            written: list[tuple[daily.AppendedNote, Future[None]]] = []
            async with self.locks.hold_local(name) as lock_path:

                def append() -> Appended | None:
                    held = try_lock_file(lock_path)
                    if held is None:
                        return None
                    try:
                        note, tokens = _append_daily_blocking(
                            self.workspace, scope, path, text, when, indexed=True, durable=False
                        )
                    finally:
                        unlock_file(held)
                    # The fsync runs while the index write does; both end before we return.
                    written.append((note, daily.fsync_soon(path)))
                    chunk = Chunk(note.line_from, note.line_to, note.text, when)
                    return Appended([(chunk, tokens or "")], note.after, note.before)

                try:
                    await index.add_appended(scope, relative, ChunkKind.DAILY, append)
                except sqlite3.DatabaseError as exc:
                    if not written:
                        raise
                    self._index_failed(exc)
                finally:
                    if written:
                        await asyncio.shield(asyncio.wrap_future(written[0][1]))
                if written:
                    return relative, written[0][0].line_from
        return await self._append_daily_waiting(scope, path, relative, text, when)

    async def _append_daily_waiting(
        self, scope: ScopeKey, path: Path, relative: str, text: str, when: datetime
    ) -> tuple[str, int]:
        """`append_daily` when the file lock must be waited for (or there is no index):
        the append in a worker thread under the lock, then the index write beside the
        fsync."""
        async with self.locks.hold_running(
            self.workspace.lock_name(scope, "daily"),
            partial(
                _append_daily_blocking,
                self.workspace,
                scope,
                path,
                text,
                when,
                indexed=self.index is not None,
                durable=False,
            ),
        ) as (note, tokens):
            syncing = asyncio.ensure_future(asyncio.to_thread(daily.fsync_path, path))
            try:
                index = self.index
                if index is not None and tokens is not None:
                    chunk = Chunk(note.line_from, note.line_to, note.text, when)
                    try:
                        await index.add_prepared(
                            scope,
                            relative,
                            ChunkKind.DAILY,
                            [(chunk, tokens)],
                            stamp=note.after,
                            previous=note.before,
                        )
                    except sqlite3.DatabaseError as exc:
                        self._index_failed(exc)
            finally:
                await asyncio.shield(syncing)
        return relative, note.line_from

    async def recent_daily(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """Today's and yesterday's notes under the configured character cap."""
        notes = await asyncio.to_thread(
            daily.read_recent_blocking,
            self.workspace.memory_dir(scope),
            self.today(now),
            self.config.prompt.daily_max_chars,
        )
        return daily.render_recent(notes)

    # --- conversation --------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        """Chat engine, archive and schedules; needs the database."""
        if self._runtime is None:
            if self._db is None:
                raise IndexUnavailable(self.degraded_reason or "the database is not open")
            from memory_core.runtime import Runtime

            self._runtime = Runtime(self, HistoryStore(self._db, self.config.history), self.llm)
        return self._runtime

    async def chat(self, scope: ScopeKey, text: str, *, speaker: str = "") -> TurnResult:
        """One turn in the scope's open session (a session opens on first use)."""
        return await self.runtime.turn(scope, text, speaker=speaker)

    async def new_session(self, scope: ScopeKey, *, chinese: bool = False) -> NewSessionResult:
        """`/new`: close the session, extract and merge its memories, open the next one."""
        return await self.runtime.new_session(scope, chinese=chinese)

    # --- search and recall -----------------------------------------------------------
    async def search(
        self,
        scope: ScopeKey,
        query: str | Sequence[str],
        *,
        limit: int = 10,
        kinds: Iterable[ChunkKind] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_score: float = 0.0,
        rank_budget: int = RANK_BUDGET,
    ) -> list[Hit]:
        """BM25 hits of the scope; from the files directly when the index is unusable.

        Explicit searches (a person, the memory_search tool) show every match; automatic
        recall passes `recall.min_score` so weak matches stay out of the prompt.
        """
        floor = min_score
        kind_list = list(kinds) if kinds is not None else None
        await self.flush(scope)
        if self.index is not None:
            try:
                await self.index.sync_if_stale(scope)
                return await self.index.search(
                    scope,
                    query,
                    limit=limit,
                    kinds=kind_list,
                    since=since,
                    until=until,
                    min_score=floor,
                    rank_budget=rank_budget,
                )
            except sqlite3.DatabaseError as exc:
                self._index_failed(exc)
        log.info("degraded search in scope %s (no usable index)", scope)
        dated = since is not None or until is not None
        hits = await asyncio.to_thread(
            search_files,
            self.workspace,
            scope,
            query,
            # The time window is applied here, so it must see every hit, not the top few.
            limit=sys.maxsize if dated else limit,
            kinds=kind_list,
            min_score=floor,
            zone=self.tz,
        )
        return [h for h in hits if _within(h, since, until)][: max(limit, 0)]

    async def recall(
        self,
        scope: ScopeKey,
        pending: str,
        recent: Sequence[str] = (),
        *,
        now: datetime | None = None,
    ) -> Injection:
        """The memory block for a prompt: keywords, search, tiers, budget."""
        settings = self.config.recall
        keywords = extract_keywords(pending, recent, limit=settings.keywords)
        if not keywords:
            return Injection(keywords=[])
        kinds = [k for k in ChunkKind if k is not ChunkKind.MESSAGE]
        hits = await self.search(
            scope,
            keywords,
            limit=settings.max_hits * 4,
            kinds=kinds,
            min_score=settings.min_score,
            rank_budget=settings.rank_budget,
        )
        if has_recall_intent(pending):
            hits += await self._recalled_messages(scope, pending, keywords, now)
        return build_injection(
            keywords,
            hits,
            today=self.today(now),
            max_hits=settings.max_hits,
            token_budget=settings.token_budget,
            hit_chars=settings.hit_chars,
            recent_days=settings.recent_days,
        )

    async def _recalled_messages(
        self, scope: ScopeKey, pending: str, keywords: Sequence[str], now: datetime | None
    ) -> list[Hit]:
        """'What did we decide yesterday?': session messages of the day(s) the question
        names (any day when it names none), each with the messages around it, because the
        answer usually sits in the reply next to the matching line."""
        window = recall_window(pending, self.today(now))
        since, until = day_bounds(*window, self.tz) if window else (None, None)
        hits = await self.search(
            scope,
            keywords,
            limit=self.config.recall.max_hits,
            kinds=[ChunkKind.MESSAGE],
            since=since,
            until=until,
            min_score=self.config.recall.min_score,
            rank_budget=self.config.recall.rank_budget,
        )
        if self.index is None:
            return hits
        widened: list[Hit] = []
        for hit in hits:
            session_id = hit.path.removeprefix("sessions/")
            around = await self.index.message_context(scope, session_id, hit.line_from)
            text = " / ".join(_clip(t, MESSAGE_CONTEXT_CHARS) for _, t in around) or hit.text
            widened.append(replace(hit, text=text))
        return widened

    async def note_used(self, scope: ScopeKey, entry_ids: Iterable[str], session_id: str) -> None:
        """Long-term entries that went into a reply: reinforced at the next merge, once per
        session, so a turn never rewrites MEMORY.md."""
        ids = list(dict.fromkeys(entry_ids))
        if not ids or self._db is None:
            return
        await self._db.run(self.note_used_in(scope, ids, session_id))

    def note_used_in(
        self, scope: ScopeKey, entry_ids: Iterable[str], session_id: str
    ) -> Callable[[sqlite3.Connection], None]:
        """`note_used` as a step of the caller's write transaction on the database thread
        (`Database.run`): a chat turn records the entries its reply used in the
        same commit as the reply."""
        ids = list(dict.fromkeys(entry_ids))
        when = format_when(self.now())

        def write(conn: sqlite3.Connection) -> None:
            if ids:
                conn.executemany(
                    "INSERT OR IGNORE INTO activations (scope, entry_id, session_id, at)"
                    " VALUES (?, ?, ?, ?)",
                    [(scope.value, entry_id, session_id, when) for entry_id in ids],
                )

        return write

    async def _pending_activations(self, scope: ScopeKey) -> list[tuple[str, str]]:
        if self._db is None:
            return []
        async with self._db.conn.execute(
            "SELECT entry_id, session_id FROM activations WHERE scope = ? ORDER BY at",
            (scope.value,),
        ) as cur:
            return [(r[0], r[1]) for r in await cur.fetchall()]

    async def _clear_activations(self, scope: ScopeKey, pairs: list[tuple[str, str]]) -> None:
        if self._db is None or not pairs:
            return
        async with self._db.transaction() as conn:
            await conn.executemany(
                "DELETE FROM activations WHERE scope = ? AND entry_id = ? AND session_id = ?",
                [(scope.value, e, s) for e, s in pairs],
            )

    async def read_memory(
        self, scope: ScopeKey, path: str, start: int | None = None, lines: int | None = None
    ) -> MemoryRead:
        """memory_get: lines of one of the scope's files (or a stored message)."""
        await self.flush(scope)
        return await read_memory_path(self, scope, path, start, lines)

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> SyncStats:
        """Rebuild the index from files; a database SQLite cannot read is moved aside."""
        if self.index is None:
            await self.close()
            await asyncio.to_thread(_move_aside, self.workspace.db_path)
            self.degraded_reason = None
            await self.start()
        if self.index is None:
            raise IndexUnavailable(self.degraded_reason or "the index cannot be opened")
        return await self.index.rebuild(progress)

    # --- reports ---------------------------------------------------------------------
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
            path=self.workspace.relative(self.store.path(scope)),
        )

    async def validate(self) -> list[ValidationProblem]:
        """Every quarantined block in every scope's long-term file."""
        await self.flush()
        problems: list[ValidationProblem] = []
        for scope in await self.scopes():
            parsed = await self.store.load(scope)
            rel = self.workspace.relative(self.store.path(scope))
            problems.extend(ValidationProblem(scope, rel, block) for block in parsed.quarantined)
        return problems


def _activation_batches(
    entries: Sequence[MemoryEntry], activations: Sequence[tuple[str, str]]
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


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _within(hit: Hit, since: datetime | None, until: datetime | None) -> bool:
    if hit.created_at is None:
        return since is None and until is None
    return (since is None or hit.created_at >= since) and (until is None or hit.created_at < until)


def _append_daily_blocking(
    workspace: Workspace,
    scope: ScopeKey,
    path: Path,
    text: str,
    when: datetime,
    *,
    indexed: bool,
    durable: bool,
) -> tuple[daily.AppendedNote, str | None]:
    """`append_daily`'s blocking work in one call: the scope's directory, the append, and
    the note's terms when an index will take them."""
    workspace.ensure_scope(scope)
    note = daily.append_note_blocking(path, text, when, durable=durable)
    return note, " ".join(tokenize(note.text)) if indexed else None


def _move_aside(path: Path) -> None:
    if path.exists():
        stamp = int(time.time())
        for suffix in ("", "-wal", "-shm"):
            part = path.with_name(path.name + suffix)
            if part.exists():
                part.rename(part.with_name(f"{part.name}.corrupt-{stamp}"))


def _count_daily(directory: Path) -> int:
    if not directory.is_dir():
        return 0
    return sum(1 for p in directory.glob("????-??-??.md"))
