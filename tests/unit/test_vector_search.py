"""Searching the vector index: filters, scopes kept apart, other processes' writes seen, the
matrix in a thread, the query cache, closing, and bounded texts sent to the model."""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualMonotonic
from memory_core.storage.db import Database
from memory_core.storage.vectors import backfill as vector_backfill
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors.index import VectorIndex
from testkit.openai_server import FakeOpenAI
from testkit.waiting import turns, until
from tests.unit.vector_support import (
    AXIS,
    CRAFTED,
    DAILY,
    add,
    db_fixture,  # noqa: F401  (a fixture)
    delete,
    embedder,
    fake_fixture,  # noqa: F401  (a fixture)
    index_fixture,  # noqa: F401  (a fixture)
    query,
    stored,
)

pytestmark = pytest.mark.timeout(60)


# --- search ------------------------------------------------------------------------------


async def test_kinds_paths_and_hidden_filter_the_hits(db: Database, index: VectorIndex) -> None:
    sid, (daily,) = await add(db, "main", ["alpha"])
    _, (long_term,) = await add(db, "main", ["beta"], path="MEMORY.md", kind=ChunkKind.LONG_TERM)
    _, (message,) = await add(db, "main", ["epsilon"], path="sessions/s1", kind=ChunkKind.MESSAGE)
    await index.backfill(sid)
    assert [i for i, _ in await index.search(sid, query(), 3)] == [daily, long_term, message]
    only = await index.search(sid, query(), 3, kinds=["long_term", "message"])
    assert [i for i, _ in only] == [long_term, message]
    assert await index.search(sid, query(), 3, kinds=["summary"]) == []
    assert await index.search(sid, query(), 3, kinds=[]) == []
    rest = await index.search(sid, query(), 3, exclude_paths=["sessions/s1", "nowhere.md"])
    assert [i for i, _ in rest] == [daily, long_term]
    await db.write(lambda conn: conn.execute("UPDATE chunks SET hidden = 1 WHERE id = ?", (daily,)))
    assert [i for i, _ in await index.search(sid, query(), 3)] == [long_term, message]
    # k hits even when the best rows are hidden: the search goes deeper.
    assert [i for i, _ in await index.search(sid, query(), 1)] == [long_term]


