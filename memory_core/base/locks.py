"""Two layers of locking for one workspace shared by a bot, the TUI and the CLI.

An `asyncio.Lock` serialises tasks of one process without touching threads; a file lock
(taken in a worker thread, because acquiring it blocks) serialises processes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol, TypeVar

from filelock import FileLock, Timeout

from memory_core.base import safe_files
from memory_core.base.atomic import write_error
from memory_core.base.errors import DatabaseUnreachable, FileRefused

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")
log = logging.getLogger(__name__)
LOCK_TIMEOUT_SECONDS = 60.0
"""How long a write waits for another process's lock before it gives up (Timeout)."""


class ProcessLocks(Protocol):
    """The cross-process layer: named locks that exclude other processes (blocking calls,
    made on worker threads). A handle is whatever `give_back` needs."""

    fast_path: bool
    """Whether `try_lock_file` on the lock's path excludes the same holders (file locks):
    a daily append then takes it inline instead of through a thread."""

    def take(self, name: str) -> object:
        """Wait for `name` (up to the registry's timeout, then `filelock.Timeout`)."""
        ...

    def try_take(self, name: str) -> object | None:
        """`name` if no one holds it, else None, without waiting."""
        ...

    def give_back(self, handle: object) -> None: ...


class FileLocks:
    """A lock file per name in the workspace's lock directory (`filelock`, i.e. `flock`):
    every process that mounts the workspace sees them."""

    fast_path = True

    def __init__(self, directory: Path, timeout: float) -> None:
        self._directory = directory
        self._timeout = timeout
        self._locks: dict[str, FileLock] = {}

    def _lock(self, name: str) -> FileLock:
        lock = self._locks.get(name)
        if lock is None:
            self._directory.mkdir(parents=True, exist_ok=True)
            path = self._directory / f"{name}.lock"
            # The folder is checked when the workspace opens; the file must be no link
            # (filelock truncates what it opens) and no FIFO.
            safe_files.check_file(self._directory, path)
            if path.is_symlink():
                raise FileRefused(f"refused lock file {path}: a link")
            lock = FileLock(path, timeout=self._timeout, thread_local=False)
            self._locks[name] = lock
        return lock

    def take(self, name: str) -> object:
        lock = self._lock(name)
        _take(lock)
        return lock

    def try_take(self, name: str) -> object | None:
        lock = self._lock(name)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return None
        except OSError as exc:
            raise write_error("nothing changed", lock.lock_file, exc) from exc
        return lock

    def give_back(self, handle: object) -> None:
        assert isinstance(handle, FileLock)
        handle.release()


