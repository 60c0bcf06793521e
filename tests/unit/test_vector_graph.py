"""The graph of a large scope (memory_core/storage/vectors/ann.py): searched with exact scores,
never yielding removed or other scopes' chunks, exact search while it is built, and kept
through compaction."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import numpy as np
import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.storage.db import Database
from memory_core.storage.vectors import ann
from memory_core.storage.vectors.index import VectorIndex
from testkit.openai_server import FakeOpenAI
from tests.unit.vector_support import (
    DAILY,
    GRAPH_DIM,
    GRAPH_ROWS,
    add,
    db_fixture,  # noqa: F401  (a fixture)
    delete,
    embedder,
    fake_fixture,  # noqa: F401  (a fixture)
    graph_scope,
    index_fixture,  # noqa: F401  (a fixture)
    probes,
    seeded,
)

pytestmark = pytest.mark.timeout(60)


# --- the graph of a large scope (memory_core/storage/vectors/ann.py) --------------------------------


@pytest.fixture
async def spread(tmp_path: Path) -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_dim=GRAPH_DIM) as server:
        server.set_embedding(seeded)
        yield server


async def test_a_large_scope_is_searched_through_its_graph_with_exact_scores(
    db: Database, spread: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, _ = await graph_scope(db, spread)
    threaded: list[str] = []
    real = asyncio.to_thread

    async def spy(fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        threaded.append(str(getattr(fn, "__name__", "")))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    exact = VectorIndex(db, embedder(spread), ann_min_rows=None)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        assert await vi.load(sid) == GRAPH_ROWS
        assert await vi.wait_graph(sid)
        graph = vi._matrices[sid].graph
        assert graph is not None and len(graph) == GRAPH_ROWS
        found = 0
        for probe in probes():
            threaded.clear()
            approximate = await vi.search(sid, probe, 10)
            assert "near" in threaded and "scores" not in threaded  # the graph, no full scan
            truth = await exact.search(sid, probe, 10)
            found += len({i for i, _ in approximate} & {i for i, _ in truth})
            cosines = dict(truth)
            for chunk_id, score in approximate:  # exact cosines, whatever the candidates
                if chunk_id in cosines:
                    assert score == pytest.approx(cosines[chunk_id], abs=1e-6)
            assert [s for _, s in approximate] == sorted((s for _, s in approximate), reverse=True)
        assert found / (10 * len(probes())) >= 0.95
        # Below the line a scope has no graph at all.
        small = VectorIndex(db, embedder(spread), ann_min_rows=GRAPH_ROWS + 1)
        try:
            await small.load(sid)
            assert not await small.wait_graph(sid)
        finally:
            await small.close()
    finally:
        await vi.close()
        await exact.close()


async def test_removed_chunks_never_come_from_the_graph(db: Database, spread: FakeOpenAI) -> None:
    sid, _ = await graph_scope(db, spread)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        await vi.load(sid)
        assert await vi.wait_graph(sid)
        probe = probes(1)[0]
        best = [i for i, _ in await vi.search(sid, probe, 10)]
        graph = vi._matrices[sid].graph
        assert graph is not None
        # Deleted and dropped from the matrix, still in the graph (not caught up yet).
        await delete(db, sid, best[:5])
        gate = threading.Event()
        real = graph.remove

        def held(keys: Iterable[int]) -> None:
            assert gate.wait(10)
            real(keys)

        graph.remove = held  # type: ignore[method-assign]
        try:
            await vi.backfill(sid)
            hits = [i for i, _ in await vi.search(sid, probe, 10)]
            assert len(graph) == GRAPH_ROWS  # the graph still proposes them
        finally:
            gate.set()
        assert not set(hits) & set(best[:5]) and len(hits) == 10
        assert hits[:5] == best[5:]
        await vi.wait_graph(sid)
        assert len(graph) == GRAPH_ROWS - 5
        # Hidden chunks are skipped too, the graph's candidates going deeper.
        await db.write(
            lambda conn: conn.execute(
                f"UPDATE chunks SET hidden = 1 WHERE id IN ({','.join('?' * 5)})", best[5:]
            )
        )
        hits = [i for i, _ in await vi.search(sid, probe, 10)]
        assert not set(hits) & set(best) and len(hits) == 10
    finally:
        await vi.close()


async def test_a_graph_never_yields_another_scopes_chunks(db: Database, spread: FakeOpenAI) -> None:
    a, a_ids = await graph_scope(db, spread, scope="peer:alice")
    b, b_ids = await graph_scope(db, spread, scope="peer:bob")
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        for sid in (a, b):
            await vi.load(sid)
            assert await vi.wait_graph(sid)
        for probe in probes(5):
            assert {i for i, _ in await vi.search(a, probe, 20)} <= set(a_ids)
            assert {i for i, _ in await vi.search(b, probe, 20)} <= set(b_ids)
        # Bob's chunk ids forged into Alice's graph, right on the query: never served.
        graph = vi._matrices[a].graph
        assert graph is not None
        probe = probes(1)[0]
        unit = probe / np.linalg.norm(probe)
        graph.add(np.array(b_ids[:30], dtype=np.int64), np.tile(unit, (30, 1)))
        hits = await vi.search(a, probe, 20)
        assert len(hits) == 20 and {i for i, _ in hits} <= set(a_ids)
    finally:
        await vi.close()


async def test_exact_search_answers_while_the_graph_is_built(
    db: Database, spread: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, _ = await graph_scope(db, spread)
    release = threading.Event()
    started = threading.Event()
    real = ann.build

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        started.set()
        assert release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(ann, "build", held)
    exact = VectorIndex(db, embedder(spread), ann_min_rows=None)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        probe = probes(1)[0]
        truth = await exact.search(sid, probe, 10)
        assert await vi.search(sid, probe, 10) == truth  # exact, not waiting for the build
        assert await asyncio.to_thread(started.wait, 5)
        assert vi._matrices[sid].graph is None
        # Written while the graph is being built: found now, and in the graph afterwards.
        _, (new,) = await add(db, "main", ["q0"])
        await vi.backfill(sid)
        assert (await vi.search(sid, probe, 1))[0][0] == new
        release.set()
        assert await vi.wait_graph(sid)
        graph = vi._matrices[sid].graph
        assert graph is not None and len(graph) == GRAPH_ROWS + 1
        hits = await vi.search(sid, probe, 10)
        assert hits[0][0] == new and hits[0][1] == pytest.approx(1.0)
    finally:
        release.set()
        await vi.close()
        await exact.close()


async def test_rows_written_after_the_build_are_searched_until_the_graph_has_them(
    db: Database, spread: FakeOpenAI
) -> None:
    sid, _ = await graph_scope(db, spread)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        await vi.load(sid)
        assert await vi.wait_graph(sid)
        matrix = vi._matrices[sid]
        graph = matrix.graph
        assert graph is not None
        hold = threading.Lock()
        real = graph.add

        def held(*args, **kwargs):  # type: ignore[no-untyped-def]
            with hold:
                real(*args, **kwargs)

        graph.add = held  # type: ignore[method-assign]
        hold.acquire()
        try:
            _, (new,) = await add(db, "main", ["q3"])
            await vi.backfill(sid)
            probe = probes(4)[3]
            hits = await vi.search(sid, probe, 5)  # from the tail, the graph not told yet
            assert hits[0][0] == new and hits[0][1] == pytest.approx(1.0)
            assert len(graph) == GRAPH_ROWS
        finally:
            hold.release()
        await vi.wait_graph(sid)
        assert len(graph) == GRAPH_ROWS + 1 and matrix.graph_upto == matrix.n
        assert (await vi.search(sid, probe, 5))[0][0] == new
    finally:
        await vi.close()


async def test_too_few_candidates_passing_the_filters_means_an_exact_search(
    db: Database, spread: FakeOpenAI
) -> None:
    sid, _ = await graph_scope(db, spread)
    # One long-term chunk, far from the query: no graph candidate is of its kind.
    _, (rare,) = await add(db, "main", ["s9999"], path="MEMORY.md", kind=ChunkKind.LONG_TERM)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        await vi.backfill(sid)
        await vi.load(sid)
        assert await vi.wait_graph(sid)
        probe = probes(1)[0]
        assert [i for i, _ in await vi.search(sid, probe, 3, kinds=["long_term"])] == [rare]
        everything_else = await vi.search(sid, probe, 5, exclude_paths=[DAILY])
        assert [i for i, _ in everything_else] == [rare]
    finally:
        await vi.close()


async def test_a_graph_survives_compaction_and_goes_with_its_matrix(
    db: Database, spread: FakeOpenAI
) -> None:
    sid, ids = await graph_scope(db, spread)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    try:
        await vi.load(sid)
        assert await vi.wait_graph(sid)
        matrix = vi._matrices[sid]
        graph = matrix.graph
        await delete(db, sid, ids[:200])
        await vi.backfill(sid)
        matrix.removed = 5000  # past the compaction line
        probe = probes(1)[0]
        hits = await vi.search(sid, probe, 10)
        fresh = vi._matrices[sid]
        assert fresh is not matrix and fresh.graph is graph and fresh.graph_upto == fresh.n
        assert {i for i, _ in hits} <= set(ids[200:]) and len(hits) == 10
        vi.invalidate(sid)  # a load afresh builds a graph anew
        await vi.search(sid, probe, 10)
        assert await vi.wait_graph(sid)
        assert vi._matrices[sid].graph is not graph
    finally:
        await vi.close()


async def test_close_stops_a_build_under_way(
    db: Database, spread: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, _ = await graph_scope(db, spread)
    monkeypatch.setattr(ann, "BUILD_SLICE", 8)
    slices: list[int] = []
    first, go, ended = threading.Event(), threading.Event(), threading.Event()
    real_add, real_build = ann.Graph.add, ann.build

    def gated(self, keys, vecs, **kwargs):  # type: ignore[no-untyped-def]
        slices.append(len(keys))
        first.set()
        assert go.wait(5)  # each slice waits for the test: the build is under way at close
        return real_add(self, keys, vecs, **kwargs)

    def build(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return real_build(*args, **kwargs)
        finally:
            ended.set()

    monkeypatch.setattr(ann.Graph, "add", gated)
    monkeypatch.setattr(ann, "build", build)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    await vi.load(sid)
    assert await asyncio.to_thread(first.wait, 5)
    await vi.close()
    done = len(slices)
    go.set()  # the slices may go on now; a build that was not stopped would
    assert await asyncio.to_thread(ended.wait, 10)
    assert len(slices) == done < GRAPH_ROWS // 8  # stopped within a slice, long before the end
