"""An HNSW graph beside a large scope's matrix, so a search need not read every row.

Exact search reads the whole matrix (205 MB at 100 000 rows of 512 floats), which is
bound by memory bandwidth and takes longer than a recall may spend. The graph (usearch, `dtype=i8`) finds a few times `k` candidates in a
few milliseconds; `VectorIndex` then scores those candidates exactly against the matrix,
so the cosines it returns are the exact ones and only the choice of candidates is
approximate.

Why usearch: measured against hnswlib, both reach the same recall at every search depth
and search and build about as fast, but hnswlib ships no wheel (a C++ compiler at
install time), keeps float32 copies, and its add may not run beside a search; usearch has
wheels for every platform. Int8 costs no recall since the candidates are scored again in
float32. The figures: docs/decisions/0005-vectors-usem3.md and bench/RESULTS.md.

Keys are chunk ids, so a graph outlives the compaction of its matrix (rows move, ids do
not). Every call into the library holds the graph's lock: usearch does not promise that
an add and a search may run at once. A build or a batch of adds goes a slice at a time,
letting a search in between and noticing within one slice that it is no longer wanted.
A graph is written out whole (`dump`) and read back (`restore`) by graph_files.py, so a
restart does not build it again.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]
    Ids = npt.NDArray[np.int64]

ANN_MIN_ROWS = 20_000
"""Scopes with at least this many live rows get a graph. Below it the matrix fits the
CPU's cache and exact search is as fast as a recall needs; a graph would cost memory and
a build for nothing (bench/embedder_bench.py measures where the two cross)."""
CANDIDATES = 2
"""The graph proposes `k * CANDIDATES` chunks; the exact scores pick the best `k`. A
recall asks for 50 vector hits, so the graph's 100 stay within its search depth (128);
more proposals need a deeper search and cost time for the same top 20."""
CONNECTIVITY = 32
EXPANSION_ADD = 200
"""Links per node and build depth: 32 links and depth 200 find clearly more of the exact
top 20 than 16 and 128, for a little more time and memory (bench/embedder_bench.py)."""
EXPANSION_SEARCH = 128
"""Search depth: deeper finds more of the exact top 20 and costs time, and a recall has
only a few milliseconds for its vector search (bench/embedder_bench.py). The chunks the
graph misses are near ties: the rows swapped in score within a few hundredths of those
left out."""
BUILD_THREADS = 1
"""Threads of a build: the other core stays with the bot's own work (a build of a
large scope takes minutes on one thread; it runs in the background)."""
BUILD_SLICE = 512
"""Rows per library call of a build: a graph no longer wanted stops within a slice."""
ADD_SLICE = 16
"""Rows per lock hold when adding to a graph that is searched meanwhile."""
PARAMS = f"ip/i8/{CONNECTIVITY}/{EXPANSION_ADD}"
"""What a graph was built with besides its size: a graph file records it, and one built
otherwise is not used (graph_files.py)."""


def available() -> bool:
    """Whether usearch is installed (found without importing it)."""
    try:
        return importlib.util.find_spec("usearch") is not None
    except (ImportError, ValueError):
        return False


class Stopped(Exception):
    """The build was no longer wanted."""


def library_version() -> str:
    """usearch's version: a graph file written by another one is built again rather than
    trusted to read the same."""
    import usearch

    return str(getattr(usearch, "__version__", "?"))


class Graph:
    """One scope's HNSW graph of chunk ids; safe to share between threads."""

    def __init__(self, dim: int, *, depth: int = EXPANSION_SEARCH) -> None:
        from usearch.index import Index

        self.dim = dim
        self._lock = threading.Lock()
        self._index: Any = Index(
            ndim=dim,
            metric="ip",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=depth,
        )
        self.unsaved = 0
        """Rows added or removed since the graph was last written out or read back: what
        a restart from its file would have to catch up."""

    @classmethod
    def restore(cls, dim: int, blob: bytes | memoryview) -> Graph:
        """A graph from what `dump` gave (ValueError when it is not one of `dim`)."""
        graph = cls(dim)
        try:
            graph._index.load(blob)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"not a graph: {exc}") from exc
        if int(graph._index.ndim) != dim:
            raise ValueError(f"a graph of {graph._index.ndim} dimensions, not {dim}")
        return graph

    def dump(self) -> tuple[bytearray, int]:
        """The whole graph as bytes, and `unsaved` at that moment (one lock hold: a search
        waits for the copy, about 0.1 s at 100 000 rows)."""
        with self._lock:
            return self._index.save(), self.unsaved

    def __len__(self) -> int:
        return len(self._index)

    @property
    def nbytes(self) -> int:
        return int(self._index.memory_usage)

    @property
    def depth(self) -> int:
        """The search depth (benches try several)."""
        return int(self._index.expansion_search)

    @depth.setter
    def depth(self, value: int) -> None:
        with self._lock:
            self._index.expansion_search = value

    def add(
        self,
        keys: Ids,
        vecs: Floats,
        *,
        threads: int = 1,
        step: int = ADD_SLICE,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """Add (or replace) the vectors of `keys`, `step` rows per lock hold; raises
        `Stopped` between slices once `stop()` says so."""
        for start in range(0, len(keys), step):
            if stop is not None and stop():
                raise Stopped
            part = np.ascontiguousarray(keys[start : start + step], dtype=np.uint64)
            rows = np.ascontiguousarray(vecs[start : start + step], dtype=np.float32)
            with self._lock:
                self._index.remove(part)  # usearch refuses a key twice
                self._index.add(part, rows, threads=threads)
                self.unsaved += len(part)
            time.sleep(0)  # let a waiting search take the lock

    def fill(
        self,
        keys: Ids,
        rows: Ids,
        vecs: Floats,
        stop: Callable[[], bool] | None = None,
        *,
        threads: int = 1,
        step: int = ADD_SLICE,
    ) -> None:
        """Add `keys`, whose vectors are `vecs[rows]`, gathered a slice at a time (never
        a copy of the whole matrix)."""
        for start in range(0, len(keys), BUILD_SLICE):
            part = slice(start, start + BUILD_SLICE)
            self.add(keys[part], vecs[rows[part]], threads=threads, step=step, stop=stop)

    def remove(self, keys: Iterable[int]) -> None:
        """Forget `keys` (unknown ones are ignored)."""
        wanted = np.fromiter(keys, dtype=np.uint64)
        if len(wanted):
            with self._lock:
                self._index.remove(wanted)
                self.unsaved += len(wanted)

    def search(self, query: Floats, count: int) -> Ids:
        """The keys of about `count` vectors nearest to `query` (a unit vector)."""
        with self._lock:
            if len(self._index) == 0:
                return np.zeros(0, dtype=np.int64)
            found = self._index.search(query, count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)


def build(
    dim: int,
    keys: Ids,
    rows: Ids,
    vecs: Floats,
    stop: Callable[[], bool],
    *,
    threads: int = BUILD_THREADS,
) -> Graph:
    """A graph of `keys`, whose vectors are `vecs[rows]` (gathered a slice at a time, so a
    build never copies the whole matrix). Runs in a worker thread: minutes for 100 000
    rows; `Stopped` when `stop()` says so."""
    graph = Graph(dim)
    graph.fill(keys, rows, vecs, stop, threads=threads, step=BUILD_SLICE)
    return graph
