"""Chunk vectors made in the background, one backfill per scope.

Writers never wait for a model: `schedule(scope_id)` (the index calls it after every
write) starts, or joins, one background backfill per scope, which embeds the chunks that
have no vector (the vectors already made of the same texts first, the model for the
misses, in batches, each batch written in one transaction) and drops vectors whose chunk
is gone. A failing embedder is logged once and tried again later (`RETRY_WAITS`, waited
with the injected `sleep`); the chunks simply wait, and recall works by words meanwhile.
Which chunks need a vector is survey.py's to find.

A batch is written through a `VectorWriter`: `vectors.store` in one transaction here;
with pgvector, memory_core/storage/pg/vectors.py also writes each row's `embedding` column. The
owner of the in-memory matrices hears of every write (`on_stored`) to keep them current.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from functools import partial
from typing import Protocol

from memory_core.base.clock import Monotonic, Sleep, system_sleep
from memory_core.base.retry import OutageNotice, Steps
from memory_core.base.scope_names import scope_name
from memory_core.base.speaker_label import without_label
from memory_core.base.sql import Db
from memory_core.embedding.base import Embedder, EmbeddingError
from memory_core.storage.interfaces import CatchUp, Progress
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.precedence import Precedence
from memory_core.storage.vectors.rows import ChunkText, Stored
from memory_core.storage.vectors.survey import Surveys

log = logging.getLogger(__name__)

RETRY_WAITS = Steps((30.0, 60.0, 120.0, 300.0, 600.0))
"""Waits before trying a failed backfill again, by failures in a row."""
CACHE_GROUP = 512
"""Texts looked up among the vectors already made, per database call."""
BATCH_CHARS = 32_000
"""Characters per model call at most, beside `embedding.batch_size` texts (a text alone
may pass it: it holds at most 2 × `vectors.EMBED_CHARS`): a batch of long texts takes the
local model about 5 s and a few tens of MB, not 64 × 4 000 characters' worth."""
STOP_SECONDS = 10.0
"""`close` waits this long for the batch being embedded to be written (a second or so
for a batch of short texts, `BATCH_CHARS` bounds a batch of long ones; the local model's
thread could not be stopped anyway). Then the rest is cancelled."""


class VectorWriter(Protocol):
    """Where a backfill writes: one batch's vectors (with the chunks they were made for),
    the vectors the model just made (text hash, float32 bytes) and the stale vectors to
    drop, in one transaction."""

    async def write(
        self,
        sid: int,
        model: str,
        items: list[tuple[ChunkText, bytes]],
        cache_rows: list[tuple[str, bytes]],
        stale: list[int],
    ) -> Stored: ...


class SqlVectorWriter:
    """`vectors.store`, run as one transaction of the database."""

    def __init__(self, db: Db) -> None:
        self._db = db

    async def write(
        self,
        sid: int,
        model: str,
        items: list[tuple[ChunkText, bytes]],
        cache_rows: list[tuple[str, bytes]],
        stale: list[int],
    ) -> Stored:
        return await self._db.write(
            partial(
                vectors.store,
                sid=sid,
                model=model,
                items=items,
                cache_rows=cache_rows,
                stale=stale,
            )
        )


