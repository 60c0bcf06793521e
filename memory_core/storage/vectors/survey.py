"""Which of a scope's chunks need a vector, and which vectors are stale.

What needs a vector is found cheaply after each write: a quick look at the chunks above the
last largest id seen, plus the newest few ids (re-read, since the newest id is the one
taken again after a delete). A full survey (every text hashed against its vector, page by
page) is kept for when chunks were deleted, another process wrote, a hit's text turned
out changed, or an hour passed, and rationed to 1% of the time for large scopes.

Apart from the backfill (backfill.py), which makes and stores what this finds: this
part only reads, and decides how much reading a scope is worth.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from memory_core.base.clock import Monotonic, Sleep, system_sleep
from memory_core.base.sql import Db
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.rows import ChunkText, VectorMeta

RECENT_IDS = 64
"""A quick look re-reads the texts of this many of the newest chunk ids. A new chunk takes
the largest id + 1, so an id is only ever taken again at the top: the newest chunk
deleted and written anew (an edit of the last memory) shows there, as a changed text."""
SURVEY_DUTY = 0.01
"""A full survey (every chunk's text hashed against its vector: 0.7-1 s per 100 000
chunks on the bench machine, in calls of under 50 ms) takes at most this share of the
time: the next waits 100 times as long as the last took. Wanted after chunks were deleted,
after another process wrote, after a hit's text turned out changed, and every
`SURVEY_EVERY` seconds."""
SMALL_SCOPE = 2_000
"""A scope this small is surveyed whenever wanted (a few milliseconds)."""
SURVEY_EVERY = 3600.0


@dataclass(slots=True)
class Watch:
    """What the last look at a scope saw, so the next backfill can look only at what is
    new: a chunk above `watermark` is new, and a scope whose count is not what the new
    chunks explain lost some (a full survey then drops their vectors)."""

    watermark: int
    count: int
    data_version: int
    surveyed_at: float
    cost: float
    due: bool = False
    """A full survey is wanted, when the duty allows."""
    forced: bool = False
    """A full survey at the next backfill, whatever it costs (`invalidate`)."""


Plan = tuple[list[ChunkText], list[int], Watch]
"""The chunks to embed, the vectors to drop, and the scope's watch (a backfill that stops
short marks it `due`, so a full survey finds the rest)."""


class Surveys:
    """Each scope's watch, for the vectors of one model.

    `schedule` starts a backfill of a scope: a survey put off for the duty's sake is
    started through it when its time comes, waited for with `sleep` (the wait is
    reckoned on `monotonic`, so both are the same clock)."""

    def __init__(
        self,
        db: Db,
        model: str,
        monotonic: Monotonic,
        schedule: Callable[[int], None],
        sleep: Sleep = system_sleep,
    ) -> None:
        self._db = db
        self._model = model
        self._monotonic = monotonic
        self._schedule = schedule
        self._sleep = sleep
        self._watch: dict[int, Watch] = {}
        self._timers: dict[int, asyncio.Task[None]] = {}
        self._closed = False

    def seen(self, sid: int) -> bool:
        """Whether this process has looked at the scope yet."""
        return sid in self._watch

    def want(self, sid: int) -> None:
        """A full survey at the scope's next backfill, when the duty allows (a hit's text
        turned out changed)."""
        if (watch := self._watch.get(sid)) is not None:
            watch.due = True

    def force(self, scope_id: int | None = None) -> None:
        """A full survey of the scope (or every scope) at its next backfill, whatever it
        costs."""
        for sid in [scope_id] if scope_id is not None else list(self._watch):
            if (watch := self._watch.get(sid)) is not None:
                watch.forced = True

    async def plan(self, sid: int) -> Plan:
        """What to embed and which vectors to drop: a quick look at the newest chunks,
        or a full survey of the scope when one is wanted and the duty allows."""
        now = self._monotonic()
        watch = self._watch.get(sid)
        if watch is None or watch.forced:
            return await self._survey(sid, now)
        chunks, known, seen = await self._db.read(
            partial(vectors.newer, sid=sid, after=max(0, watch.watermark - RECENT_IDS))
        )
        fresh = sum(1 for chunk in chunks if chunk.id > watch.watermark)
        if (
            seen.max_id < watch.watermark
            or seen.chunk_count != watch.count + fresh
            or seen.data_version != watch.data_version
            or now - watch.surveyed_at >= SURVEY_EVERY
        ):
            watch.due = True
        watch.watermark, watch.count = seen.max_id, seen.chunk_count
        if watch.due:
            wait = watch.surveyed_at + watch.cost / SURVEY_DUTY - now
            if seen.chunk_count <= SMALL_SCOPE or wait <= 0:
                return await self._survey(sid, now)
            self._survey_later(sid, wait)
        return _new_work(chunks, known, sid, self._model), [], watch

    async def _survey(self, sid: int, now: float) -> Plan:
        """Every chunk's text hashed against its vector, a page per database call."""
        started = time.perf_counter()
        # The counters first: a chunk written during the survey is above the watermark.
        seen = await self._db.read(partial(vectors.counters, sid=sid))
        ids: list[int] = []
        after = ("", 0)
        page_size = vectors.PAGE
        while True:
            listed = await self._db.read(
                partial(vectors.scope_ids, sid=sid, after=after, limit=page_size * 5)
            )
            ids += [chunk_id for _, chunk_id in listed]
            if len(listed) < page_size * 5:
                break
            after = listed[-1]
        ids.sort()
        stale = await self._db.read(partial(vectors.other_models, sid=sid, model=self._model))
        work: list[ChunkText] = []
        above = 0
        for start in range(0, max(len(ids), 1), page_size):
            page = ids[start : start + page_size]
            upto = page[-1] if start + page_size < len(ids) else 1 << 62
            texts, hashes = await self._db.read(
                partial(
                    vectors.survey_page,
                    sid=sid,
                    model=self._model,
                    ids=page,
                    above=above,
                    upto=upto,
                )
            )
            missing, gone = await asyncio.to_thread(_page_work, texts, hashes)
            work += missing
            stale += gone
            above = upto
        cost = time.perf_counter() - started
        watch = Watch(seen.max_id, seen.chunk_count, seen.data_version, now, cost)
        self._watch[sid] = watch
        return work, stale, watch

    def _survey_later(self, sid: int, wait: float) -> None:
        if self._closed or sid in self._timers:
            return
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()

            async def due() -> None:
                await self._sleep(wait)
                self._timers.pop(sid, None)
                self._schedule(sid)

            self._timers[sid] = loop.create_task(due(), name=f"chatmem-survey-{sid}")

    def close(self) -> list[asyncio.Task[None]]:
        """No survey put off any more starts a backfill; the waits cancelled (for the
        caller to await)."""
        self._closed = True
        timers = list(self._timers.values())
        self._timers.clear()
        for timer in timers:
            timer.cancel()
        return timers


def _page_work(
    texts: Sequence[ChunkText], hashes: dict[int, str]
) -> tuple[list[ChunkText], list[int]]:
    """Of one survey page: the chunks whose vector is missing or made from another text,
    and the vectors whose chunk is not among the scope's (pure; run in a worker thread)."""
    work = [c for c in texts if hashes.get(c.id) != vectors.text_hash(c.text)]
    present = {c.id for c in texts}
    return work, [chunk_id for chunk_id in hashes if chunk_id not in present]


def _new_work(
    chunks: Sequence[ChunkText], known: Sequence[VectorMeta], sid: int, model: str
) -> list[ChunkText]:
    """New chunks that no current vector of this scope and model covers yet."""
    current = {(v.chunk_id, v.text_hash) for v in known if v.scope_id == sid and v.model == model}
    return [c for c in chunks if (c.id, vectors.text_hash(c.text)) not in current]
