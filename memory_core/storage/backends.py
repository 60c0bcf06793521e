"""The storage backend, chosen once: SQLite files in the workspace, or a PostgreSQL
database shared by every process of the workspace (`storage.backend`).

A backend opens the database and makes what lives in it or beside it: the audit log, the
session history, the capture journal, the owners of delivery claims, the vector index,
and what a reindex or a move between backends does to its files. The facade asks the
backend and never branches on its name, so a third backend would be one more class here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memory_core.base.atomic import atomic_write_text
from memory_core.base.clock import Monotonic, epoch_seconds
from memory_core.base.errors import ConfigError, install_hint
from memory_core.base.locks import LockRegistry
from memory_core.base.sql import Db, Dialect
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.config.memory import HistorySettings
from memory_core.config.services import StorageSettings
from memory_core.storage.audit import AuditLog
from memory_core.storage.db import Database
from memory_core.storage.dialects import POSTGRES, SQLITE, dialect_for
from memory_core.storage.history import HistoryStore, MessageIndexer
from memory_core.storage.journal import CaptureJournal, FileOwners, Owners

if TYPE_CHECKING:
    from memory_core.embedding.base import Embedder
    from memory_core.storage.interfaces import VectorSearch

log = logging.getLogger(__name__)


class Backend(Protocol):
    """What the facade needs of a storage backend (see the module docstring)."""

    files_of_workspace: bool
    """The database is files of this workspace (a reindex may move a damaged one aside),
    not a server's."""

    async def open(self) -> Db:
        """The workspace's database, migrated; `IndexUnavailable` or
        `DatabaseUnreachable` when it cannot be used (the files still answer)."""
        ...

    def audit_log(self, db: Db) -> AuditLog: ...

    def history(
        self, db: Db, settings: HistorySettings, index: MessageIndexer | None
    ) -> HistoryStore: ...

    async def journal(self, db: Db | None) -> CaptureJournal:
        """The capture journal; `IndexUnavailable` when it needs a database that is not
        open."""
        ...

    def owners(self) -> Owners:
        """Who holds which delivery claims and journal rows (a lock per live process)."""
        ...

    async def vector_index(self, db: Db, embedder: Embedder, batch_size: int) -> VectorSearch: ...

    async def recover(self, history: HistoryStore, audit: AuditLog | None) -> None:
        """After opening: what a process that died left undone (spooled rows)."""
        ...

    async def release(self, history: HistoryStore | None, audit: AuditLog | None) -> None:
        """Before closing the database: what only this backend holds open."""
        ...

    async def close(self) -> None:
        """After the database: locks and connections of its own."""
        ...

    async def move_damaged_aside(self) -> None:
        """For a reindex of a database that cannot be read (with `files_of_workspace`):
        move its files aside, kept with a suffix."""
        ...

    async def prepare_move_target(self) -> None:
        """Before `chatmem migrate` copies into this backend: make it ready (or refuse)."""
        ...

    async def finish_move_target(self) -> list[Path]:
        """After the copy into this backend finished: the files it kept aside (stale
        ones from before the workspace moved away), for the person to delete."""
        ...


def same_storage(a: StorageSettings, b: StorageSettings) -> bool:
    """Whether two storage settings name the same database: the workspace's SQLite file,
    or one PostgreSQL database (`chatmem migrate` refuses to move into where it is)."""
    served = dialect_for(a.backend).is_server
    return a.backend == b.backend and (not served or a.postgres_dsn == b.postgres_dsn)


def backend_for(
    config: Config, workspace: Workspace, locks: LockRegistry, monotonic: Monotonic
) -> Backend:
    """The configured backend: its dialect's maker (`MAKERS`)."""
    storage = config.storage
    return MAKERS[dialect_for(storage.backend)](storage, workspace, locks, monotonic)


def _sqlite_backend(
    storage: StorageSettings, workspace: Workspace, locks: LockRegistry, monotonic: Monotonic
) -> Backend:
    return SqliteBackend(workspace, monotonic)


def _postgres_backend(
    storage: StorageSettings, workspace: Workspace, locks: LockRegistry, monotonic: Monotonic
) -> Backend:
    """PostgreSQL's driver is only imported when it is chosen."""
    if not storage.postgres_dsn.strip():
        raise ConfigError(
            "storage.backend = 'postgres' needs storage.postgres_dsn (or CHATMEM_POSTGRES_DSN)"
        )
    try:
        from memory_core.storage.pg.backend import PostgresBackend
    except ImportError as exc:
        raise ConfigError(
            f"storage.backend = 'postgres' needs psycopg: {install_hint('postgres')}"
        ) from exc
    return PostgresBackend(storage, workspace, locks, monotonic)


