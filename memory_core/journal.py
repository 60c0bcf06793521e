"""The capture journal: captures acknowledged before MEMORY.md is rewritten.

A capture returns once its row is committed here; MEMORY.md follows a moment later
(`staging.py`). The journal is its own SQLite file with `synchronous = FULL`, so a commit
is on disk when `append` returns (one WAL fsync, about half a millisecond), and it never
waits behind a long index transaction on the main database.

Several processes (a bot, the TUI, the CLI) may share a workspace. Each journal holds a
lock file named after its owner id for its whole life; rows whose owner's lock can be
taken belong to a process that died before writing them, and the next process to start
adopts and replays them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from memory_core.db import Database
from memory_core.errors import ChatmemError, DatabaseBusy, IndexUnavailable, StoreError

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS captures (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT NOT NULL,
    scope TEXT NOT NULL,
    payload TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class JournalRow:
    seq: int
    scope: str
    payload: dict[str, Any]


class CaptureJournal:
    """Open with `await CaptureJournal.open(path, owners_dir)`; close when done."""

    def __init__(self, db: Database, owner: str, owner_lock: FileLock) -> None:
        self._db = db
        self.owner = owner
        self._owner_lock = owner_lock
        self._owners_dir = Path(owner_lock.lock_file).parent

    @classmethod
    async def open(cls, path: Path, owners_dir: Path) -> CaptureJournal:
        owner = uuid.uuid4().hex
        owner_lock = await asyncio.to_thread(_take_owner_lock, owners_dir, owner)
        try:
            # The point of the journal: a committed row survives a power cut.
            db = await Database.open(path, synchronous="FULL", migrations=(), schema=SCHEMA)
        except (IndexUnavailable, DatabaseBusy) as exc:
            # Locked for a minute by another process, or unusable: either way this process
            # writes its captures to MEMORY.md directly instead of failing to start.
            await asyncio.to_thread(_drop_owner_lock, owner_lock)
            raise IndexUnavailable(f"cannot open capture journal: {exc}") from exc
        except BaseException:
            await asyncio.to_thread(_drop_owner_lock, owner_lock)
            raise
        return cls(db, owner, owner_lock)

    async def append(self, scope: str, payload: dict[str, Any]) -> int:
        """Commit one capture; its sequence number once on disk."""
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        try:
            seq = await self._db.call(
                lambda conn: (
                    conn.execute(
                        "INSERT INTO captures (owner, scope, payload) VALUES (?, ?, ?)",
                        (self.owner, scope, data),
                    ).lastrowid
                )
            )
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, ChatmemError):
                raise
            # The caller's capture is not acknowledged: it must hear so in one line.
            raise StoreError(f"capture not saved: the capture journal failed: {exc}") from exc
        if seq is None:  # pragma: no cover - sqlite always sets it after an INSERT
            raise IndexUnavailable("the capture journal did not number a row")
        return seq

    async def remove(self, seqs: list[int]) -> None:
        """Forget rows whose captures are in MEMORY.md now."""
        if seqs:
            await self._db.run(
                lambda conn: conn.executemany(
                    "DELETE FROM captures WHERE seq = ?", [(s,) for s in seqs]
                )
            )

    async def adopt_orphans(self) -> list[JournalRow]:
        """Rows left by owners that are gone (their lock is free), now owned by us."""
        owners = await self._db.call(
            lambda conn: conn.execute(
                "SELECT DISTINCT owner FROM captures WHERE owner != ?", (self.owner,)
            ).fetchall()
        )
        dead = [
            str(r[0])
            for r in owners
            if await asyncio.to_thread(_owner_is_gone, self._owners_dir, str(r[0]))
        ]

        def adopt(conn: sqlite3.Connection) -> list[Any]:
            conn.executemany(
                "UPDATE captures SET owner = ? WHERE owner = ?", [(self.owner, o) for o in dead]
            )
            return conn.execute(
                "SELECT seq, scope, payload FROM captures WHERE owner = ? ORDER BY seq",
                (self.owner,),
            ).fetchall()

        found = await self._db.run(adopt)
        adopted: list[JournalRow] = []
        for seq, scope, payload in found:
            try:
                adopted.append(JournalRow(int(seq), str(scope), json.loads(payload)))
            except json.JSONDecodeError:
                log.error("capture journal row %s is not JSON; left in place: %r", seq, payload)
        return adopted

    async def close(self) -> None:
        await self._db.close()
        await asyncio.to_thread(_drop_owner_lock, self._owner_lock)


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
