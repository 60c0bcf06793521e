"""Chunk vectors searched exactly from memory, or through a scope's graph.

Vectors are made in the background (backfill.py; what needs one, survey.py)
and searched here. Search is exact up to `ANN_MIN_ROWS` rows: a scope's vectors sit in one
float32 matrix in memory (matrix.py; loaded page by page from SQLite, then kept up
to date by this process's own backfills, and loaded again when the scope's version in the
database shows that another process changed them); a query is one matrix-vector product
and a partial sort. The product reads the whole matrix, so it costs what memory bandwidth
allows: about 20 ms for 100 000 512-d rows (205 MB) on the two-core bench machine, 0.5 ms
for 10 000. Every hit is read back through the `chunks` table before it is returned (its
scope, visibility, filters and text hash), so a stale matrix can cost a hit, never show
another scope's chunk or a changed one.

A scope of `ANN_MIN_ROWS` or more also gets an HNSW graph (graphs.py), read from its file
beside the index or built in the background; exact search answers until it is ready, and
never waits for it. Then a search asks the graph for `k * CANDIDATES` chunk ids, adds the
rows the graph does not hold yet (the tail appended since it was built, and those it
lacked when it was read), scores those exactly from the matrix and goes on as above: the
scores stay exact cosines and every hit is still confirmed through `chunks`. Filters
apply to the candidates; when too few pass, the search is done exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np
import numpy.typing as npt

from memory_core.base.clock import Monotonic, Sleep, system_monotonic, system_sleep
from memory_core.base.scope_names import scope_name
from memory_core.base.sql import Db
from memory_core.embedding.base import Embedder, EmbeddingError
from memory_core.storage.blas import one_blas_thread
from memory_core.storage.interfaces import CatchUp, Progress
from memory_core.storage.vectors import codec
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.ann import ANN_MIN_ROWS, CANDIDATES
from memory_core.storage.vectors.backfill import Backfills, SqlVectorWriter, VectorWriter
from memory_core.storage.vectors.graphs import GraphCounts, Graphs
from memory_core.storage.vectors.matrix import Inherited, VectorMatrix
from memory_core.storage.vectors.rows import Stored

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]
    Ids = npt.NDArray[np.int64]

log = logging.getLogger(__name__)

INLINE_ROWS = 10_000
"""Above this many rows the product runs in a worker thread. bench/embedder_bench.py, 512-d:
10 000 rows take about 0.5 ms inline, less than the hop to a thread adds; 20 000 rows
already hold the event loop 2.5 ms (the matrix no longer fits the CPU's cache)."""
QUERY_CACHE = 256
MAX_BYTES = 1 << 30
"""Memory for the matrices of all scopes; the least recently searched go first."""


class _Miss(enum.Enum):
    """Why a search found no answer from the scores it had."""

    STALE = "the scope changed under the matrix: load it again"
    TOO_FEW = "the graph's candidates ran out before k hits: search exactly"


class VectorIndex:
    """The vectors of every scope of one database, made by one embedder.

    `close()` closes the embedder too: the index owns the embedder it was given.
    """

    @classmethod
    def for_workspace(
        cls,
        db: Db,
        embedder: Embedder,
        state_dir: Path,
        *,
        batch_size: int,
        monotonic: Monotonic,
    ) -> Self:
        """The index a workspace's core searches with: its graphs kept as files under
        `state_dir`, numpy's BLAS on one thread in this process (storage/blas.py)."""
        from memory_core.storage.vectors import graph_files

        one_blas_thread()
        return cls(
            db,
            embedder,
            batch_size=batch_size,
            monotonic=monotonic,
            graph_dir=graph_files.directory(state_dir),
        )

    def __init__(
        self,
        db: Db,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        inline_rows: int = INLINE_ROWS,
        ann_min_rows: int | None = ANN_MIN_ROWS,
        max_bytes: int = MAX_BYTES,
        monotonic: Monotonic = system_monotonic,
        sleep: Sleep = system_sleep,
        writer: VectorWriter | None = None,
        graph_dir: Path | None = None,
    ) -> None:
        """`ann_min_rows`: scopes this large get a graph (None: never; nor without
        usearch installed). `monotonic` times the surveys (`survey.SURVEY_EVERY`,
        the duty); `sleep` waits before a failed backfill is tried again. `writer` writes each backfilled batch (`vectors.store` by default;
        memory_core/storage/pg/vectors.py gives its own). `graph_dir`: where the graphs
        are written and read back (graph_files.py; None: built at every start)."""
        self._db = db
        self.embedder = embedder
        self._inline_rows = inline_rows
        self._max_bytes = max_bytes
        self._matrices: OrderedDict[int, VectorMatrix] = OrderedDict()
        self._loading: dict[int, asyncio.Lock] = {}
        self._queries: OrderedDict[str, Floats] = OrderedDict()
        self._warming: dict[int, asyncio.Task[None]] = {}
        self._retired: dict[int, Inherited] = {}
        """The graph of a scope's matrix dropped for a load afresh, for the next one."""
        self._graphs = Graphs(
            ann_min_rows, self._matrices.get, folder=graph_dir, model=embedder.name
        )
        self._backfills = Backfills(
            db,
            embedder,
            writer or SqlVectorWriter(db),
            self._stored,
            batch_size=batch_size,
            monotonic=monotonic,
            sleep=sleep,
        )

    @property
    def model(self) -> str:
        return self.embedder.name

    # --- making vectors (backfill.py) ---------------------------------------------------
    def schedule(self, scope_id: int) -> None:
        """Backfill the scope in the background (`Backfills.schedule`)."""
        self._backfills.schedule(scope_id)

    async def settle(self, scope_id: int, within: float) -> bool:
        """Wait at most `within` seconds for the scope's vectors to cover what was written
        before this call (`Backfills.settle`); whether they do. A search calls this while
        its query is being embedded: the scope's matrix starts loading meanwhile (`_warm`)."""
        self._warm(scope_id)
        return await self._backfills.settle(scope_id, within)

    def _warm(self, sid: int) -> None:
        """Load the scope's matrix, and read or build its graph, in the background: a
        process's first search of a large scope loads 100 000 vectors (1-2 s) on the
        database thread while the model loads and embeds the query in a worker thread,
        instead of after it. Not for an index whose searches go elsewhere (pgvector's
        turns graphs off, and holds no matrices)."""
        if not self._graphs.enabled or sid in self._matrices or sid in self._warming:
            return
        try:
            task = asyncio.get_running_loop().create_task(
                self._warm_up(sid), name=f"chatmem-vectors-warm-{sid}"
            )
        except RuntimeError:
            return
        self._warming[sid] = task
        task.add_done_callback(lambda _: self._warming.pop(sid, None))

    async def _warm_up(self, sid: int) -> None:
        try:
            matrix = await self._matrix(sid)
        except Exception as exc:  # the search that follows meets it and says so
            log.debug("vectors of scope %s not loaded ahead: %s", scope_name(sid), exc)
            return
        if matrix is not None:
            self._graphs.ready(sid, matrix)

    async def drain(self) -> None:
        """Wait for the backfills under way (and any they start) to end."""
        await self._backfills.drain()

    async def backfill(self, scope_id: int, *, limit: int | None = None) -> int:
        """Embed the scope's chunks that lack a current vector, drop vectors of chunks
        gone; how many vectors were stored (`Backfills.backfill`)."""
        return await self._backfills.backfill(scope_id, limit=limit)

    async def catch_up(
        self, scope_id: int, *, most: int | None, progress: Progress | None = None
    ) -> CatchUp:
        """Make the scope's missing vectors now, within `most` (`Backfills.catch_up`)."""
        return await self._backfills.catch_up(scope_id, most=most, progress=progress)

    def _stored(self, sid: int, result: Stored) -> None:
        """A backfill wrote: the scope's matrix takes the rows in, unless another process
        wrote in between (then it is loaded afresh at the next search)."""
        matrix = self._matrices.get(sid)
        if matrix is not None and result.version is not None:
            if matrix.version == result.version - 1 and (
                not result.rows or len(result.rows[0].vec) == matrix.dim * 4
            ):
                matrix.apply(result.rows, result.removed)
                matrix.version = result.version
                if matrix.graph is not None:
                    self._graphs.update(sid, matrix)
            else:
                self._retire(sid)

    def _retire(self, sid: int) -> None:
        """Drop the scope's matrix (another process changed its vectors: the next search
        loads it afresh), keeping its graph and what the graph holds for the next one
        (read from the old matrix in a worker thread: 30-50 ms at 100 000 rows)."""
        matrix = self._matrices.pop(sid, None)
        if matrix is None or matrix.graph is None:
            return
        with contextlib.suppress(RuntimeError):  # no loop: nothing to take over
            content = asyncio.get_running_loop().run_in_executor(None, matrix.graph_content)
            self._retired[sid] = Inherited(matrix.graph, content)

    def invalidate(self, scope_id: int | None = None) -> None:
        """Survey the scope (or every scope) in full at its next backfill and load its
        matrix afresh: for a rebuild, which gives chunks new ids. A graph is read back
        from its file and checked against the new ids (graphs.py)."""
        self._backfills.invalidate(scope_id)
        if scope_id is None:
            self._matrices.clear()
            self._retired.clear()
        else:
            self._matrices.pop(scope_id, None)
            self._retired.pop(scope_id, None)

    async def forget(self) -> None:
        """Drop every vector no current chunk vouches for, and every copy of the vectors
        kept beside them: the matrices, the graphs and their files (a purge: a vector can
        hint at the text it came from). What is still wanted is made again."""
        self.invalidate()
        self._queries.clear()
        await self._graphs.forget()
        await self._db.write(vectors.forget)

    @property
    def graph_counts(self) -> GraphCounts:
        """How this index came by its graphs: built, read from a file, taken over."""
        return self._graphs.counts

    # --- searching ----------------------------------------------------------------------
    async def searches(self, scope_id: int) -> bool:
        """Always: this index makes the scope's vectors, and a search waits for them."""
        return True

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
            if (graph := self._graphs.ready(scope_id, matrix)) is not None:
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
            self._retire(scope_id)  # another process changed it: load again
        return hits

    async def similarities(
        self, scope_id: int, query: Floats, ids: Sequence[int]
    ) -> dict[int, float]:
        """Cosine of `query` with each of `ids` that has a row in the scope's matrix. For
        ranking candidates already read through `chunks`: a row another process has made
        stale since costs a little precision, never a hit."""
        matrix = await self._held(scope_id)
        if matrix is None or not ids:
            return {}
        held = [
            (chunk_id, row) for chunk_id in ids if (row := matrix.where.get(chunk_id)) is not None
        ]
        if not held:
            return {}
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != matrix.dim:
            return {}
        rows = np.fromiter((row for _, row in held), dtype=np.int64, count=len(held))
        sims = (matrix.vecs[rows] @ q).tolist()
        return {chunk_id: float(sim) for (chunk_id, _), sim in zip(held, sims, strict=True)}

    async def moved_toward(
        self, scope_id: int, query: Floats, ids: Sequence[int], weight: float
    ) -> Floats:
        """Rocchio's feedback: the query's vector plus `weight` × the mean vector of
        `ids` (the best BM25 hits), unit length; the query itself when none has a vector."""
        matrix = await self._held(scope_id)
        if matrix is None:
            return query
        rows = [row for chunk_id in ids if (row := matrix.where.get(chunk_id)) is not None]
        if not rows:
            return query
        moved = np.asarray(query, dtype=np.float32).reshape(-1) + weight * matrix.vecs[
            np.asarray(rows, dtype=np.int64)
        ].mean(axis=0)
        norm = float(np.linalg.norm(moved))
        if norm == 0.0 or not np.isfinite(norm):
            return query
        out: Floats = (moved / norm).astype(np.float32)
        return out

    async def _held(self, sid: int) -> VectorMatrix | None:
        """The matrix `similarities` and `moved_toward` read: loaded when missing."""
        return await self._matrix(sid)

    async def _recheck(
        self,
        sid: int,
        picked: Sequence[tuple[int, str, float]],
        kinds: Sequence[str] | None,
        exclude_paths: Sequence[str],
    ) -> tuple[int, dict[int, str]]:
        """The scope's version and the texts the chunks table vouches for, of the rows
        `VectorMatrix.pick` chose (`rows.recheck`, one round trip)."""
        return await self._db.read(
            partial(
                vectors.recheck,
                sid=sid,
                chunk_ids=[chunk_id for chunk_id, _, _ in picked],
                kinds=kinds,
                exclude_paths=list(exclude_paths),
            )
        )

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
            version, texts = await self._recheck(sid, picked, kinds, exclude_paths)
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
                self._backfills.survey(sid)
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
            if matrix.graph is not None:
                self._graphs.update(sid, matrix)  # its catch-up goes on with the copy
        self._matrices.move_to_end(sid)
        return matrix

    async def _load(self, sid: int) -> VectorMatrix | None:
        """The scope's vectors, a page per database call; the matrix carries the version
        of the first page (a write during the load makes the next search load again)."""
        size = await self._db.read(partial(vectors.count, sid=sid, model=self.model))
        matrix: VectorMatrix | None = None
        after: int | None = 0
        page_size = vectors.PAGE
        while after is not None:
            version, rows, after = await self._db.read(
                partial(
                    vectors.load_page,
                    sid=sid,
                    model=self.model,
                    after=after,
                    limit=page_size,
                    stored=True,
                )
            )
            if matrix is None:
                dim = codec.dim_of(rows[0].vec) if rows else max(self.embedder.dim, 1)
                # Room for the rows and some new ones: growing copies the whole matrix.
                matrix = VectorMatrix(dim, version, size + max(64, size // 16))
            rows = [row for row in rows if len(row.vec) == matrix.dim * codec.STORED_BYTES]
            if rows:
                await asyncio.to_thread(partial(matrix.apply, rows, (), stored=True))
        return matrix

    def _install(self, sid: int, matrix: VectorMatrix) -> None:
        matrix.inherited = self._retired.pop(sid, None)
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
        self._graphs.ready(scope_id, matrix)
        return matrix.live

    async def wait_graph(self, scope_id: int) -> bool:
        """Wait for the scope's graph to be read or built and caught up (benches, tests);
        whether its searches now go through one."""
        await self._graphs.wait(scope_id)
        matrix = self._matrices.get(scope_id)
        return matrix is not None and matrix.graph is not None

    async def close(self) -> None:
        """Stop backfills and retries, forget the matrices, close the embedder.

        A backfill ends after the batch it is embedding, which is written (within
        `backfill.STOP_SECONDS`): a short-lived process (a CLI command) keeps the
        vectors it made, so the next one does not make them again."""
        self._graphs.stop()
        for task in list(self._warming.values()):
            task.cancel()
        await asyncio.gather(*self._warming.values(), return_exceptions=True)
        await self._backfills.close()
        await self._graphs.close()  # writes out the graphs changed since their files
        self._matrices.clear()
        self._retired.clear()
        self._queries.clear()
        await self.embedder.close()
