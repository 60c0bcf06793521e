"""One scope's vectors in memory: a float32 matrix with per-row chunk id, text hash, kind
and path, searched exactly (every row) or through the approximate-neighbour graph's
candidates. Pure numpy, no I/O: `VectorIndex` (index.py) loads it, keeps it up to date
and runs its searches in a worker thread once it is large."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memory_core.storage.vectors import codec
from memory_core.storage.vectors.ann import Graph
from memory_core.storage.vectors.rows import VectorRow

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]
    Ids = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class GraphContent:
    """What a graph holds, as its matrix says: the chunk ids whose vector it has with the
    text hash of each (`S32`), and the ids it may still hold stale vectors of (removed
    from the matrix since it last caught up)."""

    keys: Ids
    marks: npt.NDArray[np.bytes_]
    unknown: list[int]


@dataclass(frozen=True, slots=True)
class Inherited:
    """The graph of the matrix a new one replaced (another process wrote: the scope is
    loaded again), with what it held then (being read off the old matrix in a worker
    thread): the new matrix's graph takes in only the difference."""

    graph: Graph
    content: asyncio.Future[GraphContent]


class VectorMatrix:
    """One scope's vectors: rows in a float32 array with room to grow, and per row the
    chunk id, text hash, kind and path. Rows are appended, and removed by marking them
    (id -1, zero vector), so a search reading rows below the count it started with, in a
    worker thread, never sees a row move; `compacted` makes a fresh copy without the
    marked rows."""

    def __init__(self, dim: int, version: int, capacity: int = 64) -> None:
        self.dim = dim
        self.version = version
        self.vecs: Floats = np.zeros((capacity, dim), dtype=np.float32)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.kinds = np.zeros(capacity, dtype=np.int16)
        self.paths = np.zeros(capacity, dtype=np.int32)
        self.hashes: list[str] = []
        self.kind_codes: dict[str, int] = {}
        self.path_codes: dict[str, int] = {}
        self.where: dict[int, int] = {}
        self.n = 0
        self.removed = 0
        self.graph: Graph | None = None
        """The scope's graph once built or read; it holds the live rows below
        `graph_upto` but those of `pending`."""
        self.graph_upto = 0
        self.pending: Ids = np.zeros(0, dtype=np.int64)
        """Rows below `graph_upto` the graph does not hold yet (a graph read from its file
        or inherited holds what matched then; the first catch-up adds these): searched
        exactly meanwhile, like the rows from `graph_upto` on."""
        self.inherited: Inherited | None = None
        """The graph of the matrix this one replaced, to be taken over (graphs.py)."""
        self.dropped: list[int] | None = None
        """Chunk ids removed since the graph last caught up (None while no graph is
        built or being built)."""
        self.graph_failed = False
        """A build failed: this matrix is searched exactly (a load afresh tries again)."""

    def _put(self, start: int, vecs: Floats, rows: Sequence[VectorRow]) -> None:
        """Rows `start..` from `vecs` and the metadata of `rows` (their `vec` unused)."""
        end = start + len(rows)
        self.vecs[start:end] = vecs
        self.kinds[start:end] = [
            self.kind_codes.setdefault(r.kind, len(self.kind_codes)) for r in rows
        ]
        self.paths[start:end] = [
            self.path_codes.setdefault(r.path, len(self.path_codes)) for r in rows
        ]
        del self.hashes[start:]
        self.hashes += [row.text_hash for row in rows]
        for offset, row in enumerate(rows):
            self.where[row.chunk_id] = start + offset
        # Ids last: a concurrent reader takes a row only once its id is set.
        self.ids[start:end] = [row.chunk_id for row in rows]
        self.n = end

    @property
    def live(self) -> int:
        return self.n - self.removed

    @property
    def nbytes(self) -> int:
        arrays = self.vecs.nbytes + self.ids.nbytes + self.kinds.nbytes + self.paths.nbytes
        return int(arrays + (self.graph.nbytes if self.graph is not None else 0))

    def apply(
        self, rows: Sequence[VectorRow], removed: Sequence[int], *, stored: bool = False
    ) -> None:
        """This process's own write: drop `removed`, replace or add `rows` (float32
        bytes; with `stored`, the bytes as stored, converted here in one go)."""
        for chunk_id in [*removed, *(row.chunk_id for row in rows)]:
            self._remove(chunk_id)
        if not rows:
            return
        need = self.n + len(rows)
        if need > len(self.ids):
            self._grow(need + max(64, need // 4))
        blob = b"".join(row.vec for row in rows)
        start = self.n
        dtype = "<f2" if stored else np.float32
        self._put(start, np.frombuffer(blob, dtype=dtype).reshape(len(rows), self.dim), rows)
        if stored:
            codec.normalise(self.vecs[start : start + len(rows)])

    def _remove(self, chunk_id: int) -> None:
        row = self.where.pop(chunk_id, None)
        if row is None:
            return
        if self.dropped is not None:
            self.dropped.append(chunk_id)
        self.ids[row] = -1
        self.vecs[row] = 0.0
        self.hashes[row] = ""
        self.removed += 1

    def _grow(self, capacity: int) -> None:
        """New arrays (a reader in a thread keeps the old ones it holds)."""
        n = self.n
        vecs = np.zeros((capacity, self.dim), dtype=np.float32)
        vecs[:n] = self.vecs[:n]
        ids = np.full(capacity, -1, dtype=np.int64)
        ids[:n] = self.ids[:n]
        kinds = np.zeros(capacity, dtype=np.int16)
        kinds[:n] = self.kinds[:n]
        paths = np.zeros(capacity, dtype=np.int32)
        paths[:n] = self.paths[:n]
        self.vecs, self.ids, self.kinds, self.paths = vecs, ids, kinds, paths

    def graph_content(self) -> GraphContent:
        """What the graph holds (see `GraphContent`), from this matrix's rows."""
        upto = min(self.graph_upto, self.n)
        held = self.ids[:upto] >= 0
        if len(self.pending):
            held[self.pending[self.pending < upto]] = False
        rows = np.flatnonzero(held)
        marks = np.array([self.hashes[i] for i in rows.tolist()], dtype="S32")
        return GraphContent(self.ids[rows].copy(), marks, list(self.dropped or []))

    def wants_compaction(self) -> bool:
        return self.removed > max(1024, self.n // 4)

    def compacted(self) -> VectorMatrix:
        keep = np.flatnonzero(self.ids[: self.n] >= 0)
        kind_names = {code: name for name, code in self.kind_codes.items()}
        path_names = {code: name for name, code in self.path_codes.items()}
        rows = [
            VectorRow(
                int(self.ids[i]),
                self.hashes[i],
                kind_names[int(self.kinds[i])],
                path_names[int(self.paths[i])],
                b"",
            )
            for i in keep.tolist()
        ]
        fresh = VectorMatrix(self.dim, self.version, len(rows) + max(64, len(rows) // 16))
        fresh._put(0, self.vecs[keep], rows)
        # The graph holds chunk ids, which compaction keeps: it moves over as it is.
        fresh.graph = self.graph
        fresh.graph_upto = int(np.searchsorted(keep, self.graph_upto))
        pending = self.pending[np.isin(self.pending, keep)]
        fresh.pending = np.searchsorted(keep, pending).astype(np.int64)
        fresh.dropped = None if self.dropped is None else list(self.dropped)
        fresh.inherited = self.inherited
        return fresh

    def scores(
        self, query: Floats, kinds: Sequence[str] | None, exclude_paths: Sequence[str]
    ) -> Floats:
        """Cosine of every row (the rows and the query are unit vectors); -inf for rows
        removed or filtered out."""
        n = self.n
        out: Floats = self.vecs[:n] @ query
        out[~self._passing(slice(0, n), kinds, exclude_paths)] = -np.inf
        return out

    def _passing(
        self,
        rows: slice | Ids,
        kinds: Sequence[str] | None,
        exclude_paths: Sequence[str],
    ) -> npt.NDArray[np.bool_]:
        """Which of `rows` are live and pass the filters."""
        valid: npt.NDArray[np.bool_] = self.ids[rows] >= 0
        # Filters by lookup table (one gather; np.isin sorts, ten times slower here).
        if kinds is not None:
            wanted = np.zeros(len(self.kind_codes) + 1, dtype=bool)
            wanted[[self.kind_codes[k] for k in kinds if k in self.kind_codes]] = True
            valid &= wanted[self.kinds[rows]]
        codes = [self.path_codes[p] for p in exclude_paths if p in self.path_codes]
        if codes:
            kept = np.ones(len(self.path_codes) + 1, dtype=bool)
            kept[codes] = False
            valid &= kept[self.paths[rows]]
        return valid

    def near(
        self,
        graph: Graph,
        query: Floats,
        count: int,
        kinds: Sequence[str] | None,
        exclude_paths: Sequence[str],
    ) -> tuple[Floats, Ids]:
        """Exact cosines of the graph's `count` candidates and of the rows it does not hold
        yet, and their rows; -inf for rows removed or filtered out (a worker thread)."""
        n = self.n
        upto = min(self.graph_upto, n)
        where = self.where
        found = [where.get(key, n) for key in graph.search(query, count).tolist()]
        picked = np.fromiter((row for row in found if row < n), dtype=np.int64)
        rows: Ids = np.unique(
            np.concatenate([picked, self.pending, np.arange(upto, n, dtype=np.int64)])
        )
        out: Floats = self.vecs[rows] @ query
        out[~self._passing(rows, kinds, exclude_paths)] = -np.inf
        return out, rows

    def pick(self, scores: Floats, m: int, rows: Ids | None = None) -> list[tuple[int, str, float]]:
        """(chunk id, text hash, score) of the best `m` rows, best first: `scores` are of
        every row, or of `rows` when given."""
        if m < len(scores):
            best = np.argpartition(-scores, m)[:m]
            best = best[np.argsort(-scores[best], kind="stable")]
        else:
            best = np.argsort(-scores, kind="stable")
        out = []
        for i in best.tolist():
            score = float(scores[i])
            row = i if rows is None else int(rows[i])
            chunk_id = int(self.ids[row])
            if score == -np.inf or chunk_id < 0:
                break
            out.append((chunk_id, self.hashes[row], score))
        return out
