"""Every part of a workspace, built here, in order, and closed in reverse.

This module is the one place that knows how the parts fit. `core_parts` builds what a
core holds for its whole life (the workspace's paths, its locks, the storage backend,
the model client); `open_services` opens the database through the backend object and
builds the audit log, history, journal, search index and vectors over it, the memory
service over those (`build_memory_service`), and the consolidation and the conversation
runtime over that. What `Services` holds is what the workspace has until it closes (a
part the database would give is None when the database could not be opened, and the
files still answer). An exit stack closes each part it opened, in reverse order,
however far the opening got. A part is what `Services` holds or what one part is handed
by another; what a part makes for itself and hands to no other part (the runtime's chat
engine and archiver, the finder's recall cache) is that part's own.

A process that serves (a bot, the TUI, the MCP server; the default) and one that runs a
single command and exits (the CLI's commands: `serving=False`) open the same parts. A
command skips only the work that pays off over a process's life: the vectors are not
backfilled, and what is listed below is built at its first use instead of at the open.

Built on first use, and why (the one list; a serving process builds or loads each of
them at its open, a command only when it needs it):

- the consolidation and the conversation runtime (`LateParts`, whose methods here build
  them): their modules (the phases, the chat engine, the archiver) cost ~12 ms of a
  command's start, and only `consolidate`, the bots and the archive commands use them;
- a command's vector index (`LazyVectors`, made in `_search_index` here;
  storage/vectors/lazy.py): numpy and the embedding model cost a command ~0.1 s and more
  before it could embed a thing, so they are loaded only for a search of a scope that
  has vectors;
- the tokenizer's dictionary (rjieba's, ~0.15 s): a process-wide table, not a part;
  `open_services` loads it for a serving process (`ensure_loaded`), and a command loads
  it where it first meets Han text (memory_core/base/text.py), so commands over other
  scripts never pay for it;
- the main scope's long-term file and the view captures match against
  (`LongTermMemory.warm`): a second of decoding at 100 000 entries, and more memory than
  a search uses. A serving process reads it ahead in the background once its first
  search is answered (neither the open nor that search waits; a bot's capture follows
  its reply, seconds later), a command when its capture or status first needs it; a
  search needs only the entities, read from their file beside the parse cache
  (longterm/entity_keeper.py);
- what a first search does once (numpy's import, the rules of reading a question, the
  main scope's entities: ~0.15 s at 100 000 entries): a serving open does it before it
  returns (`_search_ahead`), a command's search when it first runs.

Inside parts built here at the open, two heavy loads wait for the first call, in every
process: a local embedding model's weights (embedding/local.py: loaded in a worker
thread, so no open waits for them) and the openai package of the model clients
(llm/client.py, embedding/remote.py: most of a second to import, for a process that
may never call a model).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import zoneinfo
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from memory_core.base.clock import Monotonic, system_sleep
from memory_core.base.errors import DatabaseUnreachable, IndexUnavailable
from memory_core.base.locks import LockRegistry
from memory_core.base.meter import NO_METER, Meter
from memory_core.base.retry import Backoff
from memory_core.base.scope import MAIN
from memory_core.base.sql import Db
from memory_core.base.text import ensure_loaded
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.embedding.factory import build_embedder
from memory_core.llm.client import LLMClient
from memory_core.longterm.after_writes import AfterWrites
from memory_core.longterm.forgotten import ForgottenFile
from memory_core.longterm.forgotten_keeper import ForgottenKeeper
from memory_core.longterm.long_term import LongTermMemory
from memory_core.longterm.long_term_views import HOT_PATH_MAX_AGE
from memory_core.longterm.settled_store import SettledStore
from memory_core.longterm.staging import Staging
from memory_core.longterm.store import LongTermStore
from memory_core.memory_service import MemoryService
from memory_core.notes.daily_notes import DailyNotes
from memory_core.notes.event_log import EventLog
from memory_core.recall.finder import Finder
from memory_core.recall.guard import IndexGuard
from memory_core.recall.index import SearchIndex, topk
from memory_core.recall.index.files import prepare_chunk
from memory_core.recall.index.rank_settings import rank_settings
from memory_core.recall.query import warm_up as warm_up_questions
from memory_core.snapshot.snapshots import Snapshots
from memory_core.storage.activations import Activations
from memory_core.storage.audit import AuditLog
from memory_core.storage.backends import Backend, backend_for
from memory_core.storage.deliveries import Deliveries
from memory_core.storage.history import HistoryStore
from memory_core.storage.interfaces import ActivationBackend, AuditBackend, VectorSearch
from memory_core.storage.journal import CaptureJournal
from memory_core.storage.schedules import ScheduleState
from memory_core.storage.vectors.lazy import LazyVectors

if TYPE_CHECKING:
    from memory_core.consolidation.consolidator import Consolidator
    from memory_core.conversation.runtime import Runtime

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class CoreParts:
    """What a core holds for its whole life, across the opens and closes of its
    `Services` (a rebuild beside a damaged database closes and opens them again)."""

    workspace: Workspace
    """The workspace's paths (nothing is read or made by building it)."""
    locks: LockRegistry
    backend: Backend
    llm: LLMClient


