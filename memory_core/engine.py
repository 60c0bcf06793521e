"""`MemoryCore`: what every front end (bots, TUI, CLI, MCP) opens.

It holds the open workspace's services (`services.py` builds and closes them; the open,
the close and the parts are `Lifecycle`'s, in lifecycle.py) and hands out a few narrow
parts; the work that spans several parts (purge, reindex, migrate, recording a
conversation held elsewhere, delivery claims), here, is its own. Every call takes an
explicit `ScopeKey`: nothing here derives a scope from anything.

    front ends ──▶ MemoryCore ──▶ parts: memories, notes, finder, snapshots, event_log,
                      │                  audit, history, conversation, consolidation
                      └── services.py builds them over the backend (storage/backends.py)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.base import safe_files
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import (
    ChatmemError,
    DatabaseCorrupt,
    DatabaseUnreachable,
    IndexUnavailable,
    StorageError,
    ToolRefused,
    refusal,
)
from memory_core.base.inputs import storable
from memory_core.base.records import RecordedMessage
from memory_core.base.requests import searchable
from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Db
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.conversation import tools
from memory_core.embedding.factory import why_no_embedder as why_no_embedder
from memory_core.lifecycle import Lifecycle
from memory_core.longterm.file_head import read_head
from memory_core.longterm.long_term_views import ScopeStatus, ValidationProblem
from memory_core.recall.index import SyncStats
from memory_core.services import storage_backend
from memory_core.storage.audit import AuditLog
from memory_core.storage.backends import same_storage
from memory_core.storage.interfaces import CatchUp as CatchUp
from memory_core.storage.sessions import NewMessage
from memory_core.storage.vectors.rows import forget as forget_vectors

if TYPE_CHECKING:
    from memory_core import erasure, migrate
    from memory_core.backup.manifest import Manifest
    from memory_core.backup.put_back import Restored
    from memory_core.portable import ImportReport
    from memory_core.recall.index.model import IndexBackend
    from memory_core.scope_listing.listing import Listing
    from memory_core.scope_merge import MergeReport

__all__ = ["MemoryCore", "ScopeStatus", "ValidationProblem"]


log = logging.getLogger(__name__)


class MemoryCore(Lifecycle):
    """Open with `async with MemoryCore.open(config) as core:`.

    Attributes: `config`, `workspace` (paths only), `policy`, `tz`, `llm`. The parts
    (`memories`, `notes`, `finder`, `snapshots`, `event_log`, `guard`, `consolidation`,
    and with a database `audit`, `history`, `conversation`) are the services themselves,
    so a front end calls them directly; the methods here are the work no one part does.
    The open and close, and the parts, are `Lifecycle`'s (memory_core/lifecycle.py).
    """

    async def backup(self, dest: Path) -> Manifest:
        """A consistent copy of this workspace into `dest` while bots write (`chatmem
        backup`): each file under the lock its writers take; see memory_core/backup/."""
        from memory_core.backup.take import Source, take_backup
        from memory_core.base.clock import format_when

        source = Source(
            workspace=self.workspace,
            backend=self.config.storage.backend,
            postgres_dsn=self.config.storage.postgres_dsn,
            created_at=format_when(self.now()),
        )
        return await take_backup(source, self._locks, dest)

    @staticmethod
    async def restore_backup(config: Config, source: Path, *, force: bool) -> Restored:
        """Put the backup at `source` into the configured workspace, checked first
        (`chatmem restore DIR`; no core may be open on it). Open it after."""
        from memory_core.backup.put_back import restore_blocking

        storage = config.storage
        return await asyncio.to_thread(
            restore_blocking,
            source,
            Workspace.at(config.workspace_path),
            storage.backend,
            storage.postgres_dsn,
            force=force,
        )

    # --- work across the parts -----------------------------------------------------
    async def vectors_ready(self) -> None:
        """Wait until every chunk written so far has its vector (benches, tests, reindex);
        a bot never waits for this. A command's core (`serving=False`) makes no vectors:
        this returns at once there."""
        index = self.guard.index
        if index is not None and index.vectors is not None:
            index.embed_all()
            await index.vectors.drain()

    async def entries_head(
        self, scope: ScopeKey, max_bytes: int
    ) -> tuple[list[MemoryEntry], int | None] | None:
        """The first entries of a long-term file larger than `max_bytes` and the total
        the file announces (None for a smaller file: load it whole). The file is sorted
        by score, so these are the top of the rankings, read in milliseconds."""
        return await asyncio.to_thread(
            read_head,
            self.workspace.root,
            self.memories.path(scope),
            self.policy.archive_below,
            max_bytes,
        )

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
        audit = self.audit
        long_term = self.memories
        entries = await long_term.forgotten_entries(scope, entry_ids)
        ids = [e.id for e in entries]
        if not ids:
            return entries
        # The log first: if the files fail after it, the entries are still there to purge
        # again; the other way round the text could stay in the log with no entry to name.
        await audit.purge(scope, ids, source, self.now())
        await long_term.erase_forgotten(scope, ids)
        # The event log and the snapshot can hold the text too (a message, a tool call).
        await self.event_log.redact(scope, [e.content for e in entries])
        if await self.snapshots.text(scope):
            await self.snapshots.rebuild(scope)
        if not await self.forget_erased_text():
            log.warning("purge: another process kept the database's WAL from being emptied")
        return entries

    async def forget_erased_text(self, tables: Sequence[str] = ()) -> bool:
        """The end of a purge or an erasure, once the text is out of the files and rows:
        the index rebuilt (FTS5 keeps a deleted chunk's words in its segments), the vectors
        no chunk vouches for dropped with the graphs that hold them, and the databases
        vacuumed (`AuditLog.vacuum`; `tables` besides a purge's, on PostgreSQL). False
        when another process's open read kept SQLite's WAL from being emptied."""
        if self.guard.index is not None:
            await self.guard.index.rebuild()
            self.meter.index_rebuild()
        db = self._open.db
        vectors = self.guard.index.vectors if self.guard.index is not None else None
        if vectors is not None:
            # A vector can hint at the text it came from: those no chunk vouches for go,
            # with the graphs that hold them too; the backfill makes what is new.
            await vectors.forget()
        elif db is not None:  # no embedder now: the vectors of an earlier one still go
            # Imported here: only a purge without an embedder handles graph files itself.
            from memory_core.storage.vectors.graph_files import directory as graph_directory
            from memory_core.storage.vectors.graph_files import remove_all as remove_graph_files

            await db.write(forget_vectors)
            await asyncio.to_thread(remove_graph_files, graph_directory(self.workspace.state_dir))
        emptied = await self.audit.vacuum(tables)
        journal = self.journal_db
        if journal is not None and journal is not db and not journal.dialect.is_server:
            emptied = await AuditLog(journal).vacuum() and emptied
        return emptied

    @property
    def journal_db(self) -> Db | None:
        """Where the capture journal's rows live (its own SQLite file, or the shared
        PostgreSQL database); None without a journal."""
        journal = self._open.journal
        return journal.db if journal is not None else None

    async def erase(
        self,
        *,
        scope: ScopeKey | None = None,
        person: str | None = None,
        names: Sequence[str] = (),
        by: str,
        dry_run: bool = False,
    ) -> erasure.ErasureReport:
        """Everything about a person gone for good (`chatmem erase`): a scope, or each
        scope keyed by the person (`CHANNEL:ID`) and their lines in their channel's
        groups (`report.as_json()` says what went, or would go with `dry_run`); see
        memory_core/erasure/. Needs the database; the bots should be stopped."""
        from memory_core import erasure  # the module of this command only

        return await erasure.erase(
            self,
            scope=scope,
            person=erasure.Person.parse(person) if person is not None else None,
            names=names,
            by=by,
            dry_run=dry_run,
        )

    async def memory_tool(
        self, scope: ScopeKey, name: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """One call of a memory tool (memory_search, memory_get, memory_save) in `scope`,
        exactly as the chat model makes it, for a front end that serves the tools to other
        agents (MCP). A refused call, or one whose storage failed, raises `ToolRefused`
        with the line the model would read; anything else is a bug and is raised as is."""
        try:
            return await tools.run(self.tool_context(scope), name, arguments)
        except Exception as exc:
            message = refusal(name, exc)
            if message is None:
                raise
            raise ToolRefused(message) from exc

    async def long_term_text(self, scope: ScopeKey) -> str:
        """The scope's long-term file as it stands once pending captures are written (''
        for a scope with none yet): what a person, or an agent, reads whole."""
        await self.memories.flush(scope)
        path = self.memories.path(scope)

        def read() -> str:
            try:
                return safe_files.read_text(self.workspace.root, path, safe_files.LONG_TERM_BYTES)
            except FileNotFoundError:
                return ""

        return await asyncio.to_thread(read)

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> SyncStats:
        """Rebuild the index from files; a database SQLite cannot read is moved aside
        (found at the open, by a search, or, in a core opened with `sync_files=False`
        that has not read the index yet, by the rebuild itself)."""
        if self.guard.index is None and self._backend.files_of_workspace:
            await self._restart_beside_damaged()
        try:
            stats = await self._index_to_rebuild().rebuild(progress)
        except DatabaseCorrupt:
            if not self._backend.files_of_workspace:
                raise
            await self._restart_beside_damaged()
            stats = await self._index_to_rebuild().rebuild(progress)
        self.meter.index_rebuild()
        return stats

    async def _restart_beside_damaged(self) -> None:
        await self._close_services()
        await self._backend.move_damaged_aside()
        await self.start()

    def _index_to_rebuild(self) -> IndexBackend:
        index = self.guard.index
        if index is None:
            raise IndexUnavailable(self.degraded_reason or "the index cannot be opened")
        return index

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
        user and assistant lines not archived yet are indexed for recall as a chat turn's
        would be (an archived one is found in its archive file; commands,
        forget requests and the replies to them are stored, not indexed:
        `requests.searchable`).
        Checked whole before the first write: a message UTF-8 cannot hold refuses them all."""
        for message in messages:
            storable(message.content, "a message")
            storable(message.speaker, "a speaker's name")
        history = self.history
        await history.add_session(scope, session_id, started_at, status)
        talk = [m for m in messages if m.role in ("user", "assistant")]
        said = iter(searchable((m.role == "assistant", m.content) for m in talk))
        compacted: list[int] = []
        for message in messages:
            indexed = message.role in ("user", "assistant") and next(said)
            stored = await history.add_message(
                NewMessage.recorded(
                    scope, session_id, message, indexed=indexed and self._open.memory.indexed
                )
            )
            compacted += [stored.id] if message.compacted else []
        if compacted:
            await history.mark_compacted(compacted)

    async def known_scopes(self) -> list[ScopeKey]:
        """Every scope that holds something: the scopes with a directory (main first),
        then those that only have messages in the history."""
        scopes = await self.memories.scopes()
        if self._open.db is None:
            return scopes
        known = {s.value for s in scopes}
        try:
            messages = await self.history.counts_by_scope()
        except (DatabaseUnreachable, IndexUnavailable):
            return scopes  # the history's server is away: the scopes the files know
        return scopes + [ScopeKey(s) for s in sorted(messages) if s not in known]

    async def scope_listing(self, offset: int = 0, limit: int | None = None) -> Listing:
        """Every scope with a directory and the figures of a page of them (`chatmem
        scopes`/`stats`), from the index's summaries: only the scopes whose files changed
        since are read (memory_core/scope_listing/)."""
        from memory_core.scope_listing import scope_figures

        return await scope_figures(self.memories, self._open.db, self.memories.now(), offset, limit)

    async def knows_scope(self, scope: ScopeKey) -> bool:
        """Whether `known_scopes()` holds `scope`, at the cost of that one scope (its
        directory, its messages' count), whatever the number of scopes."""
        if await asyncio.to_thread(self.workspace.has_scope, scope):
            return True
        if self._open.db is None:
            return False
        try:
            return bool(await self.history.counts_by_scope(scope))
        except (DatabaseUnreachable, IndexUnavailable):
            return False

    async def vector_coverage(self, model: str) -> tuple[int, int]:
        """(chunks, chunks with a vector of `model`) over every scope: how far the vectors
        lag behind the index (`chatmem doctor`); (0, 0) without a usable index."""
        from memory_core.storage.vectors.rows import coverage

        index, db = self.guard.index, self._open.db
        if index is None or db is None:
            return 0, 0
        chunks = vectors = 0
        for scope in await self.known_scopes():
            sid = await index.scope_id(scope, create=False)
            if sid is not None:
                count, have = await db.read(partial(coverage, sid=sid, model=model))
                chunks, vectors = chunks + count, vectors + min(have, count)
        return chunks, vectors

    async def merge_scopes(self, source: ScopeKey, target: ScopeKey) -> MergeReport:
        """Everything scope `source` owns into scope `target`, nothing lost (`chatmem
        scopes --merge`: a look-alike scope stored before keys were normalised); see
        memory_core/scope_merge/. Needs the database; the bots should be stopped."""
        from memory_core import scope_merge  # the module of this command only

        return await scope_merge.merge_scopes(self, source, target)

    async def export_lines(self, scopes: Sequence[ScopeKey] = ()) -> AsyncIterator[str]:
        """The named scopes (or every one) as chatmem's export: JSON lines, a versioned
        header first (memory_core/portable/). No vectors: an import makes them again."""
        from memory_core import portable  # the module of this command only

        async for text in portable.export_lines(self, scopes, self.now()):
            yield text

    async def export_file(self, scopes: Sequence[ScopeKey], out: Path) -> int:
        """`export_lines` written to the file `out` at once; how many records."""
        from memory_core import portable

        return await portable.export_file(self, scopes, out, self.now())

    async def export_markdown(self, scopes: Sequence[ScopeKey], out: Path) -> list[Path]:
        """The export as a Markdown tree laid out as a workspace, in the empty folder `out`."""
        from memory_core import portable

        return await portable.export_markdown(self, scopes, out)

    async def import_from(
        self, source: Path, scopes: Sequence[ScopeKey] = ()
    ) -> tuple[str, ImportReport]:
        """Import chatmem's export, a workspace-like folder or a mem0 export, each record
        into its own scope through the parts (idempotent); its form and what it did."""
        from memory_core import portable

        return await portable.import_from(self, source, scopes, self.now())

    async def move_storage(
        self, backend: str, dsn: str = "", progress: migrate.Progress | None = None
    ) -> migrate.MoveReport:
        """Copy what only the database holds (history, audit, activations, schedules,
        deliveries, the embedding cache, the capture journal) to the other backend and
        index the files there (`chatmem migrate`). Idempotent: run again after an
        interruption, it copies what is missing. The bots of the workspace should be
        stopped; the configuration is the caller's to switch afterwards."""
        from memory_core import migrate  # the module of this command only

        current = self.config.storage
        storage = current.model_copy(update={"backend": backend, "postgres_dsn": dsn})
        if same_storage(current, storage):
            raise ChatmemError(f"the workspace already uses {backend}")
        source_db = self._needs_database(self._open.db)
        await self.memories.flush()  # staged captures into MEMORY.md: the journal holds no own row
        target_config = self.config.model_copy(update={"storage": storage})
        target_backend = storage_backend(
            target_config, self.workspace, self._locks, self._monotonic
        )
        await target_backend.prepare_move_target()

        def files(done: int, total: int) -> None:
            if progress is not None:
                progress("files indexed", done, total)

        report = migrate.MoveReport()
        async with MemoryCore.open(
            target_config,
            clock=self._clock,
            llm=self.llm,
            progress=files,
            monotonic=self._monotonic,
            serving=self._serving,
        ) as target:
            target_db = target._open.db
            if target_db is None:
                raise IndexUnavailable(target.degraded_reason or "cannot open the target")
            for table, key in migrate.TABLES:
                await migrate.copy_table(source_db, target_db, table, key, report, progress)
            source_journal, target_journal = self._open.journal, target._open.journal
            if source_journal is not None and target_journal is not None:
                await migrate.copy_captures(source_journal.db, target_journal.db, report)
            await migrate.copy_message_chunks(source_db, target_db, report, progress)
        report.kept_aside = await target_backend.finish_move_target()
        return report

    async def claim_delivery(self, channel: str, chat_id: str, message_id: str) -> bool:
        """True for the first delivery of an inbound message to any process of the
        workspace: answer it. A platform's redelivery, to this process or another, is
        False. Without a working database every delivery is answered (a duplicate reply
        is better than a lost one)."""
        deliveries = self._open.deliveries
        if deliveries is None:
            return True
        try:
            return await deliveries.claim(channel, chat_id, message_id, self.now())
        except StorageError as exc:
            log.warning("cannot check a delivery against other processes, answering: %s", exc)
            return True

    async def delivery_answered(self, channel: str, chat_id: str, message_id: str) -> None:
        """The reply to a claimed message is made: no other process takes it over."""
        deliveries = self._open.deliveries
        if deliveries is None:
            return
        try:
            await deliveries.answered(channel, chat_id, message_id)
        except StorageError as exc:
            log.warning("a delivery not marked answered: %s", exc)

    async def change_marks(self) -> tuple[int, int]:
        """(database data version, newest audit id): the first moves when another process
        commits, the second when anyone audits a change. (0, 0) without a database."""
        db, audit = self._open.db, self._open.audit
        if db is None or audit is None:
            return 0, 0
        return await db.data_version(), await audit.last_id()
