"""Dense recall on PostgreSQL: pgvector holds and searches the vectors (an exact scan
for a small scope, the HNSW index for a large one); without pgvector the process
searches them as on SQLite, and says so at start."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import memory_core.storage.pg.vectors as pg_vectors
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore
from memory_core.storage.pg.vectors import PgVectorIndex
from memory_core.storage.vectors.index import VectorIndex
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.support import database, sql

pytestmark = pytest.mark.dense

NOTES = [
    "Mochi is a ragdoll, she sheds everywhere",
    "the boiler was serviced on Monday",
    "我下个月要去成都出差三天",
    "we adopted a grey rescue greyhound called Pepper",
]


@pytest.fixture
def pg_config(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[Config]:
    with postgres_server.schema() as dsn:
        env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
        yield load_config(None, env=env, workspace=tmp_path / "ws")


@pytest.fixture
async def pg_core(pg_config: Config) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as core:
        for scope in (MAIN, ScopeKey("peer:other")):
            for note in NOTES:
                await core.notes.append(scope, f"{note} ({scope.value})")
        await core.vectors_ready()
        yield core


def vectors_of(core: MemoryCore) -> object:
    index = core.guard.index
    assert index is not None
    return index.vectors


async def test_pgvector_holds_every_vector_and_an_hnsw_index(pg_core: MemoryCore) -> None:
    assert isinstance(vectors_of(pg_core), PgVectorIndex)
    [(total, with_embedding, dims)] = await sql(
        pg_core,
        "SELECT count(*), count(embedding), max(dims) FROM chunk_vectors",
    )
    assert total == with_embedding == 2 * len(NOTES)
    indexes = {r[0] for r in await sql(pg_core, "SELECT indexname FROM pg_indexes")}
    assert f"chunk_vectors_hnsw_{dims}" in indexes


@pytest.mark.parametrize("graph", [False, True], ids=["exact", "hnsw"])
async def test_the_database_finds_what_the_process_finds_in_the_scope_only(
    pg_core: MemoryCore, monkeypatch: pytest.MonkeyPatch, graph: bool
) -> None:
    """The nearest chunks pgvector gives are the ones an exact search in the process
    gives (same chunks, same order, cosines equal to float32 rounding), and only the
    scope's."""
    if graph:  # every scope counts as large: the HNSW index with an iterative scan
        monkeypatch.setattr(pg_vectors, "HNSW_FROM_ROWS", 1)
    in_db = vectors_of(pg_core)
    assert isinstance(in_db, PgVectorIndex)
    in_process = VectorIndex(database(pg_core), in_db.embedder, ann_min_rows=None)
    index = pg_core.guard.index
    assert index is not None
    for scope in (MAIN, ScopeKey("peer:other")):
        sid = await index.scope_id(scope)
        assert sid is not None
        for query in ("what breed is my kitty", "what dog did we get", "出差去哪"):
            vector = await in_db.embed_query(query)
            found = await in_db.search(sid, vector, 3)
            expected = await in_process.search(sid, vector, 3)
            assert [i for i, _ in found] == [i for i, _ in expected], (scope, query)
            assert [c for _, c in found] == pytest.approx([c for _, c in expected], abs=1e-5)
            for hit in await pg_core.finder.search(scope, query, limit=10):
                assert hit.text.endswith(f"({scope.value})"), (scope, query, hit)


async def test_without_pgvector_the_process_searches_and_says_so(
    pg_config: Config, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def missing(db: object) -> None:
        return None

    monkeypatch.setattr(pg_vectors, "ensure_pgvector", missing)
    caplog.set_level(logging.WARNING, logger="memory_core")
    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as core:
        vectors = vectors_of(core)
        assert isinstance(vectors, VectorIndex) and not isinstance(vectors, PgVectorIndex)
        await core.notes.append(MAIN, NOTES[0])
        await core.vectors_ready()
        hits = await core.finder.search(MAIN, "what breed is my kitty", limit=3)
        assert hits and "ragdoll" in hits[0].text
    assert any("pgvector is not installed" in r.getMessage() for r in caplog.records)
