"""Dense recall on PostgreSQL: pgvector holds every vector; a small scope is searched in
the process as on SQLite (its matrix, checked against other writers), a large one by the
HNSW index; without pgvector the process searches them all as on SQLite, and says so at
start."""

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
from memory_core.recall.request import SearchRequest
from memory_core.storage.pg.vectors import PgVectorIndex
from memory_core.storage.vectors.index import VectorIndex
from tests.conftest import START
from tests.postgres import PostgresServer
from tests.support import database, index_of, sql

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


async def pg_vectors_of(core: MemoryCore) -> tuple[PgVectorIndex, int]:
    """The core's in-process PostgreSQL vector index and the main scope's id."""
    vectors = vectors_of(core)
    assert isinstance(vectors, PgVectorIndex)
    sid = await index_of(core).scope_id(MAIN)
    assert sid is not None
    return vectors, sid


async def test_pgvector_holds_every_vector_and_an_hnsw_index(pg_core: MemoryCore) -> None:
    assert isinstance(vectors_of(pg_core), PgVectorIndex)
    [(total, with_embedding, dims)] = await sql(
        pg_core,
        "SELECT count(*), count(embedding), max(dims) FROM chunk_vectors",
    )
    assert total == with_embedding == 2 * len(NOTES)
    indexes = {r[0] for r in await sql(pg_core, "SELECT indexname FROM pg_indexes")}
    assert f"chunk_vectors_hnsw_{dims}" in indexes


