"""Dense recall in PostgreSQL with pgvector: the vectors searched where they are stored.

Without pgvector the PostgreSQL backend searches vectors as the SQLite one does, in the
process (`VectorIndex`: each scope's matrix loaded from `embeddings`). With it
(`CREATE EXTENSION vector`, version 0.8 or newer), every vector is also an `embedding`
column, and `PgVectorIndex` asks the database for a scope's nearest chunks: an exact
scan of the scope's rows for a scope under `HNSW_FROM_ROWS` vectors, an HNSW index (one
per vector size, an expression index over `embedding::vector(d)`) with pgvector's
iterative scan for larger scopes, so a scope's filter still yields `k` rows. Each
replica then holds no matrices of its own and sees another replica's vectors at once.
The backfill (which chunks need a vector, the model, the cache) is `VectorIndex`'s; its
batches are written through `PgVectorWriter`, which fills `embedding` in the same
transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from memory_core.base.errors import DatabaseConflict, DatabaseFailure, DatabaseUnreachable
from memory_core.base.sql import Connection, Db
from memory_core.storage.pg.database import apply_step
from memory_core.storage.pg.migrations import PGVECTOR, hnsw_step
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.index import VectorIndex
from memory_core.storage.vectors.rows import ChunkText, Stored

log = logging.getLogger(__name__)

MIN_VERSION = (0, 8)
"""Iterative index scans (a filtered HNSW search that still returns `k` rows)."""
HNSW_FROM_ROWS = 20_000
"""A scope with fewer vectors is scanned exactly (all its rows, by its own index): below
this an exact scan costs less than a graph search and is never approximate."""
EF_SEARCH = 100
"""Candidates the graph keeps per search (pgvector's `hnsw.ef_search`)."""


async def ensure_pgvector(db: Db) -> str | None:
    """pgvector's version once the extension and the `embedding` column are in place
    (the recorded step `PGVECTOR`, storage/pg/migrations.py); None when the server lacks it (or
    the role may not create it)."""

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
        return await db.run(prepare)
    except (
        DatabaseFailure,
        DatabaseConflict,
        DatabaseUnreachable,
    ) as exc:  # no extension, a race to create it, no server
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
                    await self._db.run(partial(_ensure_hnsw, dim=dim))
                    self._hnsw.add(dim)
        return await self._db.run(
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
    """`VectorIndex` whose searches run in PostgreSQL (pgvector), its backfill writing
    through `PgVectorWriter`."""

    def __init__(self, db: Db, *args: Any, **kwargs: Any) -> None:
        super().__init__(db, *args, ann_min_rows=None, writer=PgVectorWriter(db), **kwargs)

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
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0.0 or not np.isfinite(norm):
            return []
        return await self._db.run(
            partial(
                _nearest,
                sid=scope_id,
                model=self.model,
                query=literal(q / norm),
                dim=int(q.shape[0]),
                k=k,
                kinds=kinds,
                exclude_paths=list(exclude_paths),
            )
        )

    async def load(self, scope_id: int) -> int:
        """The scope's vectors (nothing to load: they are searched where they are)."""
        return int(await self._db.call(partial(vectors.count, sid=scope_id, model=self.model)))

    async def wait_graph(self, scope_id: int) -> bool:
        """Whether the scope's searches go through the HNSW index (a large scope); the
        database keeps the index current, so there is nothing to wait for."""
        return await self.load(scope_id) >= HNSW_FROM_ROWS


def _ensure_hnsw(conn: Connection, dim: int) -> None:
    """The HNSW index of one vector size, a recorded step (`hnsw_step`): `CREATE INDEX IF
    NOT EXISTS` is not safe against another process making the same index at the same
    moment, and the step's advisory lock orders them (inside `run`)."""
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
