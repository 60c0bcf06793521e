"""The PostgreSQL backend: one database shared by every process of the workspace.

Its advisory locks, not lock files, keep processes from writing one file at once
(docs/operations.md); the journal is a table of the database; history and audit rows wait
in a local spool while the server is away; with pgvector, vectors are also pgvector's
column and its HNSW index answers a large scope until the process has its graph.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from memory_core.base.clock import Monotonic
from memory_core.base.errors import DatabaseUnreachable, IndexUnavailable
from memory_core.base.locks import LOCK_TIMEOUT_SECONDS, FallbackLocks, FileLocks, LockRegistry
from memory_core.base.sql import Db
from memory_core.base.workspace import Workspace
from memory_core.config.memory import HistorySettings
from memory_core.config.services import StorageSettings
from memory_core.storage.audit import AuditLog
from memory_core.storage.history import HistoryStore, MessageIndexer
from memory_core.storage.journal import CaptureJournal, LockOwners, Owners
from memory_core.storage.pg.database import Owner, PgDatabase
from memory_core.storage.pg.locks import AdvisoryLocks
from memory_core.storage.pg.reached import ReachedServers
from memory_core.storage.spool import SpoolingAudit, SpoolingHistory

if TYPE_CHECKING:
    from pathlib import Path

    from memory_core.embedding.base import Embedder
    from memory_core.storage.interfaces import VectorSearch

log = logging.getLogger(__name__)


class PostgresBackend:
    """`storage.postgres_dsn`'s database, owned by this workspace (see `Owner`)."""

    files_of_workspace = False

    def __init__(
        self,
        storage: StorageSettings,
        workspace: Workspace,
        locks: LockRegistry,
        monotonic: Monotonic,
    ) -> None:
        self.storage = storage
        self.workspace = workspace
        self.locks = locks
        self.monotonic = monotonic
        self.advisory: AdvisoryLocks | None = None
        self._db: PgDatabase | None = None

    async def open(self) -> Db:
        """The database; a server this workspace never reached must answer now, one it
        did may be down (storage/pg/reached.py)."""
        owner = Owner(await asyncio.to_thread(self.workspace.identity))
        dsn = self.storage.postgres_dsn
        reached = ReachedServers(self.workspace.state_dir)
        db = await PgDatabase.open(
            dsn,
            pool_size=self.storage.postgres_pool_size,
            owner=owner,
            monotonic=self.monotonic,
            known=await asyncio.to_thread(reached.known, dsn),
        )
        self._db = db
        if db.migrated:  # `record` writes only a server not recorded yet
            await asyncio.to_thread(reached.record, dsn)
        advisory = AdvisoryLocks(self.storage.postgres_dsn)
        await asyncio.to_thread(advisory.open)
        self.advisory = advisory
        files = FileLocks(self.workspace.locks_dir, LOCK_TIMEOUT_SECONDS)
        self.locks.use(FallbackLocks(advisory, files, health=db))
        return db

    def audit_log(self, db: Db) -> AuditLog:
        """Rows of changes made to the files while the server is away wait in a spool."""
        return SpoolingAudit(db, self.workspace.state_dir / "spool" / "audit")

    def history(
        self, db: Db, settings: HistorySettings, index: MessageIndexer | None
    ) -> HistoryStore:
        """Messages wait in a local spool while the server is away."""
        return SpoolingHistory(db, settings, index, self.workspace.state_dir / "spool")

    async def journal(self, db: Db | None) -> CaptureJournal:
        if db is None or self.advisory is None:
            raise IndexUnavailable("the database is not open")
        return await CaptureJournal.attach(db, LockOwners(self.advisory, health=self._db))

    def owners(self) -> Owners:
        """Owner locks that fail at once while the database counts as down: a start that
        just found the server away goes on without them instead of waiting for a lock's
        connection (`CONNECT_TIMEOUT_SECONDS`) once for each."""
        if self.advisory is None:
            raise IndexUnavailable("the database is not open")
        return LockOwners(self.advisory, health=self._db)

    async def vector_index(self, db: Db, embedder: Embedder, batch_size: int) -> VectorSearch:
        """In the process, pgvector's HNSW index answering a large scope until its graph
        is ready (`PgVectorIndex`); without pgvector, in the process alone (said once at
        start)."""
        from memory_core.storage.pg.vectors import PgVectorIndex, ensure_pgvector
        from memory_core.storage.vectors.index import VectorIndex

        index: type[VectorIndex] = PgVectorIndex
        try:
            version = await ensure_pgvector(db)
        except DatabaseUnreachable as exc:
            # Not asked: nothing is known of pgvector. The process searches its own
            # vectors (as without it) until a later start finds the server.
            log.warning(
                "dense recall: whether this database has pgvector is not known yet (%s);"
                " each process searches its own vectors meanwhile",
                exc,
            )
            index = VectorIndex
        else:
            if version is not None:
                log.info("dense recall: pgvector %s beside the process's own search", version)
            else:
                log.warning(
                    "dense recall: pgvector is not installed in this database; a large scope"
                    " is searched exactly in each process until its graph is built (CREATE"
                    " EXTENSION vector: the database answers meanwhile)"
                )
                index = VectorIndex
        return index.for_workspace(
            db, embedder, self.workspace.state_dir, batch_size=batch_size, monotonic=self.monotonic
        )

    async def recover(self, history: HistoryStore, audit: AuditLog | None) -> None:
        """Messages and audit rows a process spooled while the server was away, and died."""
        if isinstance(history, SpoolingHistory):
            await history.flush_spool()
        if isinstance(audit, SpoolingAudit):
            await audit.flush_spool()

    async def release(self, history: HistoryStore | None, audit: AuditLog | None) -> None:
        if isinstance(history, SpoolingHistory):
            await history.close()
        if isinstance(audit, SpoolingAudit):
            await audit.close()

    async def close(self) -> None:
        if self.advisory is not None:
            self.locks.use(FileLocks(self.workspace.locks_dir, LOCK_TIMEOUT_SECONDS))
            await asyncio.to_thread(self.advisory.close)
            self.advisory = None

    async def move_damaged_aside(self) -> None:
        return None  # the server's files are not this process's to move

    async def prepare_move_target(self) -> None:
        """The database to move into is empty (and now this workspace's) or this
        workspace's already (a move run again); a database another workspace uses is a
        `DatabaseForeign`, before anything is written to it."""
        owner = Owner(await asyncio.to_thread(self.workspace.identity), adopt=False)
        dsn = self.storage.postgres_dsn
        target = await PgDatabase.open(dsn, pool_size=1, owner=owner)
        try:
            await target.read(lambda conn: None)  # migrates, and checks the owner, now
        finally:
            await target.close()
        await asyncio.to_thread(ReachedServers(self.workspace.state_dir).record, dsn)

    async def finish_move_target(self) -> list[Path]:
        return []
