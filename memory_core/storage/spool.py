"""Session history that keeps the conversation going while the database is away.

With the PostgreSQL backend the database is another machine: it restarts, fails over,
drops off the network. A message a person sent is acknowledged once it is stored, so
while the server cannot be reached, `SpoolingHistory` stores it in a local spool instead:
one JSON line per message (and per session started meanwhile), appended and fsynced
before `add_message` returns. The turn goes on with the spooled messages as its history
(`turn_context`), recall answers from the files (`IndexGuard`), and as soon as the
server answers again the spool is written to it, in order, each record in the
transaction of its insert together with a claim of its key (`deliveries`), so a replay
that dies half-way and runs again never stores a message twice. New messages wait behind
the spool, so a session's messages keep their order.

Each process writes its own file, `.chatmem/spool/<owner>.jsonl`, under a lock file held
for the process's life; a process that finds another's file with its lock free (the
writer died) replays that file too. Logged once per outage, and once when it is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from memory_core.base import safe_files
from memory_core.base.clock import (
    Clock,
    Sleep,
    format_when,
    parse_when,
    system_clock,
    system_sleep,
)
from memory_core.base.errors import (
    DatabaseBusy,
    DatabaseUnreachable,
    DatabaseUnwritable,
    StorageError,
)
from memory_core.base.merge_values import Change
from memory_core.base.retry import Backoff
from memory_core.base.scope import ScopeKey
from memory_core.base.sql import Connection, Db
from memory_core.config.memory import HistorySettings
from memory_core.storage.audit import AuditLog, audit_rows, insert_rows
from memory_core.storage.deliveries import claim_step
from memory_core.storage.history import HistoryStore, MessageIndexer
from memory_core.storage.sessions import (
    ArchiveState,
    NewMessage,
    Session,
    StoredMessage,
    TurnContext,
    sql_length,
)
from memory_core.storage.spool_records import (
    audit_record,
    history_record,
    read_records,
    remove_written,
)

log = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
OUTAGE = (DatabaseUnreachable, DatabaseBusy, DatabaseUnwritable)
"""The failures an audit row waits out in the spool: the database cannot take it now.
Any other `StorageError` (a broken statement) is raised, as it would be without a spool."""


@dataclass
class _Spooled:
    """What this process spooled and has not yet written to the database."""

    sessions: dict[str, Session] = field(default_factory=dict)
    messages: list[StoredMessage] = field(default_factory=list)

    def __bool__(self) -> bool:
        """Whether anything waits to be written."""
        return bool(self.sessions or self.messages)


class SpoolingHistory(HistoryStore):
    """`HistoryStore` with a local spool for the time the database is unreachable."""

    def __init__(
        self,
        db: Db,
        settings: HistorySettings,
        indexer: MessageIndexer | None,
        spool_dir: Path,
        *,
        sleep: Sleep = system_sleep,
    ) -> None:
        """`sleep` waits between tries to write the spool back."""
        super().__init__(db, settings, indexer)
        self._files = SpoolFiles(spool_dir)
        self._path = self._files.path
        self._spooled = _Spooled()
        self._seq = 0
        self._replaying = asyncio.Lock()
        self._writing = asyncio.Lock()
        """Orders appends to this process's file against its rewrite after a replay."""
        self._retry = Retrier(self.flush_spool, lambda: bool(self._spooled), sleep)
        self._outage = False

    # --- the spool file ---------------------------------------------------------------
    async def _spool(self, record: dict[str, Any]) -> None:
        async with self._writing:
            self._seq += 1
            record["seq"] = self._seq
            await asyncio.to_thread(self._files.append, record)
        self._unreachable_now()

    def _unreachable_now(self) -> None:
        if not self._outage:
            self._outage = True
            log.warning(
                "database unreachable: messages are kept in %s until it answers again",
                self._path,
            )
        self._retry.start()

    @property
    def pending(self) -> int:
        """Messages of this process waiting in the spool."""
        return len(self._spooled.messages)

    # --- the history, degraded ---------------------------------------------------------
    async def open_session(self, scope: ScopeKey, now: datetime) -> Session:
        if not self._spooled:
            with contextlib.suppress(DatabaseUnreachable):
                return await super().open_session(scope, now)
        elif await self.flush_spool():
            return await super().open_session(scope, now)
        for session in self._spooled.sessions.values():
            if session.scope == scope.value and session.status == "open":
                return session
        with contextlib.suppress(DatabaseUnreachable):
            current = await super().current_session(scope)
            if current is not None:
                return current
        session_id = f"{now.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:8]}"
        session = Session(session_id, scope.value, now, now, "open", 0, None, None)
        await self._spool(
            {"kind": "session", "id": session_id, "scope": scope.value, "at": format_when(now)}
        )
        self._spooled.sessions[session_id] = session
        return session

    async def add_message(
        self, message: NewMessage, *, replay_key: str | None = None
    ) -> StoredMessage:
        if replay_key is None and self._spooled:
            await self.flush_spool()  # the spool first: a session's messages keep their order
        if replay_key is not None or not self._spooled:
            try:
                return await super().add_message(message, replay_key=replay_key)
            except DatabaseUnreachable:
                if replay_key is not None:
                    raise
        record = {
            "kind": "message",
            "scope": message.scope.value,
            "session_id": message.session_id,
            "role": message.role,
            "content": message.content,
            "at": format_when(message.created_at),
            "speaker": message.speaker,
            "speaker_id": message.speaker_id,
            "meta": message.meta or {},
            "indexed": message.indexed,
            "used": list(message.used_entry_ids),
            "archived": message.archived.value,
        }
        await self._spool(record)
        stored = message.stored(-self._seq)  # not a database id: the message has none yet
        self._spooled.messages.append(stored)
        return stored

    async def turn_context(self, session_id: str, limit: int) -> TurnContext:
        try:
            context = await super().turn_context(session_id, limit)
        except DatabaseUnreachable:
            context = TurnContext([], 0)
        spooled = [m for m in self._spooled.messages if m.session_id == session_id]
        if not spooled:
            return context
        messages = (context.messages + spooled)[-limit:] if limit > 0 else []
        chars = context.chars + sum(sql_length(m.content) for m in spooled)
        return TurnContext(messages, chars)

    async def current_session(self, scope: ScopeKey) -> Session | None:
        for session in self._spooled.sessions.values():
            if session.scope == scope.value and session.status == "open":
                return session
        return await super().current_session(scope)

    async def get_session(self, session_id: str) -> Session | None:
        spooled = self._spooled.sessions.get(session_id)
        if spooled is not None:
            return spooled
        return await super().get_session(session_id)

    # --- writing the spool to the database ---------------------------------------------
    async def flush_spool(self) -> bool:
        """Write every spool this process may replay (its own, and those of processes
        that died) to the database; True when nothing of its own is left."""
        async with self._replaying:
            try:
                for path in await asyncio.to_thread(self._files.replayable):
                    await self._replay_file(path)
            except DatabaseUnreachable:
                return False
            own_left = bool(self._spooled)
            if not own_left and self._outage:
                self._outage = False
                log.warning("database reachable again: the spooled messages are written")
            return not own_left

    async def _replay_file(self, path: Path) -> None:
        own = path == self._path
        records, _ = await asyncio.to_thread(read_records, path, history_record)
        for record in records:
            if record["kind"] == "session":
                await self._replay_session(record)
                if own:
                    self._spooled.sessions.pop(str(record["id"]), None)
            elif record["kind"] == "message":
                message = NewMessage(
                    ScopeKey(str(record["scope"])),
                    str(record["session_id"]),
                    str(record["role"]),
                    str(record["content"]),
                    parse_when(str(record["at"])),
                    speaker=str(record.get("speaker", "")),
                    speaker_id=_text_or_none(record.get("speaker_id")),
                    meta=dict(record.get("meta") or {}),
                    indexed=bool(record.get("indexed")),
                    used_entry_ids=[str(i) for i in record.get("used") or ()],
                    archived=ArchiveState(str(record.get("archived", "false"))),
                )
                await super().add_message(message, replay_key=f"{path.stem}:{record['seq']}")
                if own and self._spooled.messages:
                    self._spooled.messages.pop(0)
        if own:
            async with self._writing:
                await asyncio.to_thread(remove_written, path, len(records), False, history_record)
        else:
            await asyncio.to_thread(remove_written, path, len(records), True, history_record)

    async def _replay_session(self, record: dict[str, Any]) -> None:
        session_id = str(record["id"])
        if await super().get_session(session_id) is not None:
            return
        try:
            await self.add_session(
                ScopeKey(str(record["scope"])), session_id, parse_when(str(record["at"]))
            )
        except DatabaseUnreachable:
            raise
        except StorageError:
            pass  # the id is taken: another process replayed it meanwhile

    async def close(self) -> None:
        """Try the spool once more; what is left stays on disk for the next process."""
        await self._retry.close()
        self._files.release()


