"""Dense recall on PostgreSQL with pgvector: searched in the process, as on SQLite, with
pgvector's HNSW index answering a large scope until the process is ready for it.

Without pgvector the PostgreSQL backend searches vectors as the SQLite one does, in the
process (`VectorIndex`: each scope's matrix loaded from `embeddings`). With it
(`CREATE EXTENSION vector`, version 0.8 or newer), every vector is also an `embedding`
column, and `PgVectorIndex` searches

* a scope under `HNSW_FROM_ROWS` vectors exactly from its matrix, as SQLite does: loaded
  once, taking this process's own writes as they are made, and checked against every
  other writer (another replica, a CLI command) by the scope's vector version, which
  each search reads back with its hits; a changed version loads it again (a few pages);
* a larger scope from its matrix through its HNSW graph (usearch, graphs.py) once both
  are ready. Until then (they are made in the background: seconds to load, minutes to
  build a graph), and while the matrix misses another writer's change, the database
  answers through its own HNSW index (one per vector size, an expression index over
  `embedding::vector(d)`) with pgvector's iterative scan, so a scope's filter still
  yields `k` rows. Another writer's change is taken in by a catch-up (`_catch_up`: the
  scope's chunk ids and text hashes against the matrix's, then the new vectors), so the
  matrix is not loaded again nor its graph rebuilt.

*Why in the process*: pgvector searched a small scope by an exact scan of its rows
joined to `chunks`, several times slower than a matrix in the process, and its HNSW
index was slower than the process's graph and found less of the exact top 20
(bench/pg_scale_bench.py --hybrid; docs/decisions/0002-sqlite-and-postgresql.md). The cost is memory in every
process that searches the scope (its matrix, 2 KB a 512-d vector, and a large scope's
graph; `MAX_BYTES` for all of them) and a graph built in each process.

The backfill (which chunks need a vector, the model, the cache) is `VectorIndex`'s; its
batches are written through `PgVectorWriter`, which fills `embedding` in the same
transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memory_core.base.errors import DatabaseConflict, DatabaseFailure
from memory_core.base.scope_names import scope_name
from memory_core.base.sql import Connection, Db
from memory_core.embedding.base import EmbeddingError
from memory_core.storage.pg.database import apply_step
from memory_core.storage.pg.migrations import PGVECTOR, hnsw_step
from memory_core.storage.vectors import codec
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.ann import CANDIDATES
from memory_core.storage.vectors.index import VectorIndex
from memory_core.storage.vectors.matrix import VectorMatrix
from memory_core.storage.vectors.rows import ChunkText, Stored, VectorRow

if TYPE_CHECKING:
    Floats = npt.NDArray[np.float32]

log = logging.getLogger(__name__)

MIN_VERSION = (0, 8)
"""Iterative index scans (a filtered HNSW search that still returns `k` rows)."""
HNSW_FROM_ROWS = 20_000
"""A scope with fewer vectors is searched exactly from its matrix (40 MB of 512-d float32
at most, 2.5 ms a search); a larger one through a graph (`ann.ANN_MIN_ROWS`, the same
size), or by the database's HNSW index until the graph is ready."""
EF_SEARCH = 100
"""Candidates the graph keeps per search (pgvector's `hnsw.ef_search`)."""


