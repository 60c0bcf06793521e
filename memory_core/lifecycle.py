"""A core's open and close, and its parts: the half of `MemoryCore` that holds the
workspace's services (memory_core/engine.py has the work across them).

A core holds, for its whole life, the parts `services.core_parts` builds (the
workspace's paths, its locks, the storage backend, the model client); `start` opens the
workspace's services over them (`services.open_services`, which builds every other part)
and `close` closes them. The properties hand out the services themselves, so a front end
calls them directly.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zoneinfo
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypeVar

from memory_core import health
from memory_core.base.clock import Clock, Monotonic, ensure_aware, system_clock
from memory_core.base.errors import ChatmemError, IndexUnavailable, WorkspaceMissing
from memory_core.base.meter import NO_METER, Meter
from memory_core.base.policy import ScoringPolicy
from memory_core.base.process_knobs import gc_paused, quick_switches
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.sql import Db
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.conversation import tools
from memory_core.llm.client import LLMClient
from memory_core.longterm.long_term import LongTermMemory
from memory_core.notes.daily_notes import DailyNotes
from memory_core.notes.event_log import EventLog
from memory_core.recall.finder import Finder
from memory_core.recall.guard import IndexGuard
from memory_core.services import Progress, Services, core_parts, open_services
from memory_core.snapshot.snapshots import Snapshots
from memory_core.storage.audit import AuditLog
from memory_core.storage.history import HistoryStore

if TYPE_CHECKING:
    from memory_core.consolidation.consolidator import Consolidator
    from memory_core.conversation.runtime import Runtime

log = logging.getLogger(__name__)

T = TypeVar("T")


class Lifecycle:
    """The open and close of a core and its parts (`MemoryCore` is the one subclass).

    Attributes: `config`, `workspace` (paths only), `policy`, `tz`, `llm`, `meter`. The
    parts (`memories`, `notes`, `finder`, `snapshots`, `event_log`, `guard`,
    `consolidation`, and with a database `audit`, `history`, `conversation`, `database`)
    are the services themselves, built in services.py."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock = system_clock,
        llm: LLMClient | None = None,
        monotonic: Monotonic = time.monotonic,
        serving: bool = True,
        meter: Meter | None = None,
    ) -> None:
        """`clock` is the wall time stored and scored; `monotonic` times what only waits
        (caches, backoffs, the cool-downs of a failed index or an unreachable server).
        `serving=False` is a process that runs one command and exits: it skips what only
        pays off over a serving process's life (services.py). `meter` is told of the
        work done (base/meter.py; a serving process's metrics), the model's calls too."""
        self.config = config
        parts = core_parts(config, llm, monotonic, meter)
        self.workspace: Workspace = parts.workspace
        self.policy: ScoringPolicy = config.scoring.policy()
        self.tz = zoneinfo.ZoneInfo(config.timezone)
        self.meter = meter or NO_METER
        self.llm: LLMClient = parts.llm
        self._clock = clock
        self._monotonic = monotonic
        self._serving = serving
        self._sync_files = True
        self._locks = parts.locks
        self._backend = parts.backend
        self._stack: AsyncExitStack | None = None
        self._services: Services | None = None

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
        progress: Progress | None = None,
        monotonic: Monotonic = time.monotonic,
        serving: bool = True,
        sync_files: bool = True,
        meter: Meter | None = None,
    ) -> AsyncIterator[Self]:
        """With `create=False` a workspace that does not exist (`workspace_exists`) is a
        `WorkspaceMissing` error instead of a new, empty one: what a person's command wants
        (a mistyped path), where a bot or a test wants its workspace made. `serving=False`:
        a command's core (see `__init__`). `sync_files=False`: the open leaves the index as
        it is, for a caller that rebuilds it next (`reindex`), which would otherwise read,
        chunk and write every file changed by hand twice."""
        root = config.workspace_path
        if not await asyncio.to_thread(cls.workspace_exists, root):
            if not create:
                raise WorkspaceMissing(f"no workspace at {root} (run chatmem init)")
            log.info("creating workspace at %s", root)
        core = cls(config, clock=clock, llm=llm, monotonic=monotonic, serving=serving, meter=meter)
        core._sync_files = sync_files
        try:
            await core.start(progress)
            yield core
        finally:
            await core.close()

    async def start(self, progress: Progress | None = None) -> None:
        """Open the workspace's services (what `open` does on entry), for an owner that
        opens and closes on events of its own (the TUI's mount and unmount); `close`
        closes them. A workspace whose own state (`.chatmem/`) leads outside it is
        refused here, before any database or lock file is opened."""
        await asyncio.to_thread(self.workspace.check_state)
        stack = AsyncExitStack()
        self._services = await stack.enter_async_context(
            open_services(
                self.config,
                self.workspace,
                self._locks,
                self._backend,
                self.llm,
                self.now,
                monotonic=self._monotonic,
                progress=progress,
                serving=self._serving,
                sync_files=self._sync_files,
                meter=self.meter,
            )
        )
        self._stack = stack

    async def _close_services(self) -> None:
        stack, self._stack, self._services = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def close(self) -> None:
        # No cyclic collection while closing: the last write of a large file leaves a
        # version's worth of new objects, and a full pass over the heap then (a tenth of
        # a second at 100 000 entries, none of it garbage) would only delay the close.
        # Quick thread switches: its short steps wait less behind busy worker threads.
        with gc_paused(), quick_switches():
            await self._close_services()
            await self.llm.close()

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

    @property
    def degraded_reason(self) -> str | None:
        """Why search reads files instead of the index (None while the index works)."""
        return self._open.memory.guard.reason

    async def readiness(self) -> health.Readiness:
        """Whether this process can serve: database, journal replay, index (`/readyz`)."""
        return await health.readiness(self._open, self.degraded_reason)

    async def backlogs(self) -> health.Backlogs:
        """Journal depth and texts without vectors, workspace totals (`/metrics`)."""
        return await health.backlogs(self._open)

    @property
    def has_database(self) -> bool:
        """Whether the workspace database (audit log, history, index) is open."""
        return self._open.db is not None

    # --- the parts ------------------------------------------------------------------
    @property
    def _open(self) -> Services:
        if self._services is None:
            raise ChatmemError("the workspace is closed")
        return self._services

    @property
    def memories(self) -> LongTermMemory:
        """Long-term memory: captures, entries, edits, forget and restore, consolidation,
        status and validation."""
        return self._open.memory.long_term

    @property
    def notes(self) -> DailyNotes:
        """Daily notes: append, the recent ones, what day it is in the workspace's zone."""
        return self._open.memory.notes

    @property
    def finder(self) -> Finder:
        """Search, recall and memory_get over a scope's memories, notes and messages."""
        return self._open.memory.finder

    @property
    def snapshots(self) -> Snapshots:
        """Each scope's Layer 1 snapshot and the memory block of its every prompt."""
        return self._open.memory.snapshots

    @property
    def event_log(self) -> EventLog:
        """Each scope's raw events by day."""
        return self._open.memory.events

    @property
    def guard(self) -> IndexGuard:
        """The search index while it is usable, and why it is not."""
        return self._open.memory.guard

    @property
    def consolidation(self) -> Consolidator:
        """The consolidation phases (decay, filter, extract, verify, summarize,
        snapshot), resumable and idempotent; built at its first use (services.LateParts)."""
        return self._open.late.consolidation()

    @property
    def audit(self) -> AuditLog:
        """Audited changes, forgotten entries and scope events (needs the database)."""
        return self._needs_database(self._open.audit)

    @property
    def history(self) -> HistoryStore:
        """Sessions and messages with their archive states (needs the database)."""
        return self._needs_database(self._open.history)

    @property
    def conversation(self) -> Runtime:
        """Turns, /new, the archive and the schedules of a running bot (needs the
        database); built at its first use (services.LateParts)."""
        return self._needs_database(self._open.late.conversation())

    @property
    def database(self) -> Db:
        """The workspace database itself, for what reads its tables directly (benches,
        tests, a doctor command); needs the database."""
        return self._needs_database(self._open.db)

    def tool_context(self, scope: ScopeKey, session_id: str | None = None) -> tools.ToolContext:
        """What a memory tool call runs in (`tools.dispatch`), for a front end that serves
        the tools itself."""
        return tools.ToolContext(self._open.memory, scope, session_id)

    def _needs_database(self, part: T | None) -> T:
        if part is None:
            raise IndexUnavailable(self.degraded_reason or "the database is not open")
        return part
