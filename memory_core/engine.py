"""`MemoryCore`: the async facade every front end (bots, TUI, CLI) uses.

It opens the workspace, wires the layers below it, closes them, and delegates; it owns no
SQL and hands no store, index or database to anyone. Every method takes an explicit
`ScopeKey`: nothing here derives a scope from anything.

    front ends ──▶ MemoryCore ──▶ conversation/ (Runtime: chat, tools, archive, schedules)
                          │              │
                          └──────▶ memory/ (MemoryService: long-term, notes, finder)
                                         │
                     table owners (history, audit, activations, schedules, index) ─▶ db
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
import uuid
import zoneinfo
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any

from memory_core import moving
from memory_core.activations import Activations
from memory_core.audit import AuditLog
from memory_core.backends import backend_for
from memory_core.chunking import ChunkKind
from memory_core.clock import Clock, Monotonic, ensure_aware, system_clock
from memory_core.config import Config
from memory_core.consolidation import PHASES, Phase, PhaseReport
from memory_core.conversation import tools
from memory_core.conversation.archiver import ArchiveReport
from memory_core.conversation.chat import NewSessionResult, TurnResult
from memory_core.conversation.consolidator import Consolidator
from memory_core.conversation.runtime import Runtime
from memory_core.deliveries import Deliveries
from memory_core.embedding.factory import build_embedder
from memory_core.entities import Entity
from memory_core.entries import Importance, MemoryClass, MemoryEntry
from memory_core.errors import (
    ChatmemError,
    DatabaseUnreachable,
    IndexUnavailable,
    ToolRefused,
    WorkspaceMissing,
    refusal,
)
from memory_core.event_log import DayLog
from memory_core.history import ArchiveState, HistoryStore
from memory_core.index import RANK_BUDGET, SearchIndex, SyncStats
from memory_core.index.model import VectorSearch
from memory_core.index.vectors import clear_cache as clear_vector_cache
from memory_core.inputs import storable
from memory_core.journal import CaptureJournal, Owners
from memory_core.llm import LLMClient
from memory_core.locks import LockRegistry
from memory_core.memory import (
    IndexGuard,
    ScopeStatus,
    ValidationProblem,
    build_memory_service,
)
from memory_core.memory.finder import rank_settings
from memory_core.memory.long_term import HOT_PATH_MAX_AGE
from memory_core.memory_md import ParsedMemory
from memory_core.merge import Candidate, MergeResult
from memory_core.reading import MemoryRead
from memory_core.recall import Injection
from memory_core.records import (
    ArchiveRun,
    AuditRecord,
    FailedArchive,
    Hit,
    RecordedMessage,
    ScopeEvent,
    SessionArchive,
)
from memory_core.requests import evidence
from memory_core.schedules import ScheduleState
from memory_core.scope import MAIN, ScopeKey
from memory_core.scoring import ScoringPolicy
from memory_core.snapshot import Snapshot
from memory_core.sql import Db
from memory_core.staging import Staging
from memory_core.store import read_head
from memory_core.text import ensure_loaded
from memory_core.workspace import Workspace

__all__ = ["MemoryCore", "ScopeStatus", "ValidationProblem"]


log = logging.getLogger(__name__)


class MemoryCore:
    """Open with `async with MemoryCore.open(config) as core:`.

    Public attributes: `config`, `workspace` (paths only), `policy`, `tz`, `llm`,
    `degraded_reason`. Everything else is reached through the methods below.
    """

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock = system_clock,
        llm: LLMClient | None = None,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        """`clock` is the wall time stored and scored; `monotonic` times what only waits
        (caches, backoffs, the cool-downs of a failed index or an unreachable server)."""
        self.config = config
        self.workspace = Workspace.at(config.workspace_path)
        self.policy: ScoringPolicy = config.scoring.policy()
        self.tz = zoneinfo.ZoneInfo(config.timezone)
        self.llm = llm or LLMClient(config.llm)
        self._clock = clock
        self._monotonic = monotonic
        self._locks = LockRegistry(self.workspace.locks_dir)
        self._backend = backend_for(config, self.workspace, self._locks, monotonic)
        self._guard = IndexGuard(monotonic=monotonic)
        self._db: Db | None = None
        self._audit: AuditLog | None = None
        self._history: HistoryStore | None = None
        self._runtime: Runtime | None = None
        self._journal: CaptureJournal | None = None
        self._deliveries: Deliveries | None = None
        self._presence: tuple[Owners, object] | None = None
        self.memory = build_memory_service(
            config, self.workspace, self._locks, self.now, self._guard, monotonic=monotonic
        )

    # --- lifecycle ------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        config: Config,
        *,
        clock: Clock = system_clock,
        llm: LLMClient | None = None,
        create: bool = True,
        progress: Callable[[int, int], None] | None = None,
        monotonic: Monotonic = time.monotonic,
    ) -> AsyncIterator[MemoryCore]:
        """With `create=False` a workspace that does not exist (`workspace_exists`) is a
        `WorkspaceMissing` error instead of a new, empty one: what a person's command wants
        (a mistyped path), where a bot or a test wants its workspace made."""
        root = config.workspace_path
        if not await asyncio.to_thread(cls.workspace_exists, root):
            if not create:
                raise WorkspaceMissing(f"no workspace at {root} (run chatmem init)")
            log.info("creating workspace at %s", root)
        core = cls(config, clock=clock, llm=llm, monotonic=monotonic)
        try:
            await core.start(progress)
        except BaseException:
            # A half-started core still owns a database thread; leaving it open would keep
            # the process from exiting.
            await core.close()
            raise
        try:
            yield core
        finally:
            await core.close()

    async def start(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Open the database (and journal), index what the files hold that the index does
        not (`progress(files done, files)`), start the vectors' backfill."""
        await asyncio.to_thread(self.workspace.ensure_scope, MAIN)
        long_term = self.memory.long_term
        try:
            self._db = await self._backend.open()
        except (IndexUnavailable, DatabaseUnreachable) as exc:
            self._guard.reason = str(exc)
            log.warning("database unavailable, running without audit log and index: %s", exc)
        else:
            recall = self.config.recall
            self._audit = long_term.audit = self._backend.audit_log(self._db)
            long_term.activations = Activations(self._db)
            self._deliveries = await self._open_deliveries(self._db)
            self._guard.index = SearchIndex(
                self._db,
                self.workspace,
                recall.sync_min_interval_seconds,
                self.tz,
                k1=recall.k1,
                b=recall.b,
                rank_settings=rank_settings(recall),
                monotonic=self._monotonic,
            )
            self._guard.index.vectors = await self._vector_index(self._db)
            self._guard.reason = None
        if self.config.long_term.journal:
            await self._open_staging()
        db = self._db
        if db is None or self._guard.index is None:
            return
        await ensure_loaded()
        await self._guard.sync_all(progress)
        if self._guard.index is not None:  # the sync may have found it unusable
            self._guard.index.embed_all()
        # Built now, not on first use: a history that did not exist yet made a
        # consolidation run beside a bot see no open session and take that session's
        # inputs from under its /new.
        self._history = history = self._backend.history(db, self.config.history, self._guard.index)
        await self._backend.recover(history, self._audit)

    async def _open_deliveries(self, db: Db) -> Deliveries:
        """Delivery claims under this process's owner id, held as a lock for the
        process's life: a message it takes and dies before answering is taken over."""
        owner = uuid.uuid4().hex
        owners = self._backend.owners()  # the database is open: so are its locks
        try:
            self._presence = (owners, await asyncio.to_thread(owners.take, owner))
        except (DatabaseUnreachable, IndexUnavailable, OSError) as exc:
            log.warning("deliveries this process takes cannot be taken over: %s", exc)
            owner = ""  # nobody can tell whether it lives: its claims are never taken over

        async def is_gone(other: str) -> bool:
            try:
                return await asyncio.to_thread(owners.is_gone, other)
            except (DatabaseUnreachable, OSError):
                return False

        return Deliveries(db, owner, is_gone)

    async def _vector_index(self, db: Db) -> VectorSearch | None:
        """Dense recall when an embedder is configured or installed (`[embedding]`); the
        vector index (and numpy) is only imported then. On PostgreSQL with pgvector the
        vectors are searched in the database; without it, in the process (said once at
        start)."""
        embedder = build_embedder(self.config.embedding)
        if embedder is None:
            return None
        return await self._backend.vector_index(db, embedder, self.config.embedding.batch_size)

    async def vectors_ready(self) -> None:
        """Wait until every chunk written so far has its vector (benches, tests, reindex);
        a bot never waits for this."""
        index = self._guard.index
        if index is not None and index.vectors is not None:
            index.embed_all()
            await index.vectors.drain()

    async def _open_staging(self) -> None:
        """Journalled captures; without a journal every capture writes MEMORY.md itself."""
        try:
            journal = await self._backend.journal(self._db)
        except (IndexUnavailable, DatabaseUnreachable, OSError) as exc:
            log.warning("capture journal unavailable, captures write MEMORY.md directly: %s", exc)
            return
        long_term = self.memory.long_term
        self._journal = journal
        staging = Staging(
            long_term.store,
            journal,
            self.policy,
            self.config.long_term.write_delay_seconds,
            self.now,
            long_term.staged_written,
            view_max_age=HOT_PATH_MAX_AGE,
            monotonic=self._monotonic,
        )
        long_term.use_staging(staging)
        await staging.recover()

    async def close(self) -> None:
        if self._runtime is not None:
            await self._runtime.stop()
            self._runtime = None
        await self.llm.close()
        long_term = self.memory.long_term
        if long_term.staging is not None:
            staging = long_term.staging
            long_term.use_staging(None)
            await staging.close()
        await self._backend.release(self._history, self._audit)
        if self._journal is not None:
            await self._journal.close()
            self._journal = None
        index = self._guard.index
        if index is not None and index.vectors is not None:
            await index.vectors.close()
            index.vectors = None
        if self._presence is not None:
            owners, held = self._presence
            self._presence = None
            with contextlib.suppress(DatabaseUnreachable, OSError):
                await asyncio.to_thread(owners.give_back, held)
        await self._backend.close()
        if self._db is not None:
            await self._db.close()
            self._db = None
            self._audit = long_term.audit = None
            long_term.activations = None
            self._deliveries = None
            self._history = None
            self._guard.index = None

    @property
    def degraded_reason(self) -> str | None:
        """Why search reads files instead of the index (None while the index works)."""
        return self._guard.reason

    @property
    def has_database(self) -> bool:
        """Whether the workspace database (audit log, history, index) is open."""
        return self._db is not None

    @staticmethod
    def workspace_exists(root: Path) -> bool:
        """A workspace exists when its MEMORY.md or its `.chatmem` directory does (blocking:
        a stat or two). Either is enough: a person may start one by writing MEMORY.md by
        hand, and one whose main scope is still empty has the database. Any other
        directory, even one full of files, is not a workspace."""
        workspace = Workspace.at(root)
        return workspace.long_term_path(MAIN).is_file() or workspace.state_dir.is_dir()

    def now(self) -> datetime:
        """Clock time at second precision: what files can store is what we compute with."""
        return ensure_aware(self._clock()).replace(microsecond=0)

    def today(self, when: datetime | None = None) -> date:
        return self.memory.today(when)

    def _require_audit(self) -> AuditLog:
        if self._audit is None:
            raise IndexUnavailable(self.degraded_reason or "the database is not open")
        return self._audit

    def _require_history(self) -> HistoryStore:
        if self._history is None:
            raise IndexUnavailable(self.degraded_reason or "the database is not open")
        return self._history

    # --- long-term memory -----------------------------------------------------------
    async def flush(self, scope: ScopeKey | None = None) -> None:
        """Write staged captures to MEMORY.md now (of one scope, or of all)."""
        await self.memory.long_term.flush(scope)

    async def load(self, scope: ScopeKey) -> ParsedMemory:
        return await self.memory.long_term.load(scope)

    async def entries(self, scope: ScopeKey) -> list[MemoryEntry]:
        return await self.memory.long_term.entries(scope)

    async def entries_head(
        self, scope: ScopeKey, max_bytes: int
    ) -> tuple[list[MemoryEntry], int | None] | None:
        """The first entries of a long-term file larger than `max_bytes` and the total
        the file announces (None for a smaller file: load it whole). The file is sorted
        by score, so these are the top of the rankings, read in milliseconds."""
        return await asyncio.to_thread(
            read_head, self.memory.long_term.path(scope), self.policy.archive_below, max_bytes
        )

    async def entities(self, scope: ScopeKey) -> list[Entity]:
        """People, pets, places and projects the scope's Active memories name, found by
        offline rules, with their aliases and the memories that mention them."""
        return await self.memory.long_term.entities(scope)

    async def get_entry(self, scope: ScopeKey, entry_id: str) -> MemoryEntry:
        return await self.memory.long_term.get_entry(scope, entry_id)

    async def init_scope(self, scope: ScopeKey) -> str:
        """Make sure the scope's long-term file exists; its path in the workspace."""
        path = await self.memory.long_term.touch(scope)
        return self.workspace.relative(path)

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
        return await self.memory.long_term.merge_candidates(
            scope, candidates, session_id=session_id, source=source, now=now
        )

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
        """Save one memory now; without a class it takes its category's. The result's
        `outcome` says what was kept: a new entry, an update of an alike one that differs
        in a number, date or negation (the old one contradicted, still readable), or a
        reinforcement of a repeat (whose text stays). `importance` and `memory_class` take
        the enum or its string; a bad one, or text with a lone surrogate, is one
        InputRefused."""
        return await self.memory.long_term.capture(
            scope,
            content,
            category=category,
            importance=importance,
            source=source,
            expires_at=expires_at,
            memory_class=memory_class,
        )

    async def consolidate(self, scope: ScopeKey, *, now: datetime | None = None) -> MergeResult:
        """Decay, expire, archive and forget as of `now` (no new memories)."""
        return await self.memory.long_term.consolidate(scope, now=now)

    async def consolidate_phases(
        self,
        scope: ScopeKey,
        phases: Sequence[Phase] = PHASES,
        *,
        now: datetime | None = None,
    ) -> list[PhaseReport]:
        """Seed 001's consolidation phases (decay, filter, extract, verify, summarize,
        snapshot) over the scope, resumable and idempotent; `phases` picks some, always in
        that order."""
        consolidator = Consolidator(
            self.memory, self._history, self._audit, self.llm, self.config, self._locks
        )
        return await consolidator.run(scope, phases, now=now)

    async def forget(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Delete an entry from the file; it stays restorable for
        `long_term.forgotten_keep_days` and the audit log keeps its text (see `purge`)."""
        return await self.memory.long_term.forget(scope, entry_id, source=source)

    async def set_pinned(
        self, scope: ScopeKey, entry_id: str, pinned: bool, *, source: str = "user"
    ) -> MemoryEntry:
        return await self.memory.long_term.set_pinned(scope, entry_id, pinned, source=source)

    async def archive(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        return await self.memory.long_term.archive(scope, entry_id, source=source)

    async def restore(self, scope: ScopeKey, entry_id: str, *, source: str = "user") -> MemoryEntry:
        """Back to Active from the archive or from the kept forgotten entries (a decayed
        entry is lifted to the low-importance start score)."""
        return await self.memory.long_term.restore(scope, entry_id, source=source)

    async def edit(
        self, scope: ScopeKey, entry_id: str, content: str, *, source: str = "user"
    ) -> MemoryEntry:
        return await self.memory.long_term.edit(scope, entry_id, content, source=source)

    async def prompt_memories(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """The prompt's memory block (Active, top by score, token-capped)."""
        return await self.memory.long_term.prompt_memories(scope, now=now)

    async def prompt_block(self, scope: ScopeKey) -> str:
        """What rides in the scope's every prompt: the snapshot when `snapshot.enabled`,
        else the top entries (`prompt_memories`)."""
        return await self.memory.prompt_block(scope)

    async def snapshot(
        self, scope: ScopeKey, *, write: bool = True, now: datetime | None = None
    ) -> Snapshot:
        """Build the scope's Layer 1 snapshot now (and write SNAPSHOT.md unless `write` is
        false); Identity, Owner and Constraints edited in the file are kept."""
        snapshots = self.memory.snapshots
        return await (snapshots.rebuild if write else snapshots.build)(scope, now=now)

    def snapshot_path(self, scope: ScopeKey) -> str:
        return self.workspace.relative(self.memory.snapshots.path(scope))

    async def preview_consolidate(
        self, scope: ScopeKey, *, now: datetime | None = None
    ) -> MergeResult:
        """What `consolidate` would do as of `now`, without writing anything."""
        return await self.memory.long_term.preview_consolidate(scope, now=now)

    async def restorable(self, scope: ScopeKey) -> list[MemoryEntry]:
        """Forgotten entries `restore` can still bring back, newest first (each one's
        `scored_at` is when it was forgotten, its score the score it had then)."""
        return await self.memory.long_term.restorable(scope)

    async def match_entry_id(self, scope: ScopeKey, text: str) -> str:
        """The id `text` names among the scope's entries and kept forgotten ones: the whole
        id or a unique prefix (an ambiguous one is an EntryNotFound listing candidates)."""
        return await self.memory.long_term.match_id(scope, text)

    async def purge(
        self, scope: ScopeKey, entry_ids: Sequence[str], *, source: str = "user"
    ) -> list[MemoryEntry]:
        """Erase forgotten entries for good, for a person who wants a text gone: from the
        forgotten file, the long-term file's backup, the audit log (rows kept, text
        emptied), the scope's event logs (the text blanked where it stands) and snapshot,
        and the database file. Only forgotten entries: a live one must be
        forgotten first. Needs the database, since the audit log holds the text too.

        The index is rebuilt: FTS5 keeps the words of a deleted chunk in its segments
        (and its delete markers) until they happen to be merged. Then the database file
        is vacuumed. So a purge costs what `reindex` costs.
        """
        audit = self._require_audit()
        long_term = self.memory.long_term
        entries = await long_term.forgotten_entries(scope, entry_ids)
        ids = [e.id for e in entries]
        if not ids:
            return entries
        # The log first: if the files fail after it, the entries are still there to purge
        # again; the other way round the text could stay in the log with no entry to name.
        await audit.purge(scope, ids, source, self.now())
        await long_term.erase_forgotten(scope, ids)
        # The event log and the snapshot can hold the text too (a message, a tool call).
        await self.memory.events.redact(scope, [e.content for e in entries])
        if await self.memory.snapshots.text(scope):
            await self.memory.snapshots.rebuild(scope)
        if self._guard.index is not None:
            await self._guard.index.rebuild()
        if self._db is not None:
            # A cached vector can hint at the text it came from; a rebuild re-embeds.
            await self._db.run(clear_vector_cache)
        if not await audit.vacuum():
            log.warning("purge: another process kept the database's WAL from being emptied")
        return entries

    # --- daily notes ----------------------------------------------------------------
    async def append_daily(
        self, scope: ScopeKey, text: str, *, now: datetime | None = None
    ) -> tuple[str, int]:
        """Append a note to the scope's file for today; returns (path, first line)."""
        return await self.memory.notes.append(scope, text, now=now)

    async def recent_daily(self, scope: ScopeKey, *, now: datetime | None = None) -> str:
        """Today's and yesterday's notes under the configured character cap."""
        return await self.memory.notes.recent(scope, now=now)

    # --- search and recall ----------------------------------------------------------
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
        """Hits of the scope, best first, ranked as recall ranks them (`Finder.search`:
        words, and vectors when an embedder is configured); from the files directly, by
        words, when the index is unusable."""
        return await self.memory.finder.search(
            scope,
            query,
            limit=limit,
            kinds=kinds,
            since=since,
            until=until,
            min_score=min_score,
            rank_budget=rank_budget,
        )

    async def recall(
        self,
        scope: ScopeKey,
        pending: str,
        recent: Sequence[str] = (),
        *,
        now: datetime | None = None,
        session_id: str | None = None,
    ) -> Injection:
        """The memory block for a prompt (the current session's messages, already in the
        prompt, left out)."""
        return await self.memory.finder.recall(
            scope, pending, recent, now=now, session_id=session_id
        )

    async def read_memory(
        self, scope: ScopeKey, path: str, start: int | None = None, lines: int | None = None
    ) -> MemoryRead:
        """memory_get: lines of one of the scope's files (or a stored message)."""
        return await self.memory.finder.read(scope, path, start, lines)

    async def memory_tool(
        self, scope: ScopeKey, name: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One call of a memory tool (memory_search, memory_get, memory_save) in `scope`,
        exactly as the chat model makes it, for a front end that serves the tools to other
        agents (MCP). A refused call, or one whose storage failed, raises `ToolRefused`
        with the line the model would read; anything else is a bug and is raised as is."""
        try:
            return await tools.run(tools.ToolContext(self.memory, scope), name, arguments)
        except Exception as exc:
            message = refusal(name, exc)
            if message is None:
                raise
            raise ToolRefused(message) from exc

    async def long_term_text(self, scope: ScopeKey) -> str:
        """The scope's long-term file as it stands once pending captures are written (''
        for a scope with none yet): what a person, or an agent, reads whole."""
        await self.memory.long_term.flush(scope)
        path = self.memory.long_term.path(scope)

        def read() -> str:
            try:
                return path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return ""

        return await asyncio.to_thread(read)

    async def event_log(self, scope: ScopeKey, day: date | None = None) -> DayLog:
        """The scope's raw events of `day` (today by default) in the order they happened:
        inputs, outputs, tool calls and results, decisions, errors."""
        return await self.memory.events.read(scope, day or self.today())

    async def event_log_days(self, scope: ScopeKey) -> list[date]:
        return await self.memory.events.days(scope)

    def long_term_path(self, scope: ScopeKey) -> str:
        """Where the scope's long-term file is (or will be), relative to the workspace."""
        return self.workspace.relative(self.memory.long_term.path(scope))

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> SyncStats:
        """Rebuild the index from files; a database SQLite cannot read is moved aside."""
        if self._guard.index is None and self._backend.files_of_workspace:
            await self.close()
            await self._backend.move_damaged_aside()
            await self.start()
        index = self._guard.index
        if index is None:
            raise IndexUnavailable(self.degraded_reason or "the index cannot be opened")
        return await index.rebuild(progress)

    # --- conversation ---------------------------------------------------------------
    @property
    def runtime(self) -> Runtime:
        """Chat engine, archive and schedules; needs the database."""
        if self._runtime is None:
            history = self._require_history()
            assert self._db is not None
            self._runtime = Runtime(
                self.memory,
                history,
                self.llm,
                self.config,
                self._require_audit(),
                self._locks,
                ScheduleState(self._db),
            )
        return self._runtime

    def start_schedules(self) -> None:
        """Run the scheduled jobs (archive, idle extraction, quiet consolidation) in the
        background until `close()`."""
        self.runtime.start()

    async def chat(self, scope: ScopeKey, text: str, *, speaker: str = "") -> TurnResult:
        """One turn in the scope's open session (a session opens on first use); a text
        or speaker UTF-8 cannot hold is one InputRefused, nothing stored."""
        storable(text, "the message")
        storable(speaker, "the speaker's name")
        return await self.runtime.turn(scope, text, speaker=speaker)

    async def new_session(self, scope: ScopeKey, *, chinese: bool = False) -> NewSessionResult:
        """`/new`: close the session, extract and merge its memories, open the next one."""
        return await self.runtime.new_session(scope, chinese=chinese)

    async def archive_history(self, scope: ScopeKey) -> ArchiveReport:
        """Run an archive pass over the scope's session history now."""
        return await self.runtime.archive(scope)

    async def record_session(
        self,
        scope: ScopeKey,
        session_id: str,
        started_at: datetime,
        messages: Sequence[RecordedMessage],
        *,
        status: str = "closed",
    ) -> None:
        """Store a conversation held elsewhere (an export, a migration, a demo) as a
        session of the scope: its messages keep their times and archive states, and the
        user and assistant lines are indexed for recall as a chat turn's would be (requests,
        commands and the replies to them are stored, not indexed: `requests.evidence`).
        Checked whole before the first write: a message UTF-8 cannot hold refuses them all."""
        for message in messages:
            storable(message.content, "a message")
            storable(message.speaker, "a speaker's name")
        history = self._require_history()
        await history.add_session(scope, session_id, started_at, status)
        talk = [m for m in messages if m.role in ("user", "assistant")]
        said = iter(evidence((m.role == "assistant", m.content) for m in talk))
        for message in messages:
            indexed = message.role in ("user", "assistant") and next(said)
            await history.add_message(
                scope,
                session_id,
                message.role,
                message.content,
                message.at,
                speaker=message.speaker,
                indexed=indexed and self.memory.indexed,
                archived=ArchiveState(message.archived),
            )

    async def remember(self, scope: ScopeKey, text: str) -> str:
        """`/remember TEXT`: keep `text` as a memory the person asked for; the reply to
        show. No message is stored: a command is not part of the conversation."""
        return await self.runtime.chat.remember(scope, storable(text, "the memory"))

    async def ask_forget(self, scope: ScopeKey, what: str) -> str:
        """`/forget WHAT`: the question listing every memory about `what` and its
        duplicates; the scope's next `chat` turn answers it ("yes", or the numbers)."""
        return await self.runtime.chat.ask_forget(scope, storable(what, "the text"))

    def interrupt(self, scope: ScopeKey) -> int:
        """Cancel the scope's turns, memory requests and `/new` under way (a person pressed
        Ctrl-C mid-answer); how many there were. Their callers get CancelledError."""
        return self._runtime.chat.interrupt(scope) if self._runtime is not None else 0

    # --- reports --------------------------------------------------------------------
    async def scopes(self) -> list[ScopeKey]:
        return await self.memory.long_term.scopes()

    async def known_scopes(self) -> list[ScopeKey]:
        """Every scope that holds something: the scopes with a directory (main first),
        then those that only have messages in the history."""
        scopes = await self.scopes()
        if self._db is None:
            return scopes
        known = {s.value for s in scopes}
        try:
            messages = await self.message_counts()
        except (DatabaseUnreachable, IndexUnavailable):
            return scopes  # the history's server is away: the scopes the files know
        return scopes + [ScopeKey(s) for s in sorted(messages) if s not in known]

    async def status(self, scope: ScopeKey, *, now: datetime | None = None) -> ScopeStatus:
        return await self.memory.long_term.status(scope, now=now)

    async def validate(self) -> list[ValidationProblem]:
        """Every quarantined block in every scope's long-term file."""
        return await self.memory.long_term.validate()

    async def activity(
        self, scope: ScopeKey | None = None, *, limit: int = 100, after_id: int = 0
    ) -> list[AuditRecord]:
        """Audited changes, newest first; `after_id` fetches only what is new."""
        return await self._require_audit().recent(scope, limit=limit, after_id=after_id)

    async def entry_history(self, scope: ScopeKey, entry_id: str) -> list[AuditRecord]:
        return await self._require_audit().history(scope, entry_id)

    async def forgotten(self, scope: ScopeKey, *, limit: int = 500) -> list[AuditRecord]:
        """Forgotten entries, newest first, with their last text."""
        return await self._require_audit().forgotten(scope, limit=limit)

    async def events(
        self, scope: ScopeKey | None = None, *, kind: str | None = None, limit: int = 100
    ) -> list[ScopeEvent]:
        """Scope events (archive backlog, history overflow), newest first."""
        return await self._require_audit().events(scope, kind, limit)

    async def move_storage(
        self, backend: str, dsn: str = "", progress: moving.Progress | None = None
    ) -> moving.MoveReport:
        """Copy what only the database holds (history, audit, activations, schedules,
        deliveries, the embedding cache, the capture journal) to the other backend and
        index the files there (`chatmem migrate`). Idempotent: run again after an
        interruption, it copies what is missing. The bots of the workspace should be
        stopped; the configuration is the caller's to switch afterwards."""
        current = self.config.storage
        if backend == current.backend and (backend == "sqlite" or dsn == current.postgres_dsn):
            raise ChatmemError(f"the workspace already uses {backend}")
        if self._db is None:
            raise IndexUnavailable(self.degraded_reason or "the database is not open")
        await self.flush()  # staged captures into MEMORY.md: the journal holds no own row
        storage = current.model_copy(update={"backend": backend, "postgres_dsn": dsn})
        target_config = self.config.model_copy(update={"storage": storage})
        target_backend = backend_for(target_config, self.workspace, self._locks, self._monotonic)
        await target_backend.prepare_move_target()

        def files(done: int, total: int) -> None:
            if progress is not None:
                progress("files indexed", done, total)

        report = moving.MoveReport()
        async with MemoryCore.open(
            target_config,
            clock=self._clock,
            llm=self.llm,
            progress=files,
            monotonic=self._monotonic,
        ) as target:
            if target._db is None:
                raise IndexUnavailable(target.degraded_reason or "cannot open the target")
            for table, key in moving.TABLES:
                await moving.copy_table(self._db, target._db, table, key, report, progress)
            source_journal = self._journal_db()
            target_journal = target._journal_db()
            if source_journal is not None and target_journal is not None:
                await moving.copy_captures(source_journal, target_journal, report)
            await moving.copy_message_chunks(self._db, target._db, report, progress)
        await target_backend.finish_move_target()
        return report

    def _journal_db(self) -> Db | None:
        journal = self._journal
        return journal.db if journal is not None else None

    async def claim_delivery(self, channel: str, chat_id: str, message_id: str) -> bool:
        """True for the first delivery of an inbound message to any process of the
        workspace: answer it. A platform's redelivery, to this process or another, is
        False. Without a working database every delivery is answered (a duplicate reply
        is better than a lost one)."""
        if self._deliveries is None:
            return True
        try:
            return await self._deliveries.claim(channel, chat_id, message_id, self.now())
        except sqlite3.DatabaseError as exc:
            log.warning("cannot check a delivery against other processes, answering: %s", exc)
            return True

    async def delivery_answered(self, channel: str, chat_id: str, message_id: str) -> None:
        """The reply to a claimed message is made: no other process takes it over."""
        if self._deliveries is None:
            return
        try:
            await self._deliveries.answered(channel, chat_id, message_id)
        except sqlite3.DatabaseError as exc:
            log.warning("a delivery not marked answered: %s", exc)

    async def audit_counts(self) -> dict[str, int]:
        """Audit rows per action over the workspace ({} without a database)."""
        return await self._audit.action_counts() if self._audit is not None else {}

    async def message_counts(self) -> dict[str, dict[str, int]]:
        """{scope: {'false': n, 'pending': n, 'true': n}}: messages by archive state."""
        return await self._require_history().counts_by_scope()

    async def archive_sessions(self, scope: ScopeKey, limit: int = 100) -> list[SessionArchive]:
        """The scope's sessions with their messages by archive state, newest first."""
        return await self._require_history().sessions_by_state(scope, limit)

    async def failed_archives(self, scope: ScopeKey) -> list[FailedArchive]:
        return await self._require_history().failed_archives(scope)

    async def last_archive_run(self, scope: ScopeKey) -> ArchiveRun | None:
        return await self._require_history().last_archive_run(scope)

    async def change_marks(self) -> tuple[int, int]:
        """(database data version, newest audit id): the first moves when another process
        commits, the second when anyone audits a change. (0, 0) without a database."""
        if self._db is None or self._audit is None:
            return 0, 0
        return await self._db.data_version(), await self._audit.last_id()
