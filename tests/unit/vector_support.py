"""What the vector index tests share: crafted 4-d vectors whose cosine with the query is
their first coordinate, a fake embedding server, a database, an index, and helpers that
add, delete and read chunks."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import openai
import pytest

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.embedding.remote import OpenAIEmbedder
from memory_core.recall.index import writes
from memory_core.storage.db import Database
from memory_core.storage.vectors.index import VectorIndex
from testkit.openai_server import FakeOpenAI

DAILY = "memory/2026-03-01.md"


# Crafted 4-d vectors: cosine with the query AXIS is the first coordinate.
AXIS = [1.0, 0.0, 0.0, 0.0]


CRAFTED = {
    "alpha": [1.0, 0.0, 0.0, 0.0],
    "beta": [0.8, 0.6, 0.0, 0.0],
    "gamma": [0.0, 1.0, 0.0, 0.0],
    "delta": [-1.0, 0.0, 0.0, 0.0],
    "epsilon": [0.6, 0.0, 0.8, 0.0],
}


def crafted(text: str, dim: int) -> list[float]:
    """Known texts get their vector; any other text a fixed one far from AXIS."""
    return CRAFTED.get(text, [0.0, 0.0, 0.0, 1.0])


@pytest.fixture(name="fake")
async def fake_fixture() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_dim=4) as server:
        server.set_embedding(crafted)
        yield server


@pytest.fixture(name="db")
async def db_fixture(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "index.sqlite3")
    yield database
    await database.close()


def embedder(fake: FakeOpenAI, *, batch_size: int = 64) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "emb",
        base_url=fake.base_url,
        api_key="k",
        batch_size=batch_size,
        max_retries=0,
        timeout_seconds=5.0,
        http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
    )


@pytest.fixture(name="index")
async def index_fixture(db: Database, fake: FakeOpenAI) -> AsyncIterator[VectorIndex]:
    vi = VectorIndex(db, embedder(fake), batch_size=2)
    yield vi
    await vi.close()


async def add(
    db: Database,
    scope: str,
    texts: Sequence[str],
    *,
    path: str = DAILY,
    kind: ChunkKind = ChunkKind.DAILY,
) -> tuple[int, list[int]]:
    """Chunks written the way the index writes them; (scope id, their ids)."""

    def work(conn: sqlite3.Connection) -> tuple[int, list[int]]:
        sid = writes.ensure_scope(conn, scope)
        first = conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0] + 1
        # Lines after every earlier chunk's: the schema holds one chunk per line.
        rows = [(Chunk(first + i, first + i, t, None), t.lower()) for i, t in enumerate(texts)]
        writes.insert_chunks(conn, sid, path, kind, rows)
        return sid, list(range(first, first + len(texts)))

    return await db.write(work)


async def delete(db: Database, sid: int, chunk_ids: Sequence[int]) -> None:
    def work(conn: sqlite3.Connection) -> None:
        marks = ",".join("?" * len(chunk_ids))
        rows = conn.execute(
            f"SELECT id, tokens FROM chunks WHERE id IN ({marks})", list(chunk_ids)
        ).fetchall()
        writes.delete_rows(conn, sid, rows)

    await db.write(work)


async def stored(db: Database) -> dict[int, tuple[int, str]]:
    """chunk id → (scope id, text hash) of every stored vector."""
    rows = await db.read(
        lambda conn: conn.execute(
            "SELECT chunk_id, scope_id, text_hash FROM chunk_vectors"
        ).fetchall()
    )
    return {int(r[0]): (int(r[1]), str(r[2])) for r in rows}


def query(vector: Sequence[float] = AXIS) -> np.ndarray:
    return np.array(vector, dtype=np.float32)


# --- a large scope, searched through its graph (test_vector_graph*.py) ---------------


GRAPH_DIM = 32
GRAPH_ROWS = 600


def seeded(text: str, dim: int) -> list[float]:
    """ "s17" → a fixed random vector of its own; "q…" texts too (the queries)."""
    seed = int(text[1:]) + (1_000_000 if text[0] == "q" else 0)
    return list(np.random.default_rng(seed).standard_normal(dim))


def probes(count: int = 20) -> list[np.ndarray]:
    return [np.array(seeded(f"q{i}", GRAPH_DIM), dtype=np.float32) for i in range(count)]


async def graph_scope(
    db: Database, fake: FakeOpenAI, *, scope: str = "main", rows: int = GRAPH_ROWS
) -> tuple[int, list[int]]:
    sid, ids = await add(db, scope, [f"s{i}" for i in range(rows)])
    vi = VectorIndex(db, embedder(fake), ann_min_rows=None)
    try:
        assert await vi.backfill(sid) == rows
    finally:
        await vi.close()
    return sid, ids