class Retrier:
    """Writes a spool back on a backoff timer while anything of this process waits in
    it: one loop for messages and audit rows alike."""

    def __init__(
        self,
        flush: Callable[[], Awaitable[bool]],
        waiting: Callable[[], bool],
        sleep: Sleep = system_sleep,
    ) -> None:
        self._flush = flush
        """Writes what it can; True when nothing of this process is left."""
        self._waiting = waiting
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Keep retrying until the spool is written (no second loop if one runs)."""
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._until_written())

    async def _until_written(self) -> None:
        for wait in Backoff(RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS).waits():
            if not self._waiting():
                return
            await self._sleep(wait)
            if await self._flush():
                return

    async def close(self) -> None:
        """Stop the loop and try once more."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._waiting():
            await self._flush()


class SpoolFiles:
    """A directory of spools, one per process: `<owner>.jsonl` under `<owner>.lock`, held
    for the process's life once it spools anything, so another process can tell a live
    writer's spool from a dead one's (which it replays)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.owner = uuid.uuid4().hex
        self.path = directory / f"{self.owner}.jsonl"
        self._lock: FileLock | None = None

    def append(self, record: dict[str, Any]) -> None:
        """One record, on disk (fsynced) when this returns (blocking)."""
        if self._lock is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(self.directory / f"{self.owner}.lock", timeout=0)
            self._lock.acquire()
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        fd = safe_files.open_fd(self.directory, self.path, flags, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def replayable(self) -> list[Path]:
        """This process's spool, and the spools whose writer is gone (lock free)."""
        if not self.directory.is_dir():
            return []
        paths = []
        for path in sorted(self.directory.glob("*.jsonl")):
            if path == self.path:
                paths.append(path)
                continue
            lock = FileLock(path.with_suffix(".lock"), timeout=0)
            try:
                lock.acquire()
            except Timeout:
                continue
            lock.release()
            paths.append(path)
        return paths

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