class Backfills:
    """The backfills of every scope of one database, made by one embedder (which the
    caller closes)."""

    def __init__(
        self,
        db: Db,
        embedder: Embedder,
        writer: VectorWriter,
        on_stored: Callable[[int, Stored], None],
        *,
        batch_size: int,
        monotonic: Monotonic,
        sleep: Sleep = system_sleep,
    ) -> None:
        """`on_stored(scope id, what was written)` runs after every write, on the loop;
        `sleep` waits out `RETRY_WAITS`."""
        self._db = db
        self._embedder = embedder
        self._model = embedder.name
        self._writer = writer
        self._on_stored = on_stored
        self._batch_size = max(1, batch_size)
        self._surveys = Surveys(db, self._model, monotonic, self.schedule, sleep)
        self._filling: dict[int, asyncio.Lock] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._again: set[int] = set()
        self._sleep = sleep
        self._retries: dict[int, asyncio.Task[None]] = {}
        self._failures: dict[int, int] = {}
        self._failing = False
        self._behind: set[int] = set()
        """Scopes a search went on without all their vectors (warned once)."""
        self._precedence = Precedence()
        self._closed = False
        self._outage = OutageNotice(log, "vector backfill")

    def schedule(self, scope_id: int) -> None:
        """Backfill the scope in the background; joins a backfill already under way (it
        runs once more when it ends, to take in what was written meanwhile)."""
        if self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if scope_id in self._tasks:
            self._again.add(scope_id)
            return
        self._tasks[scope_id] = loop.create_task(
            self._run(scope_id), name=f"chatmem-vectors-{scope_id}"
        )

    async def _run(self, scope_id: int) -> None:
        try:
            while True:
                self._again.discard(scope_id)
                try:
                    await self.backfill(scope_id)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a background task: log it, never crash the loop
                    if not self._outage.failed(exc):
                        log.warning(
                            "vectors of scope %s not updated: %s", scope_name(scope_id), exc
                        )
                else:
                    self._outage.worked()
                if scope_id not in self._again or self._closed:
                    break
        finally:
            self._tasks.pop(scope_id, None)
            self._behind.discard(scope_id)  # caught up: a later lag is waited for again
            self._precedence.done(scope_id)

    def survey(self, scope_id: int) -> None:
        """Backfill the scope with a full survey (when the duty allows): a hit's text
        turned out changed (an id taken again after its chunk was deleted)."""
        self._surveys.want(scope_id)
        self.schedule(scope_id)

    def invalidate(self, scope_id: int | None = None) -> None:
        """Survey the scope (or every scope) in full at its next backfill."""
        self._surveys.force(scope_id)

    async def settle(self, scope_id: int, within: float) -> bool:
        """Wait at most `within` seconds for the scope's vectors to cover what was written
        before this call: for the backfill under way to end, after starting one when this
        process has not looked at the scope yet (a command that just started, or a scope
        only written by other processes). Whether they do; a search goes on either way,
        with the vectors there are (said once while they are behind).

        Without this, a short-lived process ranked by words alone: `chatmem search` ran
        before its own backfill had read what the bot wrote, or made the vectors of what
        a process without an embedder wrote, and its answer differed from the bot's
        recall of the same question."""
        if self._closed:
            return False
        if not self._surveys.seen(scope_id) and scope_id not in self._tasks:
            self.schedule(scope_id)
        task = self._tasks.get(scope_id)
        if task is None:
            self._behind.discard(scope_id)
            return True
        if scope_id in self._behind:
            # Waited once already for this backfill (a long one, or an embedder that
            # fails and backs off): every later search would pay the same wait again.
            return False
        self._precedence.waited_on(scope_id)  # its batches before other scopes'
        done, _ = await asyncio.wait({task}, timeout=within)
        if done:
            self._behind.discard(scope_id)
        elif scope_id not in self._behind:
            self._behind.add(scope_id)
            log.warning(
                "vectors of scope %s are still being made: ranked with those made so far",
                scope_name(scope_id),
            )
        return bool(done)

    async def drain(self) -> None:
        """Wait for the backfills under way (and any they start) to end."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def backfill(self, scope_id: int, *, limit: int | None = None) -> int:
        """Embed the scope's chunks that lack a current vector, drop vectors of chunks gone;
        return how many vectors were stored. An embedder failure keeps what earlier
        batches stored, is logged (once while it lasts) and tried again later."""
        lock = self._filling.setdefault(scope_id, asyncio.Lock())
        async with lock:
            progress = [0]
            try:
                await self._backfill(scope_id, limit, progress)
            except EmbeddingError as exc:
                self._failed(scope_id, exc)
            else:
                self._recovered(scope_id)
            return progress[0]

    async def catch_up(
        self, scope_id: int, *, most: int | None, progress: Progress | None = None
    ) -> CatchUp:
        """Make the scope's missing vectors now, reporting `progress(stored, total)` after
        each batch, unless the model would have to make more than `most` of them (the
        vectors already made of the same texts, a reindex's, cost nothing and do not
        count). For a command about to search (`LazyVectors.catch_up`): a model failure is
        returned, not logged nor tried again later, since the command says it itself."""
        lock = self._filling.setdefault(scope_id, asyncio.Lock())
        async with lock:
            work, stale, watch = await self._surveys.plan(scope_id)
            if most is not None and len(work) > most:
                needed = await self._uncached(work)
                if needed > most:
                    watch.forced = True  # what this survey found is still to make
                    return CatchUp(missing=needed, made=0, done=False)
            if stale:
                await self._write(scope_id, [], [], stale)
            stored = [0]
            total = len(work)

            def report(done: int) -> None:
                if progress is not None:
                    progress(done, total)

            try:
                for start in range(0, len(work), CACHE_GROUP):
                    group = work[start : start + CACHE_GROUP]
                    await self._embed_group(scope_id, group, stored, report)
            except EmbeddingError as exc:
                watch.forced = True
                return CatchUp(missing=len(work), made=stored[0], done=False, failure=str(exc))
            except BaseException:
                watch.forced = True
                raise
            return CatchUp(missing=len(work), made=stored[0], done=not self._closed)

    async def _uncached(self, work: list[ChunkText]) -> int:
        """How many of `work`'s texts have no vector made yet (by any scope)."""
        needed = 0
        for start in range(0, len(work), CACHE_GROUP):
            keys = [vectors.text_hash(chunk.text) for chunk in work[start : start + CACHE_GROUP]]
            hits = await self._db.read(partial(vectors.cached, model=self._model, hashes=keys))
            needed += sum(1 for key in keys if key not in hits)
        return needed

    async def _backfill(self, sid: int, limit: int | None, progress: list[int]) -> None:
        work, stale, watch = await self._surveys.plan(sid)
        truncated = limit is not None and len(work) > limit
        if limit is not None:
            work = work[:limit]
        if stale:
            await self._write(sid, [], [], stale)
        try:
            for start in range(0, len(work), CACHE_GROUP):
                if self._closed:
                    return
                group = work[start : start + CACHE_GROUP]
                await self._embed_group(sid, group, progress)
        except BaseException:
            watch.due = True  # the rest is found by the next full survey
            raise
        if truncated:
            watch.due = True

    async def _embed_group(
        self,
        sid: int,
        group: list[ChunkText],
        progress: list[int],
        report: Callable[[int], None] | None = None,
    ) -> None:
        """One cache lookup for the group, the model for its misses batch by batch, one
        write per batch; counts the vectors stored in `progress[0]` as it goes (and
        tells `report` the count after each batch)."""
        keys = [vectors.text_hash(chunk.text) for chunk in group]
        hits = await self._db.read(partial(vectors.cached, model=self._model, hashes=keys))
        for batch in _batches(list(zip(group, keys, strict=True)), self._batch_size):
            if self._closed:
                return  # closing: the batch embedded is written, no other begins
            found = {key: hits[key] for _, key in batch if key in hits}
            if found and self._embedder.dim:
                size = self._embedder.dim * 4
                found = {key: vec for key, vec in found.items() if len(vec) == size}
            misses = [(chunk, key) for chunk, key in batch if key not in found]
            fresh: dict[str, bytes] = {}
            if misses:
                await self._precedence.turn(sid)
                rows = await self._embedder.embed(
                    [without_label(chunk.text) for chunk, _ in misses]
                )
                if rows.shape[0] != len(misses):
                    raise EmbeddingError(
                        f"{self._model} returned {rows.shape[0]} vectors for {len(misses)} texts"
                    )
                fresh = {key: rows[i].tobytes() for i, (_, key) in enumerate(misses)}
            items = [(chunk, found.get(key) or fresh[key]) for chunk, key in batch]
            result = await self._write(sid, items, list(fresh.items()), [])
            progress[0] += len(result.rows)
            if report is not None:
                report(progress[0])

    async def _write(
        self,
        sid: int,
        items: list[tuple[ChunkText, bytes]],
        cache_rows: list[tuple[str, bytes]],
        stale: list[int],
    ) -> Stored:
        result = await self._writer.write(sid, self._model, items, cache_rows, stale)
        self._on_stored(sid, result)
        return result

    def _failed(self, sid: int, exc: EmbeddingError) -> None:
        failures = self._failures.get(sid, 0) + 1
        self._failures[sid] = failures
        delay = RETRY_WAITS.wait(failures)
        if not self._failing:
            self._failing = True
            log.warning(
                "embedding failed, recall works by words alone until it works again"
                " (trying again in %.0f s): %s",
                delay,
                exc,
            )
        else:
            log.debug("embedding still failing for scope %s: %s", scope_name(sid), exc)
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            if (old := self._retries.pop(sid, None)) is not None:
                old.cancel()
            self._retries[sid] = loop.create_task(
                self._retry_after(sid, delay), name=f"chatmem-vectors-retry-{sid}"
            )

    async def _retry_after(self, sid: int, delay: float) -> None:
        await self._sleep(delay)
        if self._retries.get(sid) is asyncio.current_task():
            del self._retries[sid]
        self.schedule(sid)

    def _recovered(self, sid: int) -> None:
        self._failures.pop(sid, None)
        if (retry := self._retries.pop(sid, None)) is not None:
            retry.cancel()
        if self._failing and not self._failures:
            self._failing = False
            log.info("embedding works again")

    async def close(self) -> None:
        """Stop the backfills and retries. A backfill ends after the batch it is
        embedding, which is written (within `STOP_SECONDS`); then the rest is cancelled."""
        self._closed = True
        self._precedence.release()
        retries = self._surveys.close() + list(self._retries.values())
        self._retries.clear()
        for retry in retries:
            retry.cancel()
        if backfills := list(self._tasks.values()):
            await asyncio.wait(backfills, timeout=STOP_SECONDS)
        tasks = [*self._tasks.values(), *retries]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _batches(
    items: list[tuple[ChunkText, str]], size: int, chars: int = BATCH_CHARS
) -> list[list[tuple[ChunkText, str]]]:
    """`items` in order, cut into batches of at most `size` texts and, past its first
    text, `chars` characters."""
    out: list[list[tuple[ChunkText, str]]] = []
    used = 0
    for item in items:
        length = len(item[0].text)
        if not out or len(out[-1]) >= size or used + length > chars:
            out.append([])
            used = 0
        out[-1].append(item)
        used += length
    return out