class Health(Protocol):
    """Whether the database was found unreachable a moment ago (`PgDatabase`)."""

    def is_down(self) -> bool: ...
    def mark_down(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Taken:
    by: ProcessLocks
    handle: object


class FallbackLocks:
    """`primary` (the database's advisory locks) while it can be reached, the lock files
    of `fallback` while it cannot: writes of the memory files must not stop with the
    database. During an outage every process of the workspace falls back alike; after
    one, `primary` is tried again once `health` no longer counts the database as down
    (`PgDatabase.is_down`: `DOWN_SECONDS` after the last failure)."""

    fast_path = False

    def __init__(self, primary: ProcessLocks, fallback: ProcessLocks, health: Health) -> None:
        self.primary = primary
        self.fallback = fallback
        self._health = health
        self._warned = False

    def _which(self) -> ProcessLocks:
        if self._health.is_down():
            return self.fallback
        self._warned = False
        return self.primary

    def _down(self, exc: Exception) -> None:
        self._health.mark_down()
        if not self._warned:
            self._warned = True
            log.warning("locks fall back to lock files while the database is away: %s", exc)

    def take(self, name: str) -> object:
        chosen = self._which()
        if chosen is self.primary:
            try:
                return _Taken(chosen, chosen.take(name))
            except DatabaseUnreachable as exc:
                self._down(exc)
        return _Taken(self.fallback, self.fallback.take(name))

    def try_take(self, name: str) -> object | None:
        chosen = self._which()
        if chosen is self.primary:
            try:
                handle = chosen.try_take(name)
                return None if handle is None else _Taken(chosen, handle)
            except DatabaseUnreachable as exc:
                self._down(exc)
        handle = self.fallback.try_take(name)
        return None if handle is None else _Taken(self.fallback, handle)

    def give_back(self, handle: object) -> None:
        assert isinstance(handle, _Taken)
        handle.by.give_back(handle.handle)


class LockRegistry:
    """One asyncio lock and one process lock per lock name, created on first use.

    The process layer is lock files by default; a workspace whose processes share a
    PostgreSQL database uses its advisory locks instead (`use`), which hold across hosts
    without a shared file system's locking.
    """

    def __init__(self, directory: Path, timeout: float = LOCK_TIMEOUT_SECONDS) -> None:
        self._directory = directory
        self._timeout = timeout
        self._async_locks: dict[str, asyncio.Lock] = {}
        self.process: ProcessLocks = FileLocks(directory, timeout)

    def use(self, process: ProcessLocks) -> None:
        """Exclude other processes through `process` from now on."""
        self.process = process

    @property
    def fast_path(self) -> bool:
        return self.process.fast_path

    @asynccontextmanager
    async def hold_local(self, name: str) -> AsyncIterator[Path]:
        """Only the in-process layer of `name`; yields the path of its lock file for a
        caller that takes it itself without waiting (`try_lock_file`), on a thread of its
        choosing. Only where `fast_path` holds: the lock file is the process layer."""
        async with self._async_locks.setdefault(name, asyncio.Lock()):
            self._directory.mkdir(parents=True, exist_ok=True)
            yield self._directory / f"{name}.lock"

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Hold `name` against other tasks of this process and against other processes."""
        local = self._async_locks.setdefault(name, asyncio.Lock())
        async with local:
            process = self.process
            handle = await _run_holding(process, partial(process.take, name))
            try:
                yield
            finally:
                await _give_back(process, handle)

    @asynccontextmanager
    async def try_hold(self, name: str) -> AsyncIterator[bool]:
        """`name` if no other task or process holds it now (True), else nothing (False):
        for work that one process of several should do, such as a daily schedule."""
        local = self._async_locks.setdefault(name, asyncio.Lock())
        if local.locked():
            yield False
            return
        async with local:
            process = self.process
            handle = await _run_holding(process, partial(process.try_take, name))
            if handle is None:
                yield False
                return
            try:
                yield True
            finally:
                await _give_back(process, handle)

    @asynccontextmanager
    async def hold_running(self, name: str, work: Callable[[], T]) -> AsyncIterator[T]:
        """`hold`, with the blocking `work()` run right after the process lock is taken,
        in the same worker-thread call: one thread hop instead of two for a short locked
        job such as appending a daily note. Yields what `work` returned; if it raises, the
        lock is released and the exception propagates."""
        local = self._async_locks.setdefault(name, asyncio.Lock())
        async with local:
            process = self.process

            def locked() -> tuple[object, T]:
                handle = process.take(name)
                try:
                    return handle, work()
                except BaseException:
                    process.give_back(handle)
                    raise

            handle, result = await _run_holding(process, locked)
            try:
                yield result
            finally:
                await _give_back(process, handle)


async def _give_back(process: ProcessLocks, handle: object) -> None:
    """Release on the loop for a lock file (a system call), on a thread otherwise (a round
    trip to the database)."""
    if process.fast_path:
        process.give_back(handle)
    else:
        await asyncio.shield(asyncio.to_thread(process.give_back, handle))


def try_lock_file(path: Path) -> int | None:
    """Take the lock file at `path` if no one holds it, without waiting; the descriptor
    to pass to `unlock_file`, or None when it is held (blocking calls: use a thread).

    The same `flock` that filelock takes, so the two exclude each other, but about a
    hundred times cheaper than filelock's acquire and release (~10 us against ~150 us):
    a daily-note append takes it on every call. Where `flock` does not exist this always
    says "held", and callers take their waiting path through filelock instead.
    """
    if fcntl is None:  # pragma: no cover - not POSIX
        return None
    # A lock file is never a link or a FIFO (`safe_files`): neither is followed or waited on.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    if os.fstat(fd).st_nlink == 0:  # unlinked while we opened it: it guards no name now
        unlock_file(fd)
        return None
    return fd


def unlock_file(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _take(lock: FileLock) -> None:
    """`lock.acquire`; a lock file that cannot be made or opened (a read-only or full
    workspace) is a MemoryFileError line: every write takes its lock first, so this is where
    such a workspace shows, before any data is touched."""
    try:
        lock.acquire()
    except Timeout:
        raise
    except OSError as exc:
        raise write_error("nothing changed", lock.lock_file, exc) from exc


async def _run_holding(process: ProcessLocks, locked: Callable[[], T]) -> T:
    """Run `locked` (which takes a lock of `process` and keeps it unless it raises) in a
    worker thread.

    If the waiting task is cancelled, the thread still finishes; the lock it then holds
    must be given back.
    """
    running = asyncio.ensure_future(asyncio.to_thread(locked))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:

        def release_once_done(done: asyncio.Future[T]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            handle = done.result()
            if isinstance(handle, tuple):  # hold_running: (handle, work's result)
                handle = handle[0]
            if handle is None:
                return
            if process.fast_path:
                process.give_back(handle)
            else:
                asyncio.get_running_loop().run_in_executor(None, process.give_back, handle)

        running.add_done_callback(release_once_done)
        raise