def core_parts(
    config: Config, llm: LLMClient | None, monotonic: Monotonic, meter: Meter | None
) -> CoreParts:
    """The parts of a core over `config`: `llm` when the caller brings its own model
    client (told of `meter` too, when there is one), else one for `config.llm`."""
    workspace = Workspace.at(config.workspace_path)
    client = llm or LLMClient(config.llm)
    if meter is not None:
        client.meter = meter
    locks = LockRegistry(workspace.locks_dir)
    return CoreParts(workspace, locks, storage_backend(config, workspace, locks, monotonic), client)


def storage_backend(
    config: Config, workspace: Workspace, locks: LockRegistry, monotonic: Monotonic
) -> Backend:
    """The backend object of `config.storage` (a core's own, or the target of a move to
    the other backend): what opens the database and builds the parts that differ by
    backend."""
    return backend_for(config, workspace, locks, monotonic)


@dataclass(frozen=True, slots=True)
class Services:
    """The parts of one open workspace. `db`, `audit`, `history` and `deliveries` are None
    when the database could not be opened (`guard.reason` says why); `journal` is None
    without `long_term.journal` or when it could not be opened. The consolidation and
    the conversation runtime are `late`'s (built on first use)."""

    memory: MemoryService
    db: Db | None
    audit: AuditLog | None
    history: HistoryStore | None
    deliveries: Deliveries | None
    journal: CaptureJournal | None
    late: LateParts
    replayed: bool = True
    """Whether the captures of processes that died were replayed at the open (False: the
    server was away; they wait in the journal for the next start)."""
    vector_model: str = ""
    """The embedder whose vectors the index makes ('' without one)."""


