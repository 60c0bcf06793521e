"""A large scope's graph written beside the index and read back by the next process
(memory_core/storage/vectors/graph_files.py, graphs.py): read instead of built, caught up
with what changed since, built again when it is of another model or damaged, taken over
when another process wrote, and deleted by a purge. Real usearch graphs over vectors of
the fake OpenAI server, in a real SQLite file; whether a graph was built or read is what
`VectorIndex.graph_counts` says, never a time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import openai
import pytest

from memory_core.embedding.remote import OpenAIEmbedder
from memory_core.storage.db import Database
from memory_core.storage.vectors import graph_files, graphs
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.index import VectorIndex
from memory_core.storage.vectors.lazy import LazyVectors
from testkit.openai_server import FakeOpenAI
from tests.unit.vector_support import (
    GRAPH_DIM,
    GRAPH_ROWS,
    add,
    delete,
    embedder,
    graph_scope,
    probes,
    seeded,
    stored,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "index.sqlite3")
    yield database
    await database.close()


@pytest.fixture
async def spread() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_dim=GRAPH_DIM) as server:
        server.set_embedding(seeded)
        yield server


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return graph_files.directory(tmp_path)


def graphed(db: Database, fake: FakeOpenAI, folder: Path, **kwargs: object) -> VectorIndex:
    return VectorIndex(db, embedder(fake), ann_min_rows=100, graph_dir=folder, **kwargs)  # type: ignore[arg-type]


async def graph_of(vi: VectorIndex, sid: int) -> set[int]:
    """The chunk ids the scope's graph holds, once it is read or built and caught up."""
    await vi.load(sid)
    assert await vi.wait_graph(sid)
    graph = vi._matrices[sid].graph
    assert graph is not None
    return {key for key in range(1, 10_000) if graph._index.contains(key)}


async def write_graph(db: Database, fake: FakeOpenAI, folder: Path, sid: int) -> None:
    """A process that builds (or reads) the scope's graph, writes its file and exits."""
    vi = graphed(db, fake, folder)
    try:
        await graph_of(vi, sid)
    finally:
        await vi.close()


async def top(vi: VectorIndex, sid: int, text: str) -> int:
    vec = np.array(seeded(text, GRAPH_DIM), dtype=np.float32)
    return (await vi.search(sid, vec, 1))[0][0]


