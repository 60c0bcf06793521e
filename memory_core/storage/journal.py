"""The capture journal: captures acknowledged before MEMORY.md is rewritten.

A capture returns once its row is committed here; MEMORY.md follows a moment later
(`longterm/staging.py`). The journal is its own SQLite file with `synchronous = FULL`, so a commit
is on disk when `append` returns (one WAL fsync, about half a millisecond), and it never
waits behind a long index transaction on the main database.

Several processes (a bot, the TUI, the CLI) may share a workspace. Each journal holds a
lock file named after its owner id for its whole life; rows whose owner's lock can be
taken belong to a process that died before writing them, and the next process to start
adopts and replays them.

The table's schema is a numbered migration like every other: `JOURNAL_MIGRATIONS`
(memory_core/storage/migrations.py) for this file, `m004_captures` (memory_core/storage/pg/migrations.py)
in a shared PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout

from memory_core.base.errors import (
    DatabaseBusy,
    DatabaseUnreachable,
    DatabaseUnwritable,
    IndexUnavailable,
    MemoryFileError,
    StorageError,
)
from memory_core.base.locks import Health, ProcessLocks
from memory_core.base.sql import Connection, Db
from memory_core.storage.db import Database
from memory_core.storage.migrations import JOURNAL_MIGRATIONS

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JournalRow:
    seq: int
    scope: str
    payload: dict[str, Any]


class Owners(Protocol):
    """Who is alive: each journal holds a lock named after its owner id for its whole
    life (blocking calls, on worker threads)."""

    def take(self, owner: str) -> object: ...
    def is_gone(self, owner: str) -> bool: ...
    def give_back(self, handle: object) -> None: ...


class FileOwners:
    """A lock file per owner in the workspace's `owners` directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def take(self, owner: str) -> object:
        return _take_owner_lock(self.directory, owner)

    def is_gone(self, owner: str) -> bool:
        return _owner_is_gone(self.directory, owner)

    def give_back(self, handle: object) -> None:
        assert isinstance(handle, FileLock)
        _drop_owner_lock(handle)


class LockOwners:
    """An owner's lock in another process-lock layer (the database's advisory locks);
    while `health` counts the database as down, each call is a `DatabaseUnreachable` at
    once instead of a wait for a lock's connection."""

    def __init__(self, locks: ProcessLocks, health: Health | None = None) -> None:
        self._locks = locks
        self._health = health

    def _reachable(self) -> None:
        if self._health is not None and self._health.is_down():
            raise DatabaseUnreachable("the database is unreachable (trying again shortly)")

    def _try_take(self, name: str) -> object | None:
        self._reachable()
        try:
            return self._locks.try_take(name)
        except DatabaseUnreachable:
            if self._health is not None:
                self._health.mark_down()  # the next part does not wait for it again
            raise

    def take(self, owner: str) -> object:
        handle = self._try_take(f"owner-{owner}")
        if handle is None:  # a fresh random id held by someone else: never
            raise IndexUnavailable(f"journal owner {owner} is taken")
        return handle

    def is_gone(self, owner: str) -> bool:
        if not owner.isalnum():
            return False
        handle = self._try_take(f"owner-{owner}")
        if handle is None:
            return False
        self._locks.give_back(handle)
        return True

    def give_back(self, handle: object) -> None:
        self._locks.give_back(handle)


