"""The HNSW graph of each large scope's matrix, built and kept current in the background.

A scope of `ANN_MIN_ROWS` or more gets a graph (memory_core/storage/vectors/ann.py), built in a
worker thread from its matrix the first time it is searched or loaded (one build at a
time; minutes for 100 000 rows); exact search answers until it is ready, and never waits
for it. This process's own writes reach the graph in the background, a few rows per lock
hold; a graph goes with its matrix (eviction, a load afresh) and survives compaction (it
holds chunk ids). Apart from index.py, which searches through a graph once it is
here: the building is all background tasks and worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memory_core.storage.vectors import ann
from memory_core.storage.vectors.ann import Graph
from memory_core.storage.vectors.matrix import VectorMatrix

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]
    Ids = npt.NDArray[np.int64]

log = logging.getLogger(__name__)


class Graphs:
    """The graphs of the matrices of one `VectorIndex`.

    `current(scope id)` is the scope's matrix now (None once evicted): a build or catch-up
    for a matrix that is no longer current gives up."""

    def __init__(
        self, ann_min_rows: int | None, current: Callable[[int], VectorMatrix | None]
    ) -> None:
        """`ann_min_rows`: scopes this large get a graph (None: never; nor without
        usearch installed)."""
        self._ann_min_rows = ann_min_rows if ann.available() else None
        self._current = current
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._again: set[int] = set()
        self._building = asyncio.Lock()
        """One build at a time: each takes a core (and a worker thread) for minutes."""
        self._closed = False

    def ready(self, sid: int, matrix: VectorMatrix) -> Graph | None:
        """The matrix's graph when it is ready; starts building one for a scope large
        enough (the search goes exact meanwhile)."""
        if self._ann_min_rows is None or matrix.live < self._ann_min_rows:
            return None
        if matrix.graph is None and not matrix.graph_failed:
            self.update(sid, matrix)
        return matrix.graph

    def update(self, sid: int, matrix: VectorMatrix) -> None:
        """Build the graph, or bring it up to date, in the background (one task a scope;
        one already running goes round once more)."""
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
                    elif matrix.live >= self._ann_min_rows and not matrix.graph_failed:
                        await self._build(sid, matrix)
                except ann.Stopped:
                    break
                except Exception as exc:  # a background task: log it, search stays exact
                    log.warning("graph of scope %d failed, searching it exactly: %s", sid, exc)
                    matrix.graph, matrix.dropped, matrix.graph_failed = None, None, True
                    break
                if sid not in self._again:
                    break
        finally:
            self._tasks.pop(sid, None)

    async def _build(self, sid: int, matrix: VectorMatrix) -> None:
        """A graph of the matrix's live rows, from a worker thread; rows written
        meanwhile are added once it is in place (searched exactly until then)."""

        def unwanted() -> bool:
            return self._closed or self._current(sid) is not matrix

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

    async def wait(self, scope_id: int) -> None:
        """Wait for the scope's graph to be built and caught up (benches, tests)."""
        while (task := self._tasks.get(scope_id)) is not None:
            await asyncio.gather(task, return_exceptions=True)

    def stop(self) -> None:
        """No build starts any more; one under way gives up at its next check."""
        self._closed = True

    async def close(self) -> None:
        """Stop, and cancel the builds under way."""
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