async def test_scopes_never_see_each_others_chunks(db: Database, index: VectorIndex) -> None:
    texts = ["alpha", "beta", "gamma"]
    a, a_ids = await add(db, "peer:alice", texts)
    b, b_ids = await add(db, "peer:bob", texts)
    await index.backfill(a)
    await index.backfill(b)
    assert {i for i, _ in await index.search(a, query(), 10)} == set(a_ids)
    assert {i for i, _ in await index.search(b, query(), 10)} == set(b_ids)
    # A forged row: Bob's best chunk filed under Alice, in the table and in memory.
    forged = await db.read(
        lambda conn: conn.execute(
            "SELECT text_hash FROM chunk_vectors WHERE chunk_id = ?", (b_ids[0],)
        ).fetchone()
    )
    vec = query(CRAFTED["alpha"]).tobytes()
    matrix = index._matrices[a]
    matrix.apply([vectors.VectorRow(b_ids[0], forged[0], "daily", DAILY, vec)], [])
    assert b_ids[0] not in {i for i, _ in await index.search(a, query(), 10)}

    def forge(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM chunk_vectors WHERE chunk_id = ?", (b_ids[0],))
        conn.execute(
            "INSERT INTO chunk_vectors (chunk_id, scope_id, model, text_hash)"
            " VALUES (?, ?, 'openai:emb', ?)",
            (b_ids[0], a, forged[0]),
        )
        vectors.bump(conn, a)

    await db.write(forge)
    assert b_ids[0] not in {i for i, _ in await index.search(a, query(), 10)}
    # A chunk moved to another scope under a loaded matrix is not served from the old one.
    await db.write(
        lambda conn: conn.execute("UPDATE chunks SET scope_id = ? WHERE id = ?", (b, a_ids[1]))
    )
    assert a_ids[1] not in {i for i, _ in await index.search(a, query(), 10)}
    # An unknown scope has nothing.
    assert await index.search(999, query(), 10) == []


async def test_another_process_writing_vectors_is_seen(
    db: Database, fake: FakeOpenAI, index: VectorIndex, tmp_path: Path
) -> None:
    sid, ids = await add(db, "main", ["gamma"])
    await index.backfill(sid)
    assert [i for i, _ in await index.search(sid, query(), 2)] == [ids[0]]
    _, (new,) = await add(db, "main", ["alpha"])
    other = await Database.open(tmp_path / "index.sqlite3")
    second = VectorIndex(other, embedder(fake))
    try:
        assert await second.backfill(sid) == 1
    finally:
        await second.close()
        await other.close()
    assert [i for i, _ in await index.search(sid, query(), 2)] == [new, ids[0]]


async def test_matrix_follows_own_writes_without_reloading(
    db: Database, index: VectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, ids = await add(db, "main", ["gamma", "delta"])
    await index.backfill(sid)
    await index.search(sid, query(), 2)
    loads = 0
    real = vectors.load_page

    def counting(conn: sqlite3.Connection, sid: int, model: str, after: int, limit: int) -> object:
        nonlocal loads
        loads += 1
        return real(conn, sid, model, after, limit)

    monkeypatch.setattr(vectors, "load_page", counting)
    _, (new,) = await add(db, "main", ["alpha"])
    await index.backfill(sid)
    await delete(db, sid, [ids[0]])
    await index.backfill(sid)
    hits = await index.search(sid, query(), 3)
    assert [i for i, _ in hits] == [new, ids[1]]
    assert loads == 0


async def test_large_matrix_runs_in_a_thread_and_compacts(
    db: Database, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fan(text: str, dim: int) -> list[float]:  # "t7" points 0.07 rad off the axis
        angle = int(text[1:]) / 100
        return [math.cos(angle), math.sin(angle), 0.0, 0.0]

    fake.set_embedding(fan)
    threaded: list[str] = []
    real = asyncio.to_thread

    async def spy(fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        threaded.append(str(getattr(fn, "__name__", "")))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    vi = VectorIndex(db, embedder(fake), inline_rows=10)
    try:
        sid, ids = await add(db, "main", [f"t{i}" for i in range(40)])
        assert await vi.backfill(sid) == 40
        threaded.clear()
        assert [i for i, _ in await vi.search(sid, query(), 3)] == ids[:3]
        assert "scores" in threaded  # over inline_rows: off the event loop
        matrix = vi._matrices[sid]
        await delete(db, sid, ids[:30])
        await vi.backfill(sid)
        assert matrix.removed == 30 and matrix.live == 10
        matrix.removed = 5000  # past the compaction line
        assert [i for i, _ in await vi.search(sid, query(), 3)] == ids[30:33]
        assert vi._matrices[sid] is not matrix and vi._matrices[sid].removed == 0
        assert vi._matrices[sid].live == 10 and vi._matrices[sid].n == 10
        assert [i for i, _ in await vi.search(sid, query(), 20)] == ids[30:]
    finally:
        await vi.close()


async def test_embed_query_is_cached(fake: FakeOpenAI, index: VectorIndex) -> None:
    first = await index.embed_query("alpha")
    second = await index.embed_query("alpha")
    assert first is second and not first.flags.writeable
    assert list(first) == pytest.approx(AXIS)
    assert len(fake.embedding_requests()) == 1


async def test_search_with_a_query_of_another_size_is_an_embedding_error(
    db: Database, index: VectorIndex
) -> None:
    sid, _ = await add(db, "main", ["alpha"])
    await index.backfill(sid)
    from memory_core.embedding import EmbeddingError

    with pytest.raises(EmbeddingError, match="dimensions"):
        await index.search(sid, np.ones(8, dtype=np.float32), 1)


async def test_close_stops_retries_and_closes_the_embedder(db: Database, fake: FakeOpenAI) -> None:
    clock = ManualMonotonic()
    vi = VectorIndex(db, embedder(fake), monotonic=clock, sleep=clock.sleep)
    sid, _ = await add(db, "main", ["alpha"])
    fake.fail_embeddings(500, times=10)
    vi.schedule(sid)
    await vi.drain()
    await until(lambda: clock.sleeping == 1, what="the retry waiting")
    await vi.close()
    requests = len(fake.embedding_requests())
    assert clock.sleeping == 0  # the retry no longer waits
    clock.advance(max(vector_backfill.RETRY_WAITS.steps))  # long past its time
    await turns()
    vi.schedule(sid)  # ignored once closed
    assert len(fake.embedding_requests()) == requests == 1


async def test_close_writes_the_batch_being_embedded_and_begins_no_other(
    db: Database, fake: FakeOpenAI
) -> None:
    """A short-lived process (a CLI command) that closes while its model embeds a batch
    keeps those vectors, so the next process does not make them again; it starts no
    further batch."""
    started, release = asyncio.Event(), asyncio.Event()
    inner = embedder(fake)

    class Gated:
        name, dim = inner.name, inner.dim

        async def embed(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
            started.set()
            await release.wait()
            return await inner.embed(texts, query=query)

        async def close(self) -> None:
            await inner.close()

    vi = VectorIndex(db, Gated(), batch_size=2)
    sid, ids = await add(db, "main", ["alpha", "beta", "gamma", "delta"])
    vi.schedule(sid)
    await started.wait()
    closing = asyncio.create_task(vi.close())
    await asyncio.sleep(0)  # one turn of the loop: close has begun, the batch still waits
    release.set()
    await closing
    assert set(await stored(db)) == set(ids[:2])
    assert fake.embedded_texts() == ["alpha", "beta"]


async def test_the_model_sees_a_bounded_part_of_a_long_text(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    """A vector is made from the first `EMBED_CHARS` characters of a chunk (and of the
    turn before a turn), and of a query: a model's memory grows with its input."""
    limit = vectors.EMBED_CHARS
    long_entry = "alpha " * limit
    sid, _ = await add(db, "main", [long_entry, "beta"])
    turns = ["question " * limit, "answer " * limit]
    await add(db, "main", turns, path="sessions/s1", kind=ChunkKind.MESSAGE)
    assert await index.backfill(sid) == 4
    sent = fake.embedded_texts()
    assert long_entry[:limit] in sent and "beta" in sent
    assert turns[0][:limit] + "\n" + turns[1][:limit] in sent
    assert max(len(text) for text in sent) == 2 * limit + 1
    await index.embed_query("gamma " * limit)
    assert fake.embedded_texts()[-1] == ("gamma " * limit)[:limit]
    # Unchanged texts keep their vectors: a survey finds nothing to embed again.
    assert await index.backfill(sid) == 0


async def test_a_batch_of_long_texts_is_bounded_in_characters(
    db: Database, fake: FakeOpenAI
) -> None:
    """Beside `embedding.batch_size` texts, a model call takes at most `BATCH_CHARS`
    characters: 64 texts of 4 000 would cost the local model 40 s and more memory."""
    vi = VectorIndex(db, embedder(fake), batch_size=64)
    size = vectors.EMBED_CHARS
    texts = [f"{n} {'alpha ' * size}"[:size] for n in range(40)]
    sid, _ = await add(db, "main", texts)
    assert await vi.backfill(sid) == 40
    per_call = [len(body["input"]) for body in fake.embedding_requests()]
    per_batch = vector_backfill.BATCH_CHARS // size
    assert per_call == [per_batch, per_batch, 40 - 2 * per_batch]
    await vi.close()


@pytest.mark.parametrize("page", [1, 3])
async def test_surveys_and_loads_go_page_by_page(
    db: Database, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(vectors, "PAGE", page)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    vi = VectorIndex(db, embedder(fake))
    try:
        sid, ids = await add(db, "main", texts)
        _, other = await add(db, "peer:x", ["alpha"])
        assert await vi.backfill(sid) == 8
        await delete(db, sid, [ids[0], ids[4], ids[7]])  # gone between and at the pages' ends
        vi.invalidate(sid)
        assert await vi.backfill(sid) == 0
        assert set(await stored(db)) == {ids[1], ids[2], ids[3], ids[5], ids[6]}
        hits = await vi.search(sid, query(), 10)
        assert {i for i, _ in hits} == {ids[1], ids[2], ids[3], ids[5], ids[6]}
        assert other[0] not in {i for i, _ in hits}
    finally:
        await vi.close()