class SpoolingAudit(AuditLog):
    """`AuditLog` that keeps the rows of a change made while the database is away (the
    memory file was written: its audit rows must not be lost) in a local spool, like
    `SpoolingHistory` keeps messages, and writes them when the server answers again: at
    the next change (spooled rows first, so the log keeps its order), on a retry timer,
    and at the next start of any process (a dead writer's spool). Each spooled change is
    written in one transaction with a claim of its key, so a replay that dies half-way
    and runs again never writes a row twice."""

    def __init__(
        self,
        db: Db,
        spool_dir: Path,
        *,
        clock: Clock = system_clock,
        sleep: Sleep = system_sleep,
    ) -> None:
        """`clock` dates the claim of a spooled change without rows; `sleep` waits
        between tries to write the spool back."""
        super().__init__(db)
        self._clock = clock
        self._files = SpoolFiles(spool_dir)
        self._seq = 0
        self._waiting = 0
        """Changes of this process in its spool, not yet written."""
        self._writing = asyncio.Lock()
        self._replaying = asyncio.Lock()
        self._retry = Retrier(self.flush_spool, lambda: self._waiting > 0, sleep)
        self._outage = False

    @property
    def pending(self) -> int:
        """Changes of this process waiting in its spool."""
        return self._waiting

    async def record(
        self, scope: ScopeKey, changes: Iterable[Change], source: str, at: datetime
    ) -> int:
        rows = audit_rows(scope, changes, source, at)
        if not rows:
            return 0
        if self._waiting:
            await self.flush_spool()
        if not self._waiting:
            try:
                await self._db.write(lambda conn: insert_rows(conn, rows))
                return len(rows)
            except OUTAGE as exc:
                if not self._outage:
                    self._outage = True
                    log.warning(
                        "audit rows are kept in %s until the database takes them: %s",
                        self._files.path,
                        exc,
                    )
        async with self._writing:
            self._seq += 1
            record = {"seq": self._seq, "rows": [list(r) for r in rows]}
            await asyncio.to_thread(self._files.append, record)
            self._waiting += 1
        self._retry.start()
        return len(rows)

    async def flush_spool(self) -> bool:
        """Write every audit spool this process may replay (its own, and those of
        processes that died); True when nothing of its own is left."""
        async with self._replaying:
            try:
                for path in await asyncio.to_thread(self._files.replayable):
                    await self._replay_file(path)
            except OUTAGE:
                return False
            if not self._waiting and self._outage:
                self._outage = False
                log.warning("database reachable again: the spooled audit rows are written")
            return not self._waiting

    async def _replay_file(self, path: Path) -> None:
        own = path == self._files.path
        records, _ = await asyncio.to_thread(read_records, path, audit_record)
        for record in records:
            rows = [tuple(r) for r in record["rows"]]
            at = parse_when(str(rows[0][0])) if rows else self._clock()
            claim = claim_step("spool", "audit", f"{path.stem}:{record['seq']}", at)

            await self._db.write(partial(_claimed_insert, claim=claim, rows=rows))
            if own:
                self._waiting -= 1
        if own:
            async with self._writing:
                await asyncio.to_thread(remove_written, path, len(records), False, audit_record)
        else:
            await asyncio.to_thread(remove_written, path, len(records), True, audit_record)

    async def close(self) -> None:
        """Try the spool once more; what is left stays on disk for the next process."""
        await self._retry.close()
        self._files.release()


def _claimed_insert(
    conn: Connection, claim: Callable[[Connection], bool], rows: list[tuple[Any, ...]]
) -> None:
    """Audit rows of a spooled change, unless a replay wrote them before (the claim)."""
    if claim(conn):
        insert_rows(conn, rows)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
