"""Two layers of locking for one workspace shared by a bot, the TUI and the CLI.

An `asyncio.Lock` serialises tasks of one process without touching threads; a file lock
(taken in a worker thread, because acquiring it blocks) serialises processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock, Timeout

T = TypeVar("T")


class LockRegistry:
    """One asyncio lock and one file lock per lock name, created on first use."""

    def __init__(self, directory: Path, timeout: float = 60.0) -> None:
        self._directory = directory
        self._timeout = timeout
        self._async_locks: dict[str, asyncio.Lock] = {}
        self._file_locks: dict[str, FileLock] = {}

    def _file_lock(self, name: str) -> FileLock:
        lock = self._file_locks.get(name)
        if lock is None:
            self._directory.mkdir(parents=True, exist_ok=True)
            lock = FileLock(
                self._directory / f"{name}.lock", timeout=self._timeout, thread_local=False
            )
            self._file_locks[name] = lock
        return lock

    @asynccontextmanager
    async def hold_local(self, name: str) -> AsyncIterator[FileLock]:
        """Only the in-process layer of `name`; yields its file lock for a caller that
        takes it itself without blocking (`try_take`) on a thread of its choosing."""
        async with self._async_locks.setdefault(name, asyncio.Lock()):
            yield self._file_lock(name)

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Hold `name` against other tasks of this process and against other processes."""
        local = self._async_locks.setdefault(name, asyncio.Lock())
        async with local:
            file_lock = self._file_lock(name)
            await _acquire(file_lock)
            try:
                yield
            finally:
                file_lock.release()

    @asynccontextmanager
    async def hold_running(self, name: str, work: Callable[[], T]) -> AsyncIterator[T]:
        """`hold`, with the blocking `work()` run right after the file lock is taken, in
        the same worker-thread call: one thread hop instead of two for a short locked job
        such as appending a daily note. Yields what `work` returned; if it raises, the
        lock is released and the exception propagates."""
        local = self._async_locks.setdefault(name, asyncio.Lock())
        async with local:
            file_lock = self._file_lock(name)

            def locked() -> T:
                file_lock.acquire()
                try:
                    return work()
                except BaseException:
                    file_lock.release()
                    raise

            result = await _run_holding(file_lock, locked)
            try:
                yield result
            finally:
                file_lock.release()


def try_take(lock: FileLock) -> bool:
    """Take `lock` if no other process holds it, without waiting (blocking call)."""
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True


async def _acquire(lock: FileLock) -> None:
    """Take `lock` in a worker thread.

    If the waiting task is cancelled, the thread still gets the lock later; it must then be
    released, or this process would hold it (and block every other process) for good.
    """
    taking = asyncio.ensure_future(asyncio.to_thread(lock.acquire))
    try:
        await asyncio.shield(taking)
    except asyncio.CancelledError:

        def release_once_taken(done: asyncio.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None:
                lock.release()

        taking.add_done_callback(release_once_taken)
        raise


async def _run_holding(lock: FileLock, locked: Callable[[], T]) -> T:
    """Run `locked` (which takes `lock` and keeps it unless it raises) in a worker thread.

    As in `_acquire`: if the waiting task is cancelled, the thread still finishes; the
    lock it then holds must be released.
    """
    running = asyncio.ensure_future(asyncio.to_thread(locked))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:

        def release_once_done(done: asyncio.Future[T]) -> None:
            if not done.cancelled() and done.exception() is None:
                lock.release()

        running.add_done_callback(release_once_done)
        raise