BackendMaker = Callable[[StorageSettings, Workspace, LockRegistry, Monotonic], Backend]
MAKERS: dict[Dialect, BackendMaker] = {SQLITE: _sqlite_backend, POSTGRES: _postgres_backend}
"""The backend of each dialect (`storage.dialects.DIALECTS`): one entry per kind."""


class SqliteBackend:
    """The workspace's own files: `index.sqlite3` and the journal's `journal.sqlite3`,
    with lock files between processes."""

    files_of_workspace = True

    def __init__(self, workspace: Workspace, monotonic: Monotonic) -> None:
        self.workspace = workspace
        self.monotonic = monotonic

    async def open(self) -> Db:
        return await Database.open(self.workspace.db_path)

    def audit_log(self, db: Db) -> AuditLog:
        return AuditLog(db)

    def history(
        self, db: Db, settings: HistorySettings, index: MessageIndexer | None
    ) -> HistoryStore:
        return HistoryStore(db, settings, index)

    async def journal(self, db: Db | None) -> CaptureJournal:
        state = self.workspace.state_dir
        return await CaptureJournal.open(state / "journal.sqlite3", state / "owners")

    def owners(self) -> Owners:
        return FileOwners(self.workspace.state_dir / "owners")

    async def vector_index(self, db: Db, embedder: Embedder, batch_size: int) -> VectorSearch:
        from memory_core.storage.vectors.index import VectorIndex

        return VectorIndex.for_workspace(
            db, embedder, self.workspace.state_dir, batch_size=batch_size, monotonic=self.monotonic
        )

    async def recover(self, history: HistoryStore, audit: AuditLog | None) -> None:
        return None

    async def release(self, history: HistoryStore | None, audit: AuditLog | None) -> None:
        return None

    async def close(self) -> None:
        return None

    async def move_damaged_aside(self) -> None:
        await asyncio.to_thread(move_aside, self.workspace.db_path)

    async def prepare_move_target(self) -> None:
        await asyncio.to_thread(fresh_sqlite_target, self.workspace)

    async def finish_move_target(self) -> list[Path]:
        marker = self.workspace.state_dir / MOVING_MARKER
        await asyncio.to_thread(marker.unlink, missing_ok=True)
        return await asyncio.to_thread(kept_before_move, self.workspace)


def move_aside(path: Path) -> None:
    """A database SQLite cannot read, kept beside with a suffix (and its WAL files)."""
    if path.exists():
        stamp = int(epoch_seconds())
        for suffix in ("", "-wal", "-shm"):
            part = path.with_name(path.name + suffix)
            if part.exists():
                part.rename(part.with_name(f"{part.name}.corrupt-{stamp}"))


MOVING_MARKER = "migrating-to-sqlite"
"""Present while a move to SQLite runs: a rerun resumes into the files it made."""


def fresh_sqlite_target(workspace: Workspace) -> None:
    """An SQLite database and journal left from before the workspace moved away would
    bring back stale history and replay stale captures: they are moved aside (kept, with
    a suffix), unless a move to SQLite was interrupted, which resumes into them."""
    marker = workspace.state_dir / MOVING_MARKER
    if marker.exists():
        return
    workspace.state_dir.mkdir(parents=True, exist_ok=True)
    parts = [
        part
        for name in ("index.sqlite3", "journal.sqlite3")
        for suffix in ("", "-wal", "-shm")
        if (part := workspace.state_dir / (name + suffix)).exists()
    ]
    stamp = int(epoch_seconds())
    while any(p.with_name(f"{p.name}{BEFORE_MOVE}{stamp}").exists() for p in parts):
        stamp += 1  # a second move within the same second keeps the first one's files
    for part in parts:
        part.rename(part.with_name(f"{part.name}{BEFORE_MOVE}{stamp}"))
    atomic_write_text(marker, "", root=workspace.root)  # never through a link out


BEFORE_MOVE = ".before-move-"
"""The suffix (then a Unix time) of a file `fresh_sqlite_target` kept aside."""


def kept_before_move(workspace: Workspace) -> list[Path]:
    """Every file a move to SQLite kept aside in the workspace (this move's and earlier
    ones'): `chatmem migrate` names them, since nothing else ever reads or deletes them."""
    if not workspace.state_dir.is_dir():
        return []
    return sorted(p for p in workspace.state_dir.iterdir() if BEFORE_MOVE in p.name)