class CaptureJournal:
    """Open with `await CaptureJournal.open(path, owners_dir)` (its own SQLite file) or
    `attach(db, owners)` (a shared database); close when done."""

    def __init__(
        self, db: Db, owner: str, owners: Owners, held: object, *, owns_db: bool = True
    ) -> None:
        self.db = db
        """Where the rows live (read by `chatmem migrate`)."""
        self._owns_db = owns_db
        self.owner = owner
        self._owners = owners
        self._held = held

    @classmethod
    async def open(cls, path: Path, owners_dir: Path) -> CaptureJournal:
        owners = FileOwners(owners_dir)
        owner = uuid.uuid4().hex
        held = await asyncio.to_thread(owners.take, owner)
        try:
            # The point of the journal: a committed row survives a power cut.
            db = await Database.open(path, synchronous="FULL", migrations=JOURNAL_MIGRATIONS)
        except (IndexUnavailable, DatabaseBusy) as exc:
            # Locked for a minute by another process, or unusable: either way this process
            # writes its captures to MEMORY.md directly instead of failing to start.
            await asyncio.to_thread(owners.give_back, held)
            raise IndexUnavailable(f"cannot open capture journal: {exc}") from exc
        except BaseException:
            await asyncio.to_thread(owners.give_back, held)
            raise
        return cls(db, owner, owners, held)

    @classmethod
    async def attach(cls, db: Db, owners: Owners) -> CaptureJournal:
        """The journal in a shared database (the PostgreSQL backend's `captures` table):
        the database is the caller's to close."""
        owner = uuid.uuid4().hex
        held = await asyncio.to_thread(owners.take, owner)
        return cls(db, owner, owners, held, owns_db=False)

    async def append(self, scope: str, payload: dict[str, Any]) -> int:
        """Commit one capture; its sequence number once on disk."""
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        try:
            seq = await self.db.autocommit(
                lambda conn: conn.execute(
                    "INSERT INTO captures (owner, scope, payload) VALUES (?, ?, ?) RETURNING seq",
                    (self.owner, scope, data),
                ).fetchone()[0]
            )
        except StorageError as exc:
            if isinstance(exc, DatabaseUnreachable):
                raise  # the caller writes MEMORY.md itself (`LongTermMemory.capture`)
            if isinstance(exc, (DatabaseBusy, DatabaseUnwritable)):
                raise  # already one clear line
            # The caller's capture is not acknowledged: it must hear so in one line.
            raise MemoryFileError(f"capture not saved: the capture journal failed: {exc}") from exc
        return int(seq)

    async def remove(self, seqs: list[int]) -> None:
        """Forget rows whose captures are in MEMORY.md now."""
        if seqs:
            await self.db.write(
                lambda conn: conn.executemany(
                    "DELETE FROM captures WHERE seq = ?", [(s,) for s in seqs]
                )
            )

    async def adopt_orphans(self) -> list[JournalRow]:
        """Rows left by owners that are gone (their lock is free), now owned by us."""
        owners = await self.db.read(
            lambda conn: conn.execute(
                "SELECT DISTINCT owner FROM captures WHERE owner != ?", (self.owner,)
            ).fetchall()
        )
        dead = [
            str(r[0]) for r in owners if await asyncio.to_thread(self._owners.is_gone, str(r[0]))
        ]

        def adopt(conn: Connection) -> list[Any]:
            conn.executemany(
                "UPDATE captures SET owner = ? WHERE owner = ?", [(self.owner, o) for o in dead]
            )
            return conn.execute(
                "SELECT seq, scope, payload FROM captures WHERE owner = ? ORDER BY seq",
                (self.owner,),
            ).fetchall()

        found = await self.db.write(adopt)
        adopted: list[JournalRow] = []
        for seq, scope, payload in found:
            try:
                adopted.append(JournalRow(int(seq), str(scope), json.loads(payload)))
            except json.JSONDecodeError:
                log.error("capture journal row %s is not JSON; left in place: %r", seq, payload)
        return adopted

    async def close(self) -> None:
        if self._owns_db:
            await self.db.close()
        await asyncio.to_thread(self._owners.give_back, self._held)


def _take_owner_lock(owners_dir: Path, owner: str) -> FileLock:
    owners_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(owners_dir / f"{owner}.lock", timeout=0, thread_local=False)
    lock.acquire()
    return lock


def _drop_owner_lock(lock: FileLock) -> None:
    lock.release()
    with contextlib.suppress(OSError):
        Path(lock.lock_file).unlink()


def _owner_is_gone(owners_dir: Path, owner: str) -> bool:
    """True when no live process holds `owner`'s lock (taking it proves that)."""
    if not owner.isalnum():
        return False
    lock = FileLock(owners_dir / f"{owner}.lock", timeout=0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        return False
    _drop_owner_lock(lock)
    return True