async def ensure_pgvector(db: Db) -> str | None:
    """pgvector's version once the extension and the `embedding` column are in place
    (the recorded step `PGVECTOR`, storage/pg/migrations.py); None when the server lacks it (or
    the role may not create it). A server that cannot be asked is a `DatabaseUnreachable`:
    that says nothing of pgvector."""

    def prepare(conn: Connection) -> str | None:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        found = row.fetchone()
        if found is None:
            available = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            if available is None:
                return None
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            found = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        version = str(found[0])
        if _version(version) < MIN_VERSION:
            return None
        apply_step(conn, PGVECTOR)
        return version

    try:
        return await db.write(prepare)
    except (DatabaseFailure, DatabaseConflict) as exc:  # no extension, a race to create it
        log.warning("pgvector cannot be used here (%s)", exc)
        return None


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def literal(vector: Any) -> str:
    """A vector in pgvector's text form."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


class PgVectorWriter:
    """`vectors.store` and each stored row's `embedding`, in one transaction; the HNSW
    index of a vector size is made before the first write of that size."""

    def __init__(self, db: Db) -> None:
        self._db = db
        self._hnsw: set[int] = set()
        self._making_hnsw = asyncio.Lock()

    async def write(
        self,
        sid: int,
        model: str,
        items: list[tuple[ChunkText, bytes]],
        cache_rows: list[tuple[str, bytes]],
        stale: list[int],
    ) -> Stored:
        dim = len(items[0][1]) // 4 if items else 0
        if dim and dim not in self._hnsw:
            async with self._making_hnsw:  # several scopes' backfills start at once
                if dim not in self._hnsw:
                    await self._db.write(partial(_ensure_hnsw, dim=dim))
                    self._hnsw.add(dim)
        return await self._db.write(
            partial(
                _store,
                sid=sid,
                model=model,
                items=items,
                cache_rows=cache_rows,
                stale=stale,
            )
        )


class PgVectorIndex(VectorIndex):
    """`VectorIndex` over PostgreSQL: every scope searched in the process once its matrix
    (and, for a large one, its graph) is ready, pgvector's HNSW index answering a large
    scope until then; the backfill writing through `PgVectorWriter`."""

    def __init__(self, db: Db, *args: Any, **kwargs: Any) -> None:
        super().__init__(
            db, *args, ann_min_rows=HNSW_FROM_ROWS, writer=PgVectorWriter(db), **kwargs
        )
        self._large: set[int] = set()
        """Scopes found to hold `HNSW_FROM_ROWS` vectors or more (until `invalidate`:
        a rebuild, a purge)."""
        self._behind: set[int] = set()
        """Large scopes whose matrix misses another writer's change: the database
        answers them until `_catch_up` has taken the change in."""
        self._warming: dict[int, asyncio.Task[None]] = {}
        self._closing = False

    async def _is_large(self, scope_id: int) -> bool:
        """Whether the scope holds `HNSW_FROM_ROWS` vectors or more: from its matrix when
        one is loaded, else a count from the index (once per scope until it is large)."""
        if scope_id in self._large:
            return True
        matrix = self._matrices.get(scope_id)
        rows = (
            matrix.live
            if matrix is not None
            else await self._db.read(partial(vectors.count, sid=scope_id, model=self.model))
        )
        if rows < HNSW_FROM_ROWS:
            return False
        self._large.add(scope_id)
        return True

    async def search(
        self,
        scope_id: int,
        query: Any,
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        exclude_paths: Sequence[str] = (),
    ) -> list[tuple[int, float]]:
        if k <= 0:
            return []
        if not await self._is_large(scope_id):
            return await super().search(
                scope_id, query, k, kinds=kinds, exclude_paths=exclude_paths
            )
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or not np.isfinite(norm):
            return []
        q = q / norm
        matrix = self._matrices.get(scope_id)
        if matrix is not None and matrix.graph is not None and scope_id not in self._behind:
            found = await self._from_graph(scope_id, matrix, q, k, kinds, exclude_paths)
            if found is not None:
                return found
        self._warm(scope_id)
        return await self._db.write(
            partial(
                _nearest,
                sid=scope_id,
                model=self.model,
                query=literal(q),
                dim=int(q.shape[0]),
                k=k,
                kinds=kinds,
                exclude_paths=list(exclude_paths),
            )
        )

    async def _held(self, sid: int) -> VectorMatrix | None:
        """A large scope's matrix only once loaded: its first searches are the database's
        while it loads in the background, and the extra comparisons wait for it too."""
        if await self._is_large(sid):
            self._warm(sid)
            return self._matrices.get(sid)
        return await super()._held(sid)

    async def _from_graph(
        self,
        sid: int,
        matrix: VectorMatrix,
        q: Floats,
        k: int,
        kinds: Sequence[str] | None,
        exclude_paths: Sequence[str],
    ) -> list[tuple[int, float]] | None:
        """The best `k` of the graph's candidates, scored exactly and read back through
        `chunks` (scope, visibility, filters, text hash) as `VectorIndex` does; None when
        the database should answer instead: the scope's version shows another writer's
        change (a catch-up starts), or the filters left fewer than `k` of them."""
        if q.shape[0] != matrix.dim:
            raise EmbeddingError(
                f"query has {q.shape[0]} dimensions, the scope's vectors {matrix.dim}"
            )
        if matrix.wants_compaction():
            matrix = await asyncio.to_thread(matrix.compacted)
            self._matrices[sid] = matrix
        self._matrices.move_to_end(sid)
        graph = matrix.graph
        assert graph is not None
        scores, rows = await asyncio.to_thread(
            matrix.near, graph, q, k * CANDIDATES, kinds, exclude_paths
        )
        picked = matrix.pick(scores, max(2 * k, k + 16), rows)
        version, texts = await self._recheck(sid, picked, kinds, exclude_paths)
        if version != matrix.version:
            self._behind.add(sid)
            return None
        hits = [
            (chunk_id, score)
            for chunk_id, digest, score in picked
            if (text := texts.get(chunk_id)) is not None and vectors.text_hash(text) == digest
        ]
        return hits[:k] if len(hits) >= k else None

    def _warm(self, sid: int) -> None:
        """Make the large scope's matrix and graph ready in the background: load it (or
        take in what other writers changed), then build its graph."""
        if self._closing or sid in self._warming:
            return
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to start
            self._warming[sid] = asyncio.get_running_loop().create_task(
                self._warm_up(sid), name=f"chatmem-pg-warm-{sid}"
            )

    async def _warm_up(self, sid: int) -> None:
        try:
            matrix = self._matrices.get(sid)
            if matrix is not None and sid in self._behind:
                await self._catch_up(sid, matrix)
            await super().load(sid)  # loads a missing matrix, starts its graph
            if self._matrices.get(sid) is not matrix:
                self._behind.discard(sid)  # loaded afresh (it had been evicted)
            await super().wait_graph(sid)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a background task: the database answers meanwhile
            log.warning(
                "vectors of scope %s stay in the database for now: %s", scope_name(sid), exc
            )
        finally:
            self._warming.pop(sid, None)

    async def _catch_up(self, sid: int, matrix: VectorMatrix) -> None:
        """Take another writer's changes into the matrix (and its graph) without loading
        it again: the scope's (chunk id, text hash) list, read with its version in one
        snapshot from the covering index, against the matrix's; then the vectors of new
        or changed chunks, a page at a time. A scope of 100 000 vectors reads 100 000
        short index entries, where a load reads 200 MB and a graph takes minutes."""
        version, listing = await self._db.read(partial(_listing, sid=sid, model=self.model))
        where, hashes = matrix.where, matrix.hashes
        wanted = [
            chunk_id
            for chunk_id, digest in listing.items()
            if (row := where.get(chunk_id)) is None or hashes[row] != digest
        ]
        gone = [chunk_id for chunk_id in where if chunk_id not in listing]
        rows: list[VectorRow] = []
        for start in range(0, len(wanted), vectors.PAGE):
            rows += await self._db.read(
                partial(
                    _rows_of,
                    sid=sid,
                    model=self.model,
                    chunk_ids=wanted[start : start + vectors.PAGE],
                )
            )
        if self._matrices.get(sid) is not matrix:
            return  # loaded afresh or evicted meanwhile
        matrix.apply([row for row in rows if len(row.vec) == matrix.dim * 4], gone)
        matrix.version = version
        self._behind.discard(sid)
        if matrix.graph is not None:
            self._graphs.update(sid, matrix)

    def _stored(self, sid: int, result: Stored) -> None:
        """This process's write: as `VectorIndex` takes it in, but a large scope's matrix
        that missed another writer's change in between keeps its graph: the rows go in,
        and the rest comes with a catch-up (the database answers until then)."""
        matrix = self._matrices.get(sid)
        if (
            sid in self._large
            and matrix is not None
            and result.version is not None
            and matrix.version != result.version - 1
        ):
            matrix.apply(
                [row for row in result.rows if len(row.vec) == matrix.dim * 4], result.removed
            )
            if matrix.graph is not None:
                self._graphs.update(sid, matrix)
            self._behind.add(sid)
            return
        super()._stored(sid, result)

    def invalidate(self, scope_id: int | None = None) -> None:
        super().invalidate(scope_id)
        if scope_id is None:
            self._large.clear()
            self._behind.clear()
        else:
            self._large.discard(scope_id)
            self._behind.discard(scope_id)

    async def load(self, scope_id: int) -> int:
        """The scope's vectors: a small scope's matrix loaded now; a large one's made
        ready in the background (the database answers meanwhile)."""
        if not await self._is_large(scope_id):
            return await super().load(scope_id)
        self._warm(scope_id)
        return int(await self._db.read(partial(vectors.count, sid=scope_id, model=self.model)))

    async def wait_graph(self, scope_id: int) -> bool:
        """Wait for a large scope's matrix and graph to be ready (benches, tests);
        whether its searches now go through the graph."""
        if not await self._is_large(scope_id):
            return False
        while (task := self._warming.get(scope_id)) is not None:
            await asyncio.gather(task, return_exceptions=True)
        matrix = self._matrices.get(scope_id)
        return matrix is not None and matrix.graph is not None

    async def close(self) -> None:
        self._closing = True
        tasks = list(self._warming.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await super().close()


def _listing(conn: Connection, sid: int, model: str) -> tuple[int, dict[int, str]]:
    """The scope's vector version and chunk id -> text hash of its vectors of `model`,
    in one snapshot (from the covering index `chunk_vectors_scope`)."""

    def read(conn: Connection) -> tuple[int, dict[int, str]]:
        rows = conn.execute(
            "SELECT chunk_id, text_hash FROM chunk_vectors WHERE scope_id = ? AND model = ?",
            (sid, model),
        ).fetchall()
        return vectors.version(conn, sid), {int(r[0]): str(r[1]) for r in rows}

    return vectors.snapshot(conn, read)


def _rows_of(conn: Connection, sid: int, model: str, chunk_ids: Sequence[int]) -> list[VectorRow]:
    """The vectors of `chunk_ids` (float32 bytes, from `embeddings` where each is stored
    once as float16, as a load reads them) with their chunk's kind and path (a vector
    whose chunk left the scope is skipped, as a load skips it)."""
    found = conn.execute(
        "SELECT v.chunk_id, v.text_hash, c.kind, c.path, e.vec FROM chunk_vectors AS v"
        " JOIN chunks AS c ON c.id = v.chunk_id AND c.scope_id = v.scope_id"
        " JOIN embeddings AS e ON e.model = v.model AND e.text_hash = v.text_hash"
        " WHERE v.scope_id = ? AND v.model = ? AND v.chunk_id = ANY(?)",
        (sid, model, list(chunk_ids)),
    ).fetchall()
    vecs = codec.many_to_memory([bytes(r[4]) for r in found])
    return [
        VectorRow(int(r[0]), str(r[1]), str(r[2]), str(r[3]), vec)
        for r, vec in zip(found, vecs, strict=True)
    ]


def _ensure_hnsw(conn: Connection, dim: int) -> None:
    """The HNSW index of one vector size, a recorded step (`hnsw_step`): `CREATE INDEX IF
    NOT EXISTS` is not safe against another process making the same index at the same
    moment, and the step's advisory lock orders them (inside `write`)."""
    apply_step(conn, hnsw_step(dim))