class LateParts:
    """The consolidation and the conversation runtime, each built the first time it is
    asked for (a serving process asks at its open) from parts already built, and then
    the same one for the workspace's life; the runtime runs its quiet-period
    consolidation with this same consolidation, and is stopped at the close, before what
    it uses. Their modules (the phases, the chat engine, the archiver) are imported at
    that first use: a command that uses neither (`status`, `search`, `capture`, most of
    them) does not pay for them (see the module's list of what is built on first use)."""

    def __init__(
        self,
        memory: MemoryService,
        history: HistoryStore | None,
        audit: AuditLog | None,
        llm: LLMClient,
        config: Config,
        locks: LockRegistry,
        db: Db | None,
        stack: AsyncExitStack,
    ) -> None:
        self._memory = memory
        self._history = history
        self._audit = audit
        self._llm = llm
        self._config = config
        self._locks = locks
        self._db = db
        self._stack = stack
        self._consolidation: Consolidator | None = None
        self._conversation: Runtime | None = None

    def consolidation(self) -> Consolidator:
        if self._consolidation is None:
            # Imported here, at the part's first use (see the class).
            from memory_core.consolidation.consolidator import Consolidator

            self._consolidation = Consolidator(
                self._memory, self._history, self._audit, self._llm, self._config, self._locks
            )
        return self._consolidation

    def conversation(self) -> Runtime | None:
        """None without the database (no history to hold the turns)."""
        if self._conversation is None:
            if self._db is None or self._history is None or self._audit is None:
                return None
            # Imported here, at the part's first use (see the class).
            from memory_core.conversation.runtime import Runtime

            runtime = Runtime(
                self._memory,
                self._history,
                self._llm,
                self._config,
                self._audit,
                self._locks,
                ScheduleState(self._db),
                self.consolidation(),
            )
            self._stack.push_async_callback(runtime.stop)
            self._conversation = runtime
        return self._conversation


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
    """The memory service over a workspace; without a guard holding an index it searches
    files (`open_services` builds it; a test may build one over in-memory backends).

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
        searched=long_term.searched,
    )
    events = EventLog(workspace, notes.today)
    snapshots = Snapshots(config, workspace, long_term, events, now, zone)
    return MemoryService(long_term, notes, finder, guard, now, events, snapshots, meter)


@asynccontextmanager
async def open_services(
    config: Config,
    workspace: Workspace,
    locks: LockRegistry,
    backend: Backend,
    llm: LLMClient,
    now: Callable[[], datetime],
    *,
    monotonic: Monotonic = time.monotonic,
    progress: Progress | None = None,
    serving: bool = True,
    sync_files: bool = True,
    meter: Meter = NO_METER,
) -> AsyncIterator[Services]:
    """Open every part of the workspace (index what the files hold that the index does
    not, `progress(files done, files)`, unless `sync_files` is False: a rebuild follows;
    and, when `serving`, load the tokenizer's dictionary and start the vectors'
    backfill); close them all on exit, the last opened first."""
    async with AsyncExitStack() as stack:
        await asyncio.to_thread(workspace.ensure_scope, MAIN)
        stack.push_async_callback(backend.close)
        db, reason = await _open_database(backend)
        audit = index = deliveries = activations = None
        vector_model = ""
        if db is not None:
            stack.push_async_callback(db.close)
            audit = backend.audit_log(db)
            activations = Activations(db)
            deliveries = await _deliveries(backend, db, stack)
            index, vector_model = await _search_index(
                config, workspace, backend, db, monotonic, stack, serving, now
            )
        guard = IndexGuard(index, reason, monotonic=monotonic)
        journal = await _journal(config, backend, db, stack)
        memory = build_memory_service(
            config,
            workspace,
            locks,
            now,
            guard,
            monotonic=monotonic,
            audit=audit,
            activations=activations,
            journal=journal,
            meter=meter,
        )
        # Closed after the staging (last pushed, first run): its last write's parse and
        # entities are kept in the background (`cache_keeping`) until this returns.
        stack.push_async_callback(memory.long_term.store.files.kept)
        staging = memory.long_term.staging
        replayed = True
        if staging is not None:
            stack.push_async_callback(staging.close)
            replayed = await _recover(staging)
        # A serving core reads the main scope's memories ahead (on a large file, a second
        # from its parse cache: what a bot's first capture matches against) in the
        # background once its first search is answered, so neither the open nor that
        # search waits for it; a command reads what it needs at its first use instead.
        memory.long_term.read_ahead = serving
        stack.push_async_callback(memory.long_term.stop_warming)
        history: HistoryStore | None = None
        if audit is not None:
            # The history (when there is one) and the audit log may hold rows not yet
            # stored (PostgreSQL's spools): given back before the database closes.
            stack.push_async_callback(lambda: backend.release(history, audit))
        if db is not None and guard.index is not None:
            if serving:
                # Whatever runs on the loop later (a turn's query, ranking) never waits
                # for the dictionary; a command loads it only if it meets Han text.
                await ensure_loaded()
            if sync_files:
                # The main scope and the message days: the other scopes are synced as
                # they are first searched, so an open costs what one scope costs.
                await guard.sync_opened(progress)
            if serving and guard.index is not None:  # the sync may have found it unusable
                await guard.index.embed_every_scope()
            # Built before anyone runs: a history that did not exist yet made a
            # consolidation run beside a bot see no open session and take that session's
            # inputs from under its /new.
            history = backend.history(db, config.history, guard.index)
            await backend.recover(history, audit)
        late = LateParts(memory, history, audit, llm, config, locks, db, stack)
        if serving:
            late.conversation()
            late.consolidation()
            if guard.index is not None:
                # What the first search would do once per process, done (off the loop)
                # before the open returns: a bot's first answer costs what a later one
                # does, and the open ~0.15 s more.
                await _search_ahead(memory.long_term, config)
        yield Services(
            memory, db, audit, history, deliveries, journal, late, replayed, vector_model
        )


async def _search_ahead(long_term: LongTermMemory, config: Config) -> None:
    """A serving core's first search, made ready: the ranking's numpy imported, the rules
    of reading a question compiled, and the main scope's entities for query expansion
    read (from beside its parse cache)."""
    await asyncio.to_thread(topk.warm_up)
    await asyncio.to_thread(warm_up_questions)
    if config.recall.entity_expansion:
        try:
            await long_term.entities(MAIN)
        except Exception as exc:  # a warm-up: the first search meets any error itself
            log.debug("entities not read ahead: %s", exc)


RECOVER_WAITS = Backoff(0.5, 4.0)
RECOVER_TRIES = 5
"""A replay at start that finds the server away is tried this many times, the waits
doubling (0.5 s to 4 s: past `DOWN_SECONDS`, so the last tries reach a server that is
coming back), then left to a later start."""


async def _recover(staging: Staging) -> bool:
    """Replay what processes that died journalled. The journal was reached a moment ago,
    but the server may be going or coming back as this process starts: the replay is
    tried again with backoff instead of failing the start, and if the server stays away
    the rows stay in the journal (nothing acknowledged is lost) for the next start.
    Whether they were replayed."""
    waits = RECOVER_WAITS.waits()
    for tried in range(1, RECOVER_TRIES + 1):
        try:
            await staging.recover()
            return True
        except DatabaseUnreachable as exc:
            if tried == RECOVER_TRIES:
                log.warning(
                    "captures journalled by processes that died are not replayed yet (%s);"
                    " they stay in the journal for the next start",
                    exc,
                )
                return False
        await system_sleep(next(waits))
    return False


async def _open_database(backend: Backend) -> tuple[Db | None, str | None]:
    """The open database, or why it cannot be opened (the files still answer)."""
    try:
        return await backend.open(), None
    except (IndexUnavailable, DatabaseUnreachable) as exc:
        log.warning("database unavailable, running without audit log and index: %s", exc)
        return None, str(exc)


async def _deliveries(backend: Backend, db: Db, stack: AsyncExitStack) -> Deliveries:
    """Delivery claims under this process's owner id, held as a lock for the process's
    life: a message it takes and dies before answering is taken over."""
    owner = uuid.uuid4().hex
    owners = backend.owners()  # the database is open: so are its locks
    try:
        held = await asyncio.to_thread(owners.take, owner)
    except (DatabaseUnreachable, IndexUnavailable, OSError) as exc:
        log.warning("deliveries this process takes cannot be taken over: %s", exc)
        owner = ""  # nobody can tell whether it lives: its claims are never taken over
    else:

        async def give_back() -> None:
            with contextlib.suppress(DatabaseUnreachable, OSError):
                await asyncio.to_thread(owners.give_back, held)

        stack.push_async_callback(give_back)

    async def is_gone(other: str) -> bool:
        try:
            return await asyncio.to_thread(owners.is_gone, other)
        except (DatabaseUnreachable, OSError):
            return False

    return Deliveries(db, owner, is_gone)


async def _search_index(
    config: Config,
    workspace: Workspace,
    backend: Backend,
    db: Db,
    monotonic: Monotonic,
    stack: AsyncExitStack,
    serving: bool,
    now: Callable[[], datetime],
) -> tuple[SearchIndex, str]:
    """The index over the database, with dense recall when an embedder is configured or
    installed (`[embedding]`; the vector index, and numpy, are only imported then; for a
    command, only at its first search of a scope that has vectors). On PostgreSQL with
    pgvector the vectors are searched in the database; without it, in the process. With
    the index, the name of the model its vectors are made by ('' without one)."""
    recall = config.recall
    vectors: VectorSearch | None = None
    embedder = build_embedder(config.embedding)
    if embedder is not None:
        build = partial(backend.vector_index, db, embedder, config.embedding.batch_size)
        vectors = await build() if serving else LazyVectors(db, embedder, build)
        stack.push_async_callback(vectors.close)
    index = SearchIndex(
        db,
        workspace,
        recall.sync_min_interval_seconds,
        zoneinfo.ZoneInfo(config.timezone),
        k1=recall.k1,
        b=recall.b,
        rank_settings=rank_settings(recall),
        monotonic=monotonic,
        vectors=vectors,
        archive_below=config.scoring.policy().archive_below,
        clock=now,
    )
    stack.push_async_callback(index.close)  # its background scans, before the database
    return index, embedder.name if embedder is not None else ""


async def _journal(
    config: Config, backend: Backend, db: Db | None, stack: AsyncExitStack
) -> CaptureJournal | None:
    """Journalled captures; without a journal every capture writes MEMORY.md itself."""
    if not config.long_term.journal:
        return None
    try:
        journal = await backend.journal(db)
    except (IndexUnavailable, DatabaseUnreachable, OSError) as exc:
        log.warning("capture journal unavailable, captures write MEMORY.md directly: %s", exc)
        return None
    stack.push_async_callback(journal.close)
    return journal