async def test_a_graph_is_written_once_built_and_read_back_by_the_next_process(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    sid, ids = await graph_scope(db, spread)
    first = graphed(db, spread, folder)
    try:
        assert await graph_of(first, sid) == set(ids)
        assert (first.graph_counts.built, first.graph_counts.read) == (1, 0)
        assert first.graph_counts.saved == 1
        answers = [await first.search(sid, probe, 10) for probe in probes()]
    finally:
        await first.close()
    assert graph_files.path(folder, sid).is_file()

    second = graphed(db, spread, folder)
    try:
        assert await graph_of(second, sid) == set(ids)
        assert (second.graph_counts.built, second.graph_counts.read) == (0, 1)
        assert [await second.search(sid, probe, 10) for probe in probes()] == answers
    finally:
        await second.close()
    assert second.graph_counts.saved == 0  # nothing changed: the file stays as it was


async def test_rows_added_removed_or_changed_since_the_file_are_caught_up(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    sid, ids = await graph_scope(db, spread)
    await write_graph(db, spread, folder, sid)
    # Another process's writes the file does not know of: 10 chunks deleted, the newest
    # one's id taken again by another text, and three new ones.
    await delete(db, sid, ids[:10])
    await delete(db, sid, [ids[-1]])
    _, (reused,) = await add(db, "main", ["s7001"])
    assert reused == ids[-1]
    _, new = await add(db, "main", ["s7002", "s7003", "s7004"])
    writer = VectorIndex(db, embedder(spread), ann_min_rows=None)
    try:
        assert await writer.backfill(sid) == 4
    finally:
        await writer.close()
    assert set(await stored(db)) == {*ids[10:], *new}

    second = graphed(db, spread, folder)
    try:
        held = await graph_of(second, sid)
        assert second.graph_counts.read == 1 and second.graph_counts.built == 0
        assert held == {*ids[10:], *new}
        matrix = second._matrices[sid]
        assert not len(matrix.pending) and matrix.graph_upto == matrix.n
        assert await top(second, sid, "s7001") == reused  # its new vector, not the old one
        assert await top(second, sid, "s7003") == new[1]
    finally:
        await second.close()
    assert second.graph_counts.saved == 1  # written at close: it had caught up 15 rows

    third = graphed(db, spread, folder)
    try:
        assert await graph_of(third, sid) == {*ids[10:], *new}
        assert third.graph_counts.read == 1
        assert not len(third._matrices[sid].pending) and third.graph_counts.saved == 0
    finally:
        await third.close()


async def test_rows_the_read_graph_lacks_are_searched_exactly_until_it_has_them(
    db: Database, spread: FakeOpenAI, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, _ = await graph_scope(db, spread)
    await write_graph(db, spread, folder, sid)
    _, (new,) = await add(db, "main", ["q5"])
    writer = VectorIndex(db, embedder(spread), ann_min_rows=None)
    try:
        await writer.backfill(sid)
    finally:
        await writer.close()

    async def no_catch_up(self: graphs.Graphs, sid: int, matrix: object) -> None:
        return None

    monkeypatch.setattr(graphs.Graphs, "_catch_up", no_catch_up)
    second = graphed(db, spread, folder)
    try:
        await second.load(sid)
        assert await second.wait_graph(sid)
        matrix = second._matrices[sid]
        assert matrix.graph is not None and not matrix.graph._index.contains(new)
        assert matrix.n - 1 in matrix.pending.tolist() or matrix.graph_upto < matrix.n
        hits = await second.search(sid, probes(6)[5], 3)
        assert hits[0][0] == new and hits[0][1] == pytest.approx(1.0, abs=1e-6)
    finally:
        await second.close()


async def test_a_graph_of_another_model_is_not_used(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    sid, _ = await graph_scope(db, spread)
    await write_graph(db, spread, folder, sid)
    other = OpenAIEmbedder(
        "other",
        base_url=spread.base_url,
        api_key="k",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
    )
    second = VectorIndex(db, other, ann_min_rows=100, graph_dir=folder)
    try:
        assert await second.backfill(sid) == GRAPH_ROWS  # the other model's vectors
        await graph_of(second, sid)
        assert (second.graph_counts.read, second.graph_counts.built) == (0, 1)
    finally:
        await second.close()


@pytest.mark.parametrize("damage", ["flipped", "cut short", "not a graph", "empty"])
async def test_a_damaged_graph_file_is_built_again_and_replaced(
    db: Database,
    spread: FakeOpenAI,
    folder: Path,
    damage: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sid, ids = await graph_scope(db, spread)
    await write_graph(db, spread, folder, sid)
    path = graph_files.path(folder, sid)
    data = bytearray(path.read_bytes())
    if damage == "flipped":
        data[len(data) // 2] ^= 0xFF
    elif damage == "cut short":
        del data[len(data) - 100 :]
    elif damage == "not a graph":
        data = bytearray(b"hello" * 100)
    else:
        data = bytearray()
    path.write_bytes(bytes(data))

    caplog.set_level(logging.WARNING, logger="memory_core.storage.vectors")
    second = graphed(db, spread, folder)
    try:
        assert await graph_of(second, sid) == set(ids)
        assert (second.graph_counts.read, second.graph_counts.built) == (0, 1)
    finally:
        await second.close()
    assert "building it again" in caplog.text
    third = graphed(db, spread, folder)
    try:
        await graph_of(third, sid)
        assert (third.graph_counts.read, third.graph_counts.built) == (1, 0)
    finally:
        await third.close()


async def test_a_graph_whose_ids_all_changed_is_built_afresh(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    sid, ids = await graph_scope(db, spread)
    await write_graph(db, spread, folder, sid)
    # A reindex: every chunk again, under new ids (the texts, so the vectors, the same;
    # another scope's newer chunk keeps the ids from starting over).
    await add(db, "peer:other", ["s1"])
    await delete(db, sid, ids)
    _, again = await add(db, "main", [f"s{i}" for i in range(GRAPH_ROWS)], path="memory/x.md")
    writer = VectorIndex(db, embedder(spread), ann_min_rows=None)
    try:
        assert await writer.backfill(sid) == GRAPH_ROWS
    finally:
        await writer.close()
    assert not set(again) & set(ids)
    second = graphed(db, spread, folder)
    try:
        assert await graph_of(second, sid) == set(again)
        assert (second.graph_counts.read, second.graph_counts.built) == (0, 1)
    finally:
        await second.close()


async def test_another_process_writing_keeps_the_graph_in_memory(
    db: Database, spread: FakeOpenAI, folder: Path, tmp_path: Path
) -> None:
    sid, _ = await graph_scope(db, spread)
    vi = graphed(db, spread, folder)
    try:
        await graph_of(vi, sid)
        graph = vi._matrices[sid].graph
        _, (new,) = await add(db, "main", ["q7"])
        other = await Database.open(tmp_path / "index.sqlite3")
        second = VectorIndex(other, embedder(spread), ann_min_rows=None)
        try:
            assert await second.backfill(sid) == 1
        finally:
            await second.close()
            await other.close()
        # The version moved: the next search loads the scope again, and keeps its graph.
        assert await top(vi, sid, "q7") == new
        assert await vi.wait_graph(sid)
        assert vi._matrices[sid].graph is graph and graph is not None
        assert graph._index.contains(new)
        assert (vi.graph_counts.built, vi.graph_counts.inherited) == (1, 1)
    finally:
        await vi.close()


async def test_forget_drops_unvouched_vectors_and_every_graph_file(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    sid, ids = await graph_scope(db, spread)
    vi = graphed(db, spread, folder)
    try:
        await graph_of(vi, sid)
        assert graph_files.path(folder, sid).is_file()
        await delete(db, sid, ids[:5])  # no backfill: their vectors are still stored
        assert set(ids[:5]) <= set(await stored(db))
        await vi.forget()
        assert set(await stored(db)) == set(ids[5:])
        kept = await db.read(
            lambda conn: conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        )
        assert kept == GRAPH_ROWS - 5  # the deleted chunks' vectors are gone too
        assert not await asyncio.to_thread(folder.exists)
        assert vi._matrices == {}
        hits = await vi.search(sid, probes(1)[0], 5)
        assert hits and not {i for i, _ in hits} & set(ids[:5])
    finally:
        await vi.close()


async def test_forget_keeps_nothing_of_a_chunk_whose_text_changed(db: Database) -> None:
    """A chunk vector whose chunk holds another text now (an id taken again) goes, and
    the vector of the text it was made from with it."""
    sid, (chunk,) = await add(db, "main", ["alpha"])
    half = np.array([1, 0, 0, 0], dtype=np.float32).tobytes()

    def write(conn: object) -> None:
        vectors.store(conn, sid, "m", [(vectors.ChunkText(chunk, "alpha"), half)], [], [])  # type: ignore[arg-type]

    await db.write(write)
    await db.write(
        lambda conn: conn.execute("UPDATE chunks SET text = 'omega' WHERE id = ?", (chunk,))
    )
    assert await db.write(vectors.forget) == 1
    assert await stored(db) == {}


async def test_the_scope_loads_while_the_first_query_is_embedded(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    """`settle` (which a search runs beside the query's embedding) starts the matrix's
    load and the graph's read, so they overlap the model instead of following it; an
    index without graphs (pgvector's, which holds no matrices) loads nothing."""
    sid, _ = await graph_scope(db, spread)
    await write_graph(db, spread, folder, sid)
    second = graphed(db, spread, folder)
    plain = VectorIndex(db, embedder(spread), ann_min_rows=None)
    try:
        assert await second.settle(sid, 1.0) and await plain.settle(sid, 1.0)
        await asyncio.gather(*second._warming.values())
        assert sid in second._matrices and await second.wait_graph(sid)
        assert second.graph_counts.read == 1
        assert plain._matrices == {} and plain._warming == {}
    finally:
        await second.close()
        await plain.close()


async def test_a_commands_lazy_index_forgets_too(
    db: Database, spread: FakeOpenAI, folder: Path
) -> None:
    """`chatmem purge` runs with the lazy index of a command, which may not have searched:
    the purge still drops the vectors no chunk vouches for, and the graph files."""
    sid, ids = await graph_scope(db, spread)
    vi = graphed(db, spread, folder)
    await graph_of(vi, sid)
    await vi.close()
    assert graph_files.path(folder, sid).is_file()
    await delete(db, sid, ids[:5])

    async def build() -> VectorIndex:
        return graphed(db, spread, folder)

    lazy = LazyVectors(db, embedder(spread), build)
    try:
        await lazy.forget()
        assert lazy.built
        assert set(await stored(db)) == set(ids[5:])
        assert not await asyncio.to_thread(folder.exists)
    finally:
        await lazy.close()