def _store(
    conn: Connection,
    sid: int,
    model: str,
    items: Sequence[tuple[ChunkText, bytes]],
    cache_rows: Sequence[tuple[str, bytes]],
    stale: Sequence[int],
) -> Stored:
    """`vectors.store`, and the stored rows' `embedding` in the same transaction."""
    stored = vectors.store(conn, sid, model, items, cache_rows, stale)
    conn.executemany(
        "UPDATE chunk_vectors SET embedding = ?::vector, dims = ? WHERE chunk_id = ?",
        [
            (literal(np.frombuffer(row.vec, dtype=np.float32)), len(row.vec) // 4, row.chunk_id)
            for row in stored.rows
        ],
    )
    return stored


def _nearest(
    conn: Connection,
    sid: int,
    model: str,
    query: str,
    dim: int,
    k: int,
    kinds: Sequence[str] | None,
    exclude_paths: Sequence[str],
) -> list[tuple[int, float]]:
    """The scope's `k` visible chunks nearest to `query` (cosine), best first."""
    size = conn.execute("SELECT chunk_count FROM scopes WHERE id = ?", (sid,)).fetchone()
    rows_in_scope = int(size[0]) if size else 0
    filters = [
        "v.scope_id = ?",
        "v.model = ?",
        f"v.dims = {int(dim)}",
        "c.scope_id = ?",
        "c.hidden = 0",
    ]
    params: list[object] = [sid, model, sid]
    if kinds is not None:
        if not kinds:
            return []
        filters.append(f"c.kind IN ({','.join('?' * len(kinds))})")
        params.extend(kinds)
    if exclude_paths:
        filters.append(f"c.path NOT IN ({','.join('?' * len(exclude_paths))})")
        params.extend(exclude_paths)
    if rows_in_scope >= HNSW_FROM_ROWS:
        conn.execute(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, k)}")
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # The HNSW index's own expression, so the planner can use it.
        distance = f"v.embedding::vector({int(dim)}) <=> ?::vector({int(dim)})"
    else:
        # An exact scan of the scope's rows: the column as it is (no index has this
        # expression, and no cast copies each vector).
        distance = "v.embedding <=> ?::vector"
    rows = conn.execute(
        f"SELECT v.chunk_id, {distance} AS d FROM chunk_vectors AS v"
        f" JOIN chunks AS c ON c.id = v.chunk_id WHERE {' AND '.join(filters)}"
        f" ORDER BY {distance} LIMIT ?",
        [query, *params, query, k],
    ).fetchall()
    found = sorted(((int(r[0]), 1.0 - float(r[1])) for r in rows), key=lambda t: -t[1])
    return found
