"""Chunk vectors: made in the background, searched exactly from memory.

Writers never wait for a model: `schedule(scope_id)` (the index calls it after every
write) starts, or joins, one background backfill per scope, which embeds the chunks that
have no vector (the cache first, the model for the misses, in batches, each batch written
in one transaction) and drops vectors whose chunk is gone. A failing embedder is logged
once and tried again later with backoff; the chunks simply wait, and recall works by words
meanwhile.

What needs a vector is found cheaply after each write: a quick look at the chunks above the
last largest id seen, plus the newest few ids (re-read, since the newest id is the one
taken again after a delete). A full survey (every text hashed against its vector, page by
page) is kept for when chunks were deleted, another process wrote, a hit's text turned
out changed, or an hour passed, and rationed to 1% of the time for large scopes.

Search is exact up to `ANN_MIN_ROWS` rows: a scope's vectors sit in one float32 matrix in memory (loaded page by page
from SQLite, then kept up to date by this process's own backfills, and loaded again when
the scope's version in the database shows that another process changed them); a query is
one matrix-vector product and a partial sort. The product reads the whole matrix, so it
costs what memory bandwidth allows: about 20 ms for 100 000 512-d rows (205 MB) on the
two-core bench machine, 0.5 ms for 10 000. Every hit is read back through the `chunks`
table before it is returned (its scope, visibility, filters and text hash), so a stale
matrix can cost a hit, never show another scope's chunk or a changed one.

A scope of `ANN_MIN_ROWS` or more also gets an HNSW graph (memory_core/index/ann.py),
built in a worker thread from the matrix the first time it is searched or loaded (one
build at a time; minutes for 100 000 rows); exact search answers until it is ready, and
never waits for it. Then a search asks the graph for
`k * CANDIDATES` chunk ids, adds the rows the graph does not hold yet (the tail appended
since it was built), scores those exactly from the matrix and goes on as above: the
scores stay exact cosines and every hit is still confirmed through `chunks`. Filters
apply to the candidates; when too few pass, the search is done exactly. This process's
own writes reach the graph in the background, a few rows per lock hold; a graph goes
with its matrix (eviction, a load afresh) and survives compaction (it holds chunk ids).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memory_core.clock import Monotonic
from memory_core.embedding.base import Embedder, EmbeddingError
from memory_core.index import ann, vectors
from memory_core.index.ann import ANN_MIN_ROWS, CANDIDATES, Graph
from memory_core.index.vector_matrix import VectorMatrix
from memory_core.index.vectors import ChunkText, Stored, VectorMeta
from memory_core.sql import Db

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]
    Ids = npt.NDArray[np.int64]

log = logging.getLogger(__name__)

INLINE_ROWS = 10_000
"""Above this many rows the product runs in a worker thread. bench/embedder_bench.py, 512-d:
10 000 rows take about 0.5 ms inline, less than the hop to a thread adds; 20 000 rows
already hold the event loop 2.5 ms (the matrix no longer fits the CPU's cache)."""
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
RETRY_SECONDS = (30.0, 60.0, 120.0, 300.0, 600.0)
"""Waits before trying a failed backfill again."""
PAGE = 1_000
"""Chunks per database call of a survey or a matrix load: each call stays a few
milliseconds, so chat turns are served in between."""
CACHE_GROUP = 512
"""Texts looked up in the embedding cache per database call."""
QUERY_CACHE = 256
MAX_BYTES = 1 << 30
"""Memory for the matrices of all scopes; the least recently searched go first."""
BATCH_CHARS = 32_000
"""Characters per model call at most, beside `embedding.batch_size` texts (a text alone
may pass it: it holds at most 2 × `vectors.EMBED_CHARS`): a batch of long texts takes the
local model about 5 s and a few tens of MB, not 64 × 4 000 characters' worth."""
STOP_SECONDS = 10.0
"""`close` waits this long for the batch being embedded to be written (a second or so
for a batch of short texts, `BATCH_CHARS` bounds a batch of long ones; the local model's
thread could not be stopped anyway). Then the rest is cancelled."""


class _Miss(enum.Enum):
    """Why a search found no answer from the scores it had."""

    STALE = "the scope changed under the matrix: load it again"
    TOO_FEW = "the graph's candidates ran out before k hits: search exactly"


@dataclass(slots=True)
class _Watch:
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


class VectorIndex:
    """The vectors of every scope of one database, made by one embedder.

    `close()` closes the embedder too: the index owns the embedder it was given.
    """

    def __init__(
        self,
        db: Db,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        inline_rows: int = INLINE_ROWS,
        ann_min_rows: int | None = ANN_MIN_ROWS,
        max_bytes: int = MAX_BYTES,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        """`ann_min_rows`: scopes this large get a graph (None: never; nor without
        usearch installed). `monotonic` times the surveys (`SURVEY_EVERY`, the duty)."""
        self._db = db
        self.embedder = embedder
        self._batch_size = max(1, batch_size)
        self._inline_rows = inline_rows
        self._ann_min_rows = ann_min_rows if ann.available() else None
        self._graph_tasks: dict[int, asyncio.Task[None]] = {}
        self._graph_again: set[int] = set()
        self._building = asyncio.Lock()
        """One build at a time: each takes a core (and a worker thread) for minutes."""
        self._max_bytes = max_bytes
        self._monotonic = monotonic
        self._watch: dict[int, _Watch] = {}
        self._matrices: OrderedDict[int, VectorMatrix] = OrderedDict()
        self._loading: dict[int, asyncio.Lock] = {}
        self._filling: dict[int, asyncio.Lock] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._again: set[int] = set()
        self._retries: dict[int, asyncio.TimerHandle] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._failures: dict[int, int] = {}
        self._failing = False
        self._behind: set[int] = set()
        """Scopes a search went on without all their vectors (warned once)."""
        self._queries: OrderedDict[str, Floats] = OrderedDict()
        self._closed = False

    @property
    def model(self) -> str:
        return self.embedder.name

    # --- making vectors ----------------------------------------------------------------
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
                    log.warning("vectors of scope %d not updated: %s", scope_id, exc)
                if scope_id not in self._again or self._closed:
                    break
        finally:
            self._tasks.pop(scope_id, None)
            self._behind.discard(scope_id)  # caught up: a later lag is waited for again

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
        if scope_id not in self._watch and scope_id not in self._tasks:
            self.schedule(scope_id)
        task = self._tasks.get(scope_id)
        if task is None:
            self._behind.discard(scope_id)
            return True
        if scope_id in self._behind:
            # Waited once already for this backfill (a long one, or an embedder that
            # fails and backs off): every later search would pay the same wait again.
            return False
        done, _ = await asyncio.wait({task}, timeout=within)
        if done:
            self._behind.discard(scope_id)
        elif scope_id not in self._behind:
            self._behind.add(scope_id)
            log.warning(
                "vectors of scope %d are still being made: ranked with those made so far",
                scope_id,
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

    async def _backfill(self, sid: int, limit: int | None, progress: list[int]) -> None:
        work, stale, watch = await self._plan(sid)
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

    async def _plan(self, sid: int) -> tuple[list[ChunkText], list[int], _Watch]:
        """What to embed and which vectors to drop: a quick look at the newest chunks,
        or a full survey of the scope when one is wanted and the duty allows."""
        now = self._monotonic()
        watch = self._watch.get(sid)
        if watch is None or watch.forced:
            return await self._survey(sid, now)
        chunks, known, seen = await self._db.call(
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
        return _new_work(chunks, known, sid, self.model), [], watch

    async def _survey(self, sid: int, now: float) -> tuple[list[ChunkText], list[int], _Watch]:
        """Every chunk's text hashed against its vector, a page per database call."""
        started = time.perf_counter()
        # The counters first: a chunk written during the survey is above the watermark.
        seen = await self._db.call(partial(vectors.counters, sid=sid))
        ids: list[int] = []
        after = ("", 0)
        while True:
            listed = await self._db.call(
                partial(vectors.scope_ids, sid=sid, after=after, limit=PAGE * 5)
            )
            ids += [chunk_id for _, chunk_id in listed]
            if len(listed) < PAGE * 5:
                break
            after = listed[-1]
        ids.sort()
        stale = await self._db.call(partial(vectors.other_models, sid=sid, model=self.model))
        work: list[ChunkText] = []
        above = 0
        for start in range(0, max(len(ids), 1), PAGE):
            page = ids[start : start + PAGE]
            upto = page[-1] if start + PAGE < len(ids) else 1 << 62
            texts, hashes = await self._db.call(
                partial(
                    vectors.survey_page,
                    sid=sid,
                    model=self.model,
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
        watch = _Watch(seen.max_id, seen.chunk_count, seen.data_version, now, cost)
        self._watch[sid] = watch
        return work, stale, watch

    def _survey_later(self, sid: int, wait: float) -> None:
        if self._closed or sid in self._timers:
            return
        with contextlib.suppress(RuntimeError):

            def due() -> None:
                self._timers.pop(sid, None)
                self.schedule(sid)

            self._timers[sid] = asyncio.get_running_loop().call_later(wait, due)

    async def _embed_group(self, sid: int, group: list[ChunkText], progress: list[int]) -> None:
        """One cache lookup for the group, the model for its misses batch by batch, one
        write per batch; counts the vectors stored in `progress[0]` as it goes."""
        keys = [vectors.cache_key(self.model, chunk.text) for chunk in group]
        hits = await self._db.call(partial(vectors.cached, keys=keys))
        for batch in _batches(list(zip(group, keys, strict=True)), self._batch_size):
            if self._closed:
                return  # closing: the batch embedded is written, no other begins
            found = {key: hits[key] for _, key in batch if key in hits}
            if found and self.embedder.dim:
                size = self.embedder.dim * 4
                found = {key: vec for key, vec in found.items() if len(vec) == size}
            misses = [(chunk, key) for chunk, key in batch if key not in found]
            fresh: dict[str, bytes] = {}
            if misses:
                rows = await self.embedder.embed([chunk.text for chunk, _ in misses])
                if rows.shape[0] != len(misses):
                    raise EmbeddingError(
                        f"{self.model} returned {rows.shape[0]} vectors for {len(misses)} texts"
                    )
                fresh = {key: rows[i].tobytes() for i, (_, key) in enumerate(misses)}
            items = [(chunk, found.get(key) or fresh[key]) for chunk, key in batch]
            result = await self._write(sid, items, list(fresh.items()), [])
            progress[0] += len(result.rows)

    async def _write(
        self,
        sid: int,
        items: list[tuple[ChunkText, bytes]],
        cache_rows: list[tuple[str, bytes]],
        stale: list[int],
    ) -> Stored:
        result = await self._db.run(
            partial(
                vectors.store,
                sid=sid,
                model=self.model,
                items=items,
                cache_rows=cache_rows,
                stale=stale,
            )
        )
        matrix = self._matrices.get(sid)
        if matrix is not None and result.version is not None:
            if matrix.version == result.version - 1 and (
                not result.rows or len(result.rows[0].vec) == matrix.dim * 4
            ):
                matrix.apply(result.rows, result.removed)
                matrix.version = result.version
                if matrix.graph is not None:
                    self._graph_later(sid, matrix)
            else:  # another process wrote in between: load afresh at the next search
                self._matrices.pop(sid, None)
        return result

    def _failed(self, sid: int, exc: EmbeddingError) -> None:
        attempt = self._failures.get(sid, 0)
        self._failures[sid] = attempt + 1
        delay = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
        if not self._failing:
            self._failing = True
            log.warning(
                "embedding failed, recall works by words alone until it works again"
                " (trying again in %.0f s): %s",
                delay,
                exc,
            )
        else:
            log.debug("embedding still failing for scope %d: %s", sid, exc)
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            if (old := self._retries.pop(sid, None)) is not None:
                old.cancel()
            self._retries[sid] = loop.call_later(delay, self.schedule, sid)

    def _recovered(self, sid: int) -> None:
        self._failures.pop(sid, None)
        if (handle := self._retries.pop(sid, None)) is not None:
            handle.cancel()
        if self._failing and not self._failures:
            self._failing = False
            log.info("embedding works again")

    def invalidate(self, scope_id: int | None = None) -> None:
        """Survey the scope (or every scope) in full at its next backfill and load its
        matrix afresh: for a rebuild, which gives chunks new ids."""
        for sid in [scope_id] if scope_id is not None else list(self._watch):
            if (watch := self._watch.get(sid)) is not None:
                watch.forced = True
        if scope_id is None:
            self._matrices.clear()
        else:
            self._matrices.pop(scope_id, None)

    # --- searching ----------------------------------------------------------------------
    async def embed_query(self, text: str) -> Floats:
        """The query's vector, made from its first `vectors.EMBED_CHARS` characters (as a
        chunk's is); the same text again (a recall repeated) costs nothing."""
        text = text[: vectors.EMBED_CHARS]
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
            return cached
        rows = await self.embedder.embed([text], query=True)
        if rows.ndim != 2 or rows.shape[0] != 1:
            raise EmbeddingError(f"{self.model} returned {rows.shape} for one query")
        vector: Floats = np.array(rows[0], dtype=np.float32)
        vector.flags.writeable = False
        self._queries[text] = vector
        if len(self._queries) > QUERY_CACHE:
            self._queries.popitem(last=False)
        return vector

    async def search(
        self,
        scope_id: int,
        query: Floats,
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        exclude_paths: Sequence[str] = (),
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the scope's `k` chunks nearest to `query`, best first;
        only visible chunks of this scope that pass the filters."""
        if k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or not np.isfinite(norm):
            return []
        q = q / norm
        hits: list[tuple[int, float]] = []
        for _ in range(2):
            matrix = await self._matrix(scope_id)
            if matrix is None or matrix.live == 0:
                return []
            if q.shape[0] != matrix.dim:
                raise EmbeddingError(
                    f"query has {q.shape[0]} dimensions, the scope's vectors {matrix.dim}"
                )
            found: list[tuple[int, float]] | _Miss = _Miss.TOO_FEW
            if (graph := self._graph(scope_id, matrix)) is not None:
                near, rows = await asyncio.to_thread(
                    matrix.near, graph, q, k * CANDIDATES, kinds, exclude_paths
                )
                found = await self._confirm(
                    scope_id, matrix, near, k, kinds, exclude_paths, rows=rows
                )
            if found is _Miss.TOO_FEW:  # no graph, or too few of its candidates passed
                if matrix.n > self._inline_rows:
                    scores = await asyncio.to_thread(matrix.scores, q, kinds, exclude_paths)
                else:
                    scores = matrix.scores(q, kinds, exclude_paths)
                found = await self._confirm(scope_id, matrix, scores, k, kinds, exclude_paths)
            if not isinstance(found, _Miss):
                return found
            self._matrices.pop(scope_id, None)  # another process changed it: load again
        return hits

    async def _confirm(
        self,
        sid: int,
        matrix: VectorMatrix,
        scores: Floats,
        k: int,
        kinds: Sequence[str] | None,
        exclude_paths: Sequence[str],
        *,
        rows: Ids | None = None,
    ) -> list[tuple[int, float]] | _Miss:
        """The best rows that the chunks table vouches for, going deeper while stale or
        hidden rows leave fewer than `k`; STALE when the scope changed under the matrix;
        TOO_FEW when `scores` are of some `rows` only (a graph's candidates) and they ran
        out before `k` hits."""
        m = max(2 * k, k + 16)
        while True:
            picked = matrix.pick(scores, m, rows)
            version, texts = await self._db.call(
                partial(
                    vectors.recheck,
                    sid=sid,
                    chunk_ids=[chunk_id for chunk_id, _, _ in picked],
                    kinds=kinds,
                    exclude_paths=list(exclude_paths),
                )
            )
            if version != matrix.version:
                return _Miss.STALE
            hits = []
            changed = False
            for chunk_id, digest, score in picked:
                text = texts.get(chunk_id)
                if text is None:
                    continue
                if vectors.text_hash(text) == digest:
                    hits.append((chunk_id, score))
                else:
                    changed = True
            if changed:
                # A chunk id now holds another text (an id taken again after its chunk
                # was deleted): the next backfill surveys the scope in full.
                if (watch := self._watch.get(sid)) is not None:
                    watch.due = True
                self.schedule(sid)
            if len(hits) >= k:
                return hits[:k]
            if len(picked) < m:
                return hits if rows is None else _Miss.TOO_FEW
            m *= 4

    async def _matrix(self, sid: int) -> VectorMatrix | None:
        matrix = self._matrices.get(sid)
        if matrix is None:
            lock = self._loading.setdefault(sid, asyncio.Lock())
            async with lock:
                matrix = self._matrices.get(sid)
                if matrix is None:
                    matrix = await self._load(sid)
                    if matrix is None:
                        return None
                    self._install(sid, matrix)
        elif matrix.wants_compaction():
            matrix = await asyncio.to_thread(matrix.compacted)
            self._matrices[sid] = matrix
        self._matrices.move_to_end(sid)
        return matrix

    async def _load(self, sid: int) -> VectorMatrix | None:
        """The scope's vectors, a page per database call; the matrix carries the version
        of the first page (a write during the load makes the next search load again)."""
        size = await self._db.call(partial(vectors.count, sid=sid, model=self.model))
        matrix: VectorMatrix | None = None
        after: int | None = 0
        while after is not None:
            version, rows, after = await self._db.call(
                partial(vectors.load_page, sid=sid, model=self.model, after=after, limit=PAGE)
            )
            if matrix is None:
                dim = len(rows[0].vec) // 4 if rows else max(self.embedder.dim, 1)
                # Room for the rows and some new ones: growing copies the whole matrix.
                matrix = VectorMatrix(dim, version, size + max(64, size // 16))
            rows = [row for row in rows if len(row.vec) == matrix.dim * 4]
            if rows:
                await asyncio.to_thread(matrix.apply, rows, ())
        return matrix

    def _install(self, sid: int, matrix: VectorMatrix) -> None:
        self._matrices[sid] = matrix
        total = sum(m.nbytes for m in self._matrices.values())
        while total > self._max_bytes and len(self._matrices) > 1:
            evicted, old = self._matrices.popitem(last=False)
            if evicted == sid:  # never the one just loaded
                self._matrices[sid] = old
                break
            total -= old.nbytes

    async def load(self, scope_id: int) -> int:
        """Load the scope's matrix now (benches, warm-up), and start its graph if it is
        large enough; returns its rows."""
        matrix = await self._matrix(scope_id)
        if matrix is None:
            return 0
        self._graph(scope_id, matrix)
        return matrix.live

    # --- the graph -------------------------------------------------------------------------
    def _graph(self, sid: int, matrix: VectorMatrix) -> Graph | None:
        """The matrix's graph when it is ready; starts building one for a scope large
        enough (the search goes exact meanwhile)."""
        if self._ann_min_rows is None or matrix.live < self._ann_min_rows:
            return None
        if matrix.graph is None and not matrix.graph_failed:
            self._graph_later(sid, matrix)
        return matrix.graph

    def _graph_later(self, sid: int, matrix: VectorMatrix) -> None:
        """Build the graph, or bring it up to date, in the background (one task a scope;
        one already running goes round once more)."""
        if self._closed:
            return
        if sid in self._graph_tasks:
            self._graph_again.add(sid)
            return
        with contextlib.suppress(RuntimeError):
            self._graph_tasks[sid] = asyncio.get_running_loop().create_task(
                self._graph_run(sid), name=f"chatmem-graph-{sid}"
            )

    async def _graph_run(self, sid: int) -> None:
        try:
            while not self._closed:
                self._graph_again.discard(sid)
                matrix = self._matrices.get(sid)
                if matrix is None or self._ann_min_rows is None:
                    break
                try:
                    if matrix.graph is not None:
                        await self._catch_up(sid, matrix)
                    elif matrix.live >= self._ann_min_rows and not matrix.graph_failed:
                        await self._build_graph(sid, matrix)
                except ann.Stopped:
                    break
                except Exception as exc:  # a background task: log it, search stays exact
                    log.warning("graph of scope %d failed, searching it exactly: %s", sid, exc)
                    matrix.graph, matrix.dropped, matrix.graph_failed = None, None, True
                    break
                if sid not in self._graph_again:
                    break
        finally:
            self._graph_tasks.pop(sid, None)

    async def _build_graph(self, sid: int, matrix: VectorMatrix) -> None:
        """A graph of the matrix's live rows, from a worker thread; rows written
        meanwhile are added once it is in place (searched exactly until then)."""

        def unwanted() -> bool:
            return self._closed or self._matrices.get(sid) is not matrix

        async with self._building:
            if unwanted():
                return
            n = matrix.n
            ids = matrix.ids[:n].copy()
            rows = np.flatnonzero(ids >= 0)
            matrix.dropped = []  # removals from now on: taken out at the first catch-up
            started = time.perf_counter()
            graph = await asyncio.to_thread(
                ann.build, matrix.dim, ids[rows], rows, matrix.vecs, unwanted
            )
        if unwanted():
            return
        matrix.graph = graph
        matrix.graph_upto = n
        log.info(
            "graph of scope %d: %d vectors in %.1f s", sid, len(rows), time.perf_counter() - started
        )
        await self._catch_up(sid, matrix)

    async def _catch_up(self, sid: int, matrix: VectorMatrix) -> None:
        """Take this process's own writes since the graph last caught up into it."""
        graph = matrix.graph
        while graph is not None and matrix.graph is graph and not self._closed:
            dropped, matrix.dropped = matrix.dropped or [], []
            upto, n = matrix.graph_upto, matrix.n
            if not dropped and upto >= n:
                return
            ids = matrix.ids[upto:n].copy()
            live = ids >= 0
            vecs = matrix.vecs[upto:n][live]

            def update(
                keys: Ids = ids[live], vecs: Floats = vecs, gone: list[int] = dropped
            ) -> None:
                graph.remove(gone)  # first: a chunk written anew is taken out, then added
                graph.add(keys, vecs)

            await asyncio.to_thread(update)
            if matrix.graph is graph:
                matrix.graph_upto = max(matrix.graph_upto, n)

    async def wait_graph(self, scope_id: int) -> bool:
        """Wait for the scope's graph to be built and caught up (benches, tests); whether
        its searches now go through one."""
        while (task := self._graph_tasks.get(scope_id)) is not None:
            await asyncio.gather(task, return_exceptions=True)
        matrix = self._matrices.get(scope_id)
        return matrix is not None and matrix.graph is not None

    async def close(self) -> None:
        """Stop backfills and retries, forget the matrices, close the embedder.

        A backfill ends after the batch it is embedding, which is written (within
        `STOP_SECONDS`): a short-lived process (a CLI command) keeps the vectors it made,
        so the next one does not make them again."""
        self._closed = True
        for handle in [*self._retries.values(), *self._timers.values()]:
            handle.cancel()
        self._retries.clear()
        self._timers.clear()
        if backfills := list(self._tasks.values()):
            await asyncio.wait(backfills, timeout=STOP_SECONDS)
        tasks = [*self._tasks.values(), *self._graph_tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._matrices.clear()
        self._queries.clear()
        await self.embedder.close()


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
