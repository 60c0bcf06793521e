"""The HNSW graph of each large scope's matrix: read back or built, and kept current, in
the background.

A scope of `ANN_MIN_ROWS` or more gets a graph (memory_core/storage/vectors/ann.py) the
first time it is searched or loaded. Exact search answers until it is there, and never
waits for it. Where it comes from, in order:

* the graph of the matrix this one replaced (another process wrote and the scope was
  loaded again: `VectorMatrix.inherited`);
* its file beside the index (graph_files.py), written after a build and whenever the
  graph has taken in `SAVE_ROWS` rows since, and at close: a restart reads 100 000
  vectors' graph in well under a second where a build takes minutes of a core;
* a build from the matrix in a worker thread (one build at a time).

A graph taken over or read holds what matched when it was written: its (chunk id, text
hash) pairs are compared with the matrix's, the ids gone are taken out and the rows it
lacks (`VectorMatrix.pending`) are searched exactly until the first catch-up adds them.
When more than half the rows differ it is built afresh instead (a reindex gave every
chunk a new id). This process's own writes reach the graph in the background, a few
rows per lock hold; a graph goes with its matrix (eviction, a load afresh) and survives
compaction (it holds chunk ids). Apart from index.py, which searches through a graph once
it is here: all of this is background tasks and worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memory_core.base.scope_names import scope_name
from memory_core.storage.vectors import ann, graph_files
from memory_core.storage.vectors.ann import Graph
from memory_core.storage.vectors.matrix import GraphContent, VectorMatrix

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]
    Ids = npt.NDArray[np.int64]

log = logging.getLogger(__name__)

SAVE_ROWS = 1_000
"""A graph that has taken in (or let go) this many rows since its file was written is
written again after its catch-up: what a restart would otherwise add again, about 1.5 s
of a core (ann.BUILD_THREADS), stays under that. Writing a 100 000-vector graph costs
about 0.3 s of a worker thread and ~120 MB on disk."""
REUSE_MAX_CHANGED = 0.5
"""A graph taken over or read is used when at most this share of the scope's rows differ
from what it holds; with more, building it afresh costs about the same and gives a
cleaner graph (usearch only marks removed keys)."""


@dataclass
class GraphCounts:
    """How this process came by its graphs (tests, benches, the log)."""

    built: int = 0
    read: int = 0
    inherited: int = 0
    saved: int = 0


@dataclass(frozen=True, slots=True)
class _Plan:
    """How a graph taken over or read differs from the matrix it is for."""

    pending: Ids
    remove: list[int]
    live: int

    @property
    def worth_it(self) -> bool:
        return len(self.pending) + len(self.remove) <= REUSE_MAX_CHANGED * max(self.live, 1)


class Graphs:
    """The graphs of the matrices of one `VectorIndex`.

    `current(scope id)` is the scope's matrix now (None once evicted): a build or catch-up
    for a matrix that is no longer current gives up."""

    def __init__(
        self,
        ann_min_rows: int | None,
        current: Callable[[int], VectorMatrix | None],
        *,
        folder: Path | None = None,
        model: str = "",
    ) -> None:
        """`ann_min_rows`: scopes this large get a graph (None: never; nor without
        usearch installed). `folder`: where graph files live (None: none are read or
        written). `model`: the embedder's name, which a graph file must match."""
        self._ann_min_rows = ann_min_rows if ann.available() else None
        self._current = current
        self._folder = folder if self._ann_min_rows is not None else None
        self._model = model
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._again: set[int] = set()
        self._seen: set[int] = set()
        """Scopes this process had a graph for (written out at close)."""
        self._building = asyncio.Lock()
        """One build at a time: each takes a core (and a worker thread) for minutes."""
        self._closed = False
        self._files = threading.Lock()
        """Held by a worker thread writing a file and by a purge deleting them all."""
        self._generation = 0
        """Moves at each purge: a file write started before it is not made."""
        self.counts = GraphCounts()

    @property
    def enabled(self) -> bool:
        """Whether large scopes get graphs here at all."""
        return self._ann_min_rows is not None

    def ready(self, sid: int, matrix: VectorMatrix) -> Graph | None:
        """The matrix's graph when it is ready; starts reading or building one for a
        scope large enough (the search goes exact meanwhile)."""
        if self._ann_min_rows is None or matrix.live < self._ann_min_rows:
            return None
        if matrix.graph is None and not matrix.graph_failed:
            self.update(sid, matrix)
        return matrix.graph

    def update(self, sid: int, matrix: VectorMatrix) -> None:
        """Bring the graph in, or up to date, in the background (one task a scope; one
        already running goes round once more)."""
        if self._closed:
            return
        if sid in self._tasks:
            self._again.add(sid)
            return
        with contextlib.suppress(RuntimeError):
            self._tasks[sid] = asyncio.get_running_loop().create_task(
                self._run(sid), name=f"chatmem-graph-{sid}"
            )

    async def _run(self, sid: int) -> None:
        try:
            while not self._closed:
                self._again.discard(sid)
                matrix = self._current(sid)
                if matrix is None or self._ann_min_rows is None:
                    break
                try:
                    if matrix.graph is not None:
                        await self._catch_up(sid, matrix)
                        if matrix.graph is not None and matrix.graph.unsaved >= SAVE_ROWS:
                            await self._save(sid, matrix)
                    elif (
                        matrix.live >= self._ann_min_rows
                        and not matrix.graph_failed
                        and not await self._reuse(sid, matrix)
                    ):
                        await self._build(sid, matrix)
                except ann.Stopped:
                    break
                except Exception as exc:  # a background task: log it, search stays exact
                    log.warning(
                        "graph of scope %s failed, searching it exactly: %s", scope_name(sid), exc
                    )
                    matrix.graph, matrix.dropped, matrix.graph_failed = None, None, True
                    break
                if sid not in self._again:
                    break
        finally:
            self._tasks.pop(sid, None)

    def _wanted(self, sid: int, matrix: VectorMatrix) -> Callable[[], bool]:
        def unwanted() -> bool:
            return self._closed or self._current(sid) is not matrix

        return unwanted

    async def _reuse(self, sid: int, matrix: VectorMatrix) -> bool:
        """Take over the replaced matrix's graph or read the scope's file, and install it
        with what it lacks pending; whether a graph is installed (False: build one)."""
        unwanted = self._wanted(sid, matrix)
        inherited, matrix.inherited = matrix.inherited, None
        n = matrix.n
        ids = matrix.ids[:n].copy()
        hashes = list(matrix.hashes[:n])
        matrix.dropped = []  # removals from now on: taken out at the first catch-up
        found: tuple[Graph, GraphContent] | None = None
        source = "inherited"
        if inherited is not None and inherited.graph.dim == matrix.dim:
            found = inherited.graph, await inherited.content
        elif self._folder is not None:
            found = await asyncio.to_thread(self._read, sid, matrix.dim)
            source = "read"
        if found is None or unwanted():
            matrix.dropped = None
            return found is not None
        graph, content = found
        plan = await asyncio.to_thread(_plan, content, ids, hashes)
        if not plan.worth_it:
            log.info(
                "graph of scope %s: %d of %d rows changed since it was written, building it",
                scope_name(sid),
                len(plan.pending) + len(plan.remove),
                plan.live,
            )
            matrix.dropped = None
            return False
        if unwanted():
            return True
        matrix.graph, matrix.graph_upto, matrix.pending = graph, n, plan.pending
        matrix.dropped = plan.remove + (matrix.dropped or [])
        if source == "read":
            self.counts.read += 1
        else:
            self.counts.inherited += 1
        self._seen.add(sid)
        log.info(
            "graph of scope %s %s: %d vectors, %d to add, %d to remove",
            scope_name(sid),
            source,
            len(content.keys),
            len(plan.pending),
            len(plan.remove),
        )
        await self._catch_up(sid, matrix)
        if matrix.graph is graph and graph.unsaved >= SAVE_ROWS:
            await self._save(sid, matrix)
        return True

    def _read(self, sid: int, dim: int) -> tuple[Graph, GraphContent] | None:
        """The scope's graph file, restored (a worker thread); None when there is none or
        it is unusable (deleted, so the build's file replaces it)."""
        assert self._folder is not None
        saved = graph_files.read(self._folder, sid, self._fingerprint(dim))
        if saved is None:
            return None
        try:
            graph = Graph.restore(dim, saved.blob)
        except ValueError as exc:
            log.warning("graph of scope %s not used, building it again: %s", scope_name(sid), exc)
            graph_files.remove(self._folder, sid)
            return None
        graph.unsaved = 0
        return graph, GraphContent(saved.keys, saved.marks, [])

    def _fingerprint(self, dim: int) -> graph_files.Fingerprint:
        return graph_files.Fingerprint(self._model, dim, ann.PARAMS, ann.library_version())

    async def _build(self, sid: int, matrix: VectorMatrix) -> None:
        """A graph of the matrix's live rows, from a worker thread; rows written
        meanwhile are added once it is in place (searched exactly until then)."""
        unwanted = self._wanted(sid, matrix)
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
        matrix.graph, matrix.graph_upto, matrix.pending = graph, n, np.zeros(0, dtype=np.int64)
        self.counts.built += 1
        self._seen.add(sid)
        log.info(
            "graph of scope %s: %d vectors in %.1f s",
            scope_name(sid),
            len(rows),
            time.perf_counter() - started,
        )
        await self._catch_up(sid, matrix)
        await self._save(sid, matrix)

    async def _catch_up(self, sid: int, matrix: VectorMatrix) -> None:
        """Take into the graph what it lacks: the rows pending since it was read or taken
        over, and this process's own writes since it last caught up."""
        graph = matrix.graph
        while (
            graph is not None
            and matrix.graph is graph
            and not self._closed
            and self._current(sid) is matrix
        ):
            dropped, matrix.dropped = matrix.dropped or [], []
            pending = matrix.pending
            upto, n = matrix.graph_upto, matrix.n
            if not dropped and upto >= n and not len(pending):
                return
            rows = np.concatenate([pending, np.arange(upto, n, dtype=np.int64)])
            rows = rows[matrix.ids[rows] >= 0]
            keys = matrix.ids[rows].copy()

            def update(
                keys: Ids = keys,
                rows: Ids = rows,
                vecs: Floats = matrix.vecs,
                gone: list[int] = dropped,
            ) -> None:
                graph.remove(gone)  # first: a chunk written anew is taken out, then added
                graph.fill(keys, rows, vecs)

            await asyncio.to_thread(update)
            if matrix.graph is graph:
                matrix.graph_upto = max(matrix.graph_upto, n)
                if matrix.pending is pending:
                    matrix.pending = np.zeros(0, dtype=np.int64)

    async def _save(self, sid: int, matrix: VectorMatrix) -> None:
        """Write the matrix's graph to its file (a worker thread), when it holds no
        removal it has not taken out yet (its content is then known exactly)."""
        graph = matrix.graph
        if self._folder is None or graph is None or matrix.dropped:
            return
        content = matrix.graph_content()
        folder, fingerprint = self._folder, self._fingerprint(matrix.dim)

        generation = self._generation

        def save() -> int:
            blob, unsaved = graph.dump()
            with self._files:
                if self._generation != generation:
                    return 0  # a purge deleted the files meanwhile: this graph is gone too
                size = graph_files.write(
                    folder, sid, fingerprint, content.keys, content.marks, blob
                )
            graph.unsaved = max(0, graph.unsaved - unsaved)
            return size

        started = time.perf_counter()
        try:
            size = await asyncio.to_thread(save)
        except OSError as exc:  # a full or read-only disk: the next start builds it
            log.warning("graph of scope %s not written: %s", scope_name(sid), exc)
            return
        if not size:
            return
        self.counts.saved += 1
        log.info(
            "graph of scope %s written: %d vectors, %.0f MB in %.2f s",
            scope_name(sid),
            len(content.keys),
            size / 2**20,
            time.perf_counter() - started,
        )

    async def wait(self, scope_id: int) -> None:
        """Wait for the scope's graph to be read or built and caught up (benches, tests)."""
        while (task := self._tasks.get(scope_id)) is not None:
            await asyncio.gather(task, return_exceptions=True)

    def stop(self) -> None:
        """No build starts any more; one under way gives up at its next check."""
        self._closed = True

    async def close(self) -> None:
        """Stop, cancel the builds under way, and write out each graph that has changed
        since its file was written (a restart then reads it whole)."""
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sid in sorted(self._seen):
            matrix = self._current(sid)
            if matrix is not None and matrix.graph is not None and matrix.graph.unsaved:
                await self._save(sid, matrix)

    async def forget(self) -> None:
        """Stop every task and delete every graph file (a purge); the graphs in memory
        go with their matrices, which the caller drops."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._seen.clear()
        folder = self._folder
        if folder is None:
            return

        def remove() -> None:
            with self._files:
                self._generation += 1
                graph_files.remove_all(folder)

        await asyncio.to_thread(remove)


def _plan(content: GraphContent, ids: Ids, hashes: list[str]) -> _Plan:
    """What a graph holding `content` lacks for a matrix of `ids` and `hashes` (pure; a
    worker thread): the live rows whose (id, hash) it does not hold, and the ids it holds
    that are no live row's any more or may be stale."""
    rows = np.flatnonzero(ids >= 0)
    keys = ids[rows]
    marks = np.array([hashes[i] for i in rows.tolist()], dtype="S32")
    order = np.argsort(content.keys, kind="stable")
    held, held_marks = content.keys[order], content.marks[order]
    at = np.minimum(np.searchsorted(held, keys), max(len(held) - 1, 0))
    same = np.zeros(len(keys), dtype=bool)
    if len(held):
        same = (held[at] == keys) & (held_marks[at] == marks)
    gone = np.setdiff1d(held, keys, assume_unique=False)
    remove = sorted({*gone.tolist(), *content.unknown})
    return _Plan(rows[~same].astype(np.int64), remove, len(rows))