def in_database_only(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every search that reaches the database's HNSW index, by scope id."""
    searched: list[int] = []
    nearest = pg_vectors._nearest

    def counted(conn: object, sid: int, **kwargs: object) -> list[tuple[int, float]]:
        searched.append(sid)
        return nearest(conn, sid, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_vectors, "_nearest", counted)
    return searched


@pytest.mark.parametrize("graph", [False, True], ids=["in-process", "hnsw"])
async def test_the_database_finds_what_the_process_finds_in_the_scope_only(
    pg_core: MemoryCore, monkeypatch: pytest.MonkeyPatch, graph: bool
) -> None:
    """The nearest chunks of a small scope (its matrix in the process) and of a large one
    (pgvector's HNSW index) are the ones an exact search in the process gives (same
    chunks, same order, cosines equal to float32 rounding), and only the scope's."""
    searched = in_database_only(monkeypatch)
    if graph:  # every scope counts as large: the HNSW index with an iterative scan
        monkeypatch.setattr(pg_vectors, "HNSW_FROM_ROWS", 1)
    in_db = vectors_of(pg_core)
    assert isinstance(in_db, PgVectorIndex)
    in_process = VectorIndex(database(pg_core), in_db.embedder, ann_min_rows=None)
    index = index_of(pg_core)
    for scope in (MAIN, ScopeKey("peer:other")):
        sid = await index.scope_id(scope)
        assert sid is not None
        for query in ("what breed is my kitty", "what dog did we get", "出差去哪"):
            vector = await in_db.embed_query(query)
            found = await in_db.search(sid, vector, 3)
            expected = await in_process.search(sid, vector, 3)
            assert [i for i, _ in found] == [i for i, _ in expected], (scope, query)
            assert [c for _, c in found] == pytest.approx([c for _, c in expected], abs=1e-5)
            for hit in await pg_core.finder.search(scope, SearchRequest(query, limit=10)):
                assert hit.text.endswith(f"({scope.value})"), (scope, query, hit)
    assert bool(searched) == graph


async def test_a_small_scope_ranks_on_postgres_as_on_sqlite(
    pg_config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same notes give the same hybrid hits, in the same order with the same scores,
    on PostgreSQL (the scope's matrix in the process) as on SQLite, for questions that
    share no word with the note they find."""
    searched = in_database_only(monkeypatch)
    sqlite_config = load_config(None, env={}, workspace=tmp_path / "sqlite-ws")
    results: dict[str, list[list[tuple[str, float]]]] = {}
    questions = ("what breed is my kitty", "what dog did we get", "出差去哪", "boiler")
    for name, config in (("sqlite", sqlite_config), ("postgres", pg_config)):
        async with MemoryCore.open(config, clock=ManualClock(START)) as core:
            for note in NOTES:
                await core.notes.append(MAIN, note)
            await core.vectors_ready()
            results[name] = [
                [
                    (hit.text, hit.score)
                    for hit in await core.finder.search(MAIN, SearchRequest(q, limit=4))
                ]
                for q in questions
            ]
    assert [[t for t, _ in hits] for hits in results["postgres"]] == [
        [t for t, _ in hits] for hits in results["sqlite"]
    ]
    for on_pg, on_sqlite in zip(results["postgres"], results["sqlite"], strict=True):
        assert [s for _, s in on_pg] == pytest.approx([s for _, s in on_sqlite], rel=1e-4)
    assert NOTES[0] in [t for t, _ in results["postgres"][0]]  # by meaning alone
    assert searched == []


async def test_another_writers_vectors_are_in_the_next_search(
    pg_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second core on the same database (another replica: its own connections and
    backfill) writes a note; the first core's next search of the scope, whose matrix it
    already holds, finds the note by meaning, in the process."""
    searched = in_database_only(monkeypatch)
    async with (
        MemoryCore.open(pg_config, clock=ManualClock(START)) as reader,
        MemoryCore.open(pg_config, clock=ManualClock(START)) as writer,
    ):
        for note in NOTES[:2]:
            await reader.notes.append(MAIN, note)
        await reader.vectors_ready()
        vectors, sid = await pg_vectors_of(reader)
        query = await vectors.embed_query("what dog did we get")
        before = await vectors.search(sid, query, 5)
        assert len(before) == 2  # the matrix is loaded, with the reader's own two

        await writer.notes.append(MAIN, NOTES[3])
        await writer.vectors_ready()
        [(pepper,)] = await sql(
            writer, "SELECT id FROM chunks WHERE text LIKE ?", "%greyhound called Pepper%"
        )

        after = await vectors.search(sid, query, 5)
        assert len(after) == 3
        assert after[0][0] == pepper
    assert searched == []


async def test_each_scope_in_process_holds_only_its_own_vectors(
    pg_core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Searched as deep as they go, two small scopes' matrices give exactly each scope's
    own chunks, never the other's, however close the other's texts are."""
    searched = in_database_only(monkeypatch)
    vectors = vectors_of(pg_core)
    assert isinstance(vectors, PgVectorIndex)
    index = index_of(pg_core)
    for scope in (MAIN, ScopeKey("peer:other")):
        sid = await index.scope_id(scope)
        assert sid is not None
        for note in NOTES:
            query = await vectors.embed_query(f"{note} ({scope.value})")
            found = await vectors.search(sid, query, 100)
            own = await sql(pg_core, "SELECT id FROM chunks WHERE scope_id = ?", sid)
            assert sorted(i for i, _ in found) == sorted(i for (i,) in own)
    assert searched == []


@pytest.fixture
async def large_core(
    pg_config: Config, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MemoryCore]:
    """A core whose scopes of 3 vectors or more count as large (graph and HNSW index)."""
    monkeypatch.setattr(pg_vectors, "HNSW_FROM_ROWS", 3)
    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as core:
        for note in NOTES:
            await core.notes.append(MAIN, note)
        await core.vectors_ready()
        yield core


async def test_a_large_scope_is_answered_by_the_database_until_its_graph_is_ready(
    large_core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large scope's first search goes to pgvector's HNSW index while its matrix and
    graph are made in the background; once they are ready it is answered in the
    process, with the same chunks and cosines."""
    searched = in_database_only(monkeypatch)
    vectors, sid = await pg_vectors_of(large_core)
    query = await vectors.embed_query("what dog did we get")
    first = await vectors.search(sid, query, 3)
    assert searched == [sid]
    assert await vectors.wait_graph(sid)
    second = await vectors.search(sid, query, 3)
    assert searched == [sid]
    assert [i for i, _ in second] == [i for i, _ in first]
    assert [c for _, c in second] == pytest.approx([c for _, c in first], abs=1e-5)


async def test_another_writer_reaches_a_large_scope_without_a_new_graph(
    large_core: MemoryCore, pg_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica's note in a large scope is in the next search (the database
    answers while the matrix is behind), then in the graph's answers, taken in by a
    catch-up: the matrix and graph are the same objects, not loaded and built again."""
    searched = in_database_only(monkeypatch)
    vectors, sid = await pg_vectors_of(large_core)
    await vectors.load(sid)
    assert await vectors.wait_graph(sid)
    matrix = vectors._matrices[sid]
    graph = matrix.graph
    query = await vectors.embed_query("a cat that is a ragdoll")
    await vectors.search(sid, query, 2)
    assert searched == []

    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as writer:
        await writer.notes.append(MAIN, "our ragdoll cat Mochi won a prize at the cat show")
        await writer.vectors_ready()
        [(prize,)] = await sql(writer, "SELECT id FROM chunks WHERE text LIKE ?", "%prize%")

    found = await vectors.search(sid, query, 2)
    assert prize in [i for i, _ in found]
    assert searched == [sid]
    assert await vectors.wait_graph(sid)
    again = await vectors.search(sid, query, 2)
    assert searched == [sid]
    assert [i for i, _ in again] == [i for i, _ in found]
    assert vectors._matrices[sid] is matrix and matrix.graph is graph


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
        hits = await core.finder.search(MAIN, SearchRequest("what breed is my kitty", limit=3))
        assert hits and "ragdoll" in hits[0].text
    assert any("pgvector is not installed" in r.getMessage() for r in caplog.records)


async def test_a_vector_index_keeps_numpy_to_one_blas_thread(pg_config: Config) -> None:
    """Once a vector index is made, numpy's matrix products run on one BLAS thread (a
    second one made a small scope's search tens of times slower on a busy machine),
    and stay so after the model has embedded a query under its own limit."""
    from threadpoolctl import threadpool_info, threadpool_limits  # type: ignore[import-untyped]

    def blas_threads() -> set[int]:
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    threadpool_limits(limits=2, user_api="blas")  # as a fresh process on two cores
    assert blas_threads() == {2}
    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as core:
        vectors = vectors_of(core)
        assert isinstance(vectors, PgVectorIndex)
        await vectors.embedder.embed(["a query after the index was made"], query=True)
        assert blas_threads() == {1}


async def test_a_restart_reads_a_large_scopes_graph_from_its_file(
    large_core: MemoryCore, pg_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large scope's graph is written beside the workspace when the process closes, and
    the next process reads it back (no build) and answers in the process, as on SQLite."""
    vectors, sid = await pg_vectors_of(large_core)
    await vectors.load(sid)
    assert await vectors.wait_graph(sid)
    assert vectors.graph_counts.built == 1
    query = await vectors.embed_query("what dog did we get")
    first = await vectors.search(sid, query, 3)
    await large_core.close()

    searched = in_database_only(monkeypatch)
    async with MemoryCore.open(pg_config, clock=ManualClock(START)) as again:
        restarted = vectors_of(again)
        assert isinstance(restarted, PgVectorIndex)
        await restarted.load(sid)
        assert await restarted.wait_graph(sid)
        assert (restarted.graph_counts.read, restarted.graph_counts.built) == (1, 0)
        second = await restarted.search(sid, query, 3)
    assert searched == []
    assert [i for i, _ in second] == [i for i, _ in first]


async def test_a_search_of_some_kinds_is_filtered_in_the_database(pg_core: MemoryCore) -> None:
    """The kinds and paths filters of a vector search are SQL both backends read (a
    unary `+` that keeps SQLite off an index is an error on a text column in PostgreSQL,
    which turned dense recall off there)."""
    vectors, sid = await pg_vectors_of(pg_core)
    query = await vectors.embed_query("what breed is my kitty")
    daily = await vectors.search(sid, query, 3, kinds=["daily"])
    assert daily and all(isinstance(chunk_id, int) for chunk_id, _ in daily)
    assert await vectors.search(sid, query, 3, kinds=["summary"]) == []
    assert await vectors.search(sid, query, 3, exclude_paths=["nowhere.md"])
