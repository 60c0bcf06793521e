"""VectorIndex and its SQL (memory_core/storage/vectors/: index.py, backfill.py,
survey.py, graphs.py, rows.py, ann.py): vectors made through the real
openai client against the fake server, stored in a real SQLite file, searched exactly or
through a real usearch graph, and never leaking across scopes."""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path

import numpy as np
import openai
import pytest

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.clock import ManualMonotonic
from memory_core.embedding.remote import OpenAIEmbedder
from memory_core.recall.index import writes
from memory_core.storage.db import Database
from memory_core.storage.vectors import ann
from memory_core.storage.vectors import backfill as vector_backfill
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors import survey as vector_survey
from memory_core.storage.vectors.index import VectorIndex
from testkit.openai_server import FakeOpenAI

pytestmark = pytest.mark.timeout(60)

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


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_dim=4) as server:
        server.set_embedding(crafted)
        yield server


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
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


@pytest.fixture
async def index(db: Database, fake: FakeOpenAI) -> AsyncIterator[VectorIndex]:
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


# --- backfill and the cache --------------------------------------------------------------


async def test_backfill_then_search_orders_by_cosine(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, ids = await add(db, "main", ["gamma", "alpha", "delta", "beta", "epsilon"])
    assert await index.backfill(sid) == 5
    assert len(fake.embedding_requests()) == 3  # batches of 2
    hits = await index.search(sid, query(), 4)
    by_text = dict(zip(ids, ["gamma", "alpha", "delta", "beta", "epsilon"], strict=True))
    assert [by_text[i] for i, _ in hits] == ["alpha", "beta", "epsilon", "gamma"]
    # Stored as float16: a cosine is within about 5e-4 of the float32 one.
    assert [score for _, score in hits] == pytest.approx([1.0, 0.8, 0.6, 0.0], abs=1e-3)
    everything = await index.search(sid, query(), 10)
    assert [by_text[i] for i, _ in everything][-1] == "delta"
    assert everything[-1][1] == pytest.approx(-1.0)
    assert await index.search(sid, query(), 0) == []
    assert await index.search(sid, query([0, 0, 0, 0]), 3) == []


async def test_a_group_entrys_vector_is_made_of_what_was_said(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    """The label "(by Alice) " says who said an entry: embedded with it, every entry of a
    person came close to each question naming them (LoCoMo dev, frac@5 with vectors 70.3
    → 69.0), so the model is given the text after it."""
    texts = ["(by Alice) I live in Beijing", "(claim by Bob) Alice lives in Shanghai", "plain"]
    sid, _ = await add(db, "group:t:1", texts, kind=ChunkKind.LONG_TERM)
    assert await index.backfill(sid) == 3
    assert sorted(fake.embedded_texts()) == [
        "Alice lives in Shanghai",
        "I live in Beijing",
        "plain",
    ]


async def test_each_vector_is_stored_once_as_float16_by_model_and_text_hash(
    db: Database, index: VectorIndex
) -> None:
    sid, ids = await add(db, "main", ["beta"])
    other, other_ids = await add(db, "peer:other", ["beta"])  # the same text elsewhere
    await index.backfill(sid)
    await index.backfill(other)
    rows = await db.read(
        lambda conn: conn.execute(
            "SELECT chunk_id, scope_id, model, text_hash FROM chunk_vectors ORDER BY chunk_id"
        ).fetchall()
    )
    digest = vectors.text_hash("beta")
    assert rows == [
        (ids[0], sid, "openai:emb", digest),
        (other_ids[0], other, "openai:emb", digest),
    ]
    # One vector for both chunks: float16 bytes, keyed by the model and the text's hash.
    stored_vectors = await db.read(
        lambda conn: conn.execute("SELECT model, text_hash, vec FROM embeddings").fetchall()
    )
    assert [(m, h) for m, h, _ in stored_vectors] == [("openai:emb", digest)]
    half = bytes(stored_vectors[0][2])
    assert len(half) == 4 * 2
    assert np.frombuffer(half, dtype="<f2") == pytest.approx([0.8, 0.6, 0.0, 0.0], abs=1e-3)
    cached = await db.read(lambda conn: vectors.cached(conn, "openai:emb", [digest]))
    assert np.frombuffer(cached[digest], dtype=np.float32) == pytest.approx(
        [0.8, 0.6, 0, 0], abs=1e-3
    )
    assert await db.read(lambda conn: vectors.cached(conn, "openai:other", [digest])) == {}


async def test_cache_spares_the_model_a_second_time_and_in_another_scope(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    texts = ["alpha", "beta", "gamma"]
    a, a_ids = await add(db, "peer:a", texts)
    assert await index.backfill(a) == 3
    asked = len(fake.embedded_texts())
    assert asked == 3
    assert await index.backfill(a) == 0  # nothing new
    b, b_ids = await add(db, "peer:b", texts)  # the same texts said in another scope
    assert await index.backfill(b) == 3
    # A reindex gives chunks new ids: their vectors come from the cache too.
    await delete(db, a, a_ids)
    _, again_ids = await add(db, "peer:a", texts)
    assert await index.backfill(a) == 3
    assert len(fake.embedded_texts()) == asked
    assert set(await stored(db)) == {*b_ids, *again_ids}


async def test_only_the_misses_of_a_batch_are_embedded(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, _ = await add(db, "main", ["alpha", "beta"])
    await index.backfill(sid)
    await add(db, "main", ["alpha", "gamma", "beta", "delta"])
    assert await index.backfill(sid) == 4
    assert fake.embedded_texts() == ["alpha", "beta", "gamma", "delta"]


async def test_failure_leaves_chunks_unembedded_logs_once_and_is_retried(
    db: Database,
    fake: FakeOpenAI,
    index: VectorIndex,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sid, ids = await add(db, "main", ["alpha", "beta", "gamma"])
    fake.fail_embeddings(500, times=2, message="model crashed")
    with caplog.at_level(logging.DEBUG, logger="memory_core.storage.vectors.backfill"):
        assert await index.backfill(sid) == 0  # not raised
        assert await index.backfill(sid) == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "model crashed" in warnings[0].getMessage()
    assert await stored(db) == {}
    assert await index.search(sid, query(), 3) == []
    # Later, the model is back: the same chunks are embedded.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="memory_core.storage.vectors.backfill"):
        assert await index.backfill(sid) == 3
    assert "works again" in caplog.text
    assert set(await stored(db)) == set(ids)


async def test_a_failure_half_way_keeps_the_batches_before_it(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, _ids = await add(db, "main", ["alpha", "beta", "gamma", "delta"])
    fake.fail_embeddings(200)  # the first batch: answered after no delay
    fake.fail_embeddings(503)  # the second batch fails
    assert await index.backfill(sid) == 2
    assert len(await stored(db)) == 2
    assert await index.backfill(sid) == 2
    assert len(await stored(db)) == 4


async def test_scheduled_backfill_retries_by_itself_after_a_failure(
    db: Database, fake: FakeOpenAI, index: VectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_backfill, "RETRY_SECONDS", (0.05,))
    sid, ids = await add(db, "main", ["alpha", "beta"])
    fake.fail_embeddings(500)
    index.schedule(sid)
    await index.drain()
    assert await stored(db) == {}
    for _ in range(100):  # the retry timer fires and backfills
        await asyncio.sleep(0.02)
        await index.drain()
        if len(await stored(db)) == 2:
            break
    assert set(await stored(db)) == set(ids)


async def test_schedule_coalesces_and_drain_waits(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, _ = await add(db, "main", ["alpha", "beta"])
    fake.fail_embeddings(200, delay=0.2)  # the first batch is slow
    index.schedule(sid)
    for _ in range(2000):  # until the first batch is with the model
        if fake.embedding_requests():
            break
        await asyncio.sleep(0.005)
    assert fake.embedding_requests(), "the backfill never began"
    await add(db, "main", ["gamma"])
    for _ in range(5):
        index.schedule(sid)  # joins the running backfill: one more round, not five
    await index.drain()
    assert len(await stored(db)) == 3
    assert fake.embedded_texts() == ["alpha", "beta", "gamma"]


async def test_stale_vectors_go_when_chunks_are_deleted_or_change_text(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, ids = await add(db, "main", ["alpha", "beta", "gamma"])
    await index.backfill(sid)
    assert [i for i, _ in await index.search(sid, query(), 3)][:2] == [ids[0], ids[1]]
    # Deleted: its vector leaves the table and the matrix.
    await delete(db, sid, [ids[0]])
    await index.backfill(sid)
    assert set(await stored(db)) == {ids[1], ids[2]}
    assert ids[0] not in [i for i, _ in await index.search(sid, query(), 3)]
    # Edited: the newest chunk deleted and its id taken again by another text, which
    # neither the id range nor the scope's count tells apart; the quick look's re-read
    # of the newest texts does.
    await delete(db, sid, [ids[2]])
    _, (reused,) = await add(db, "main", ["epsilon"])
    assert reused == ids[2]
    assert await index.backfill(sid) == 1
    assert (await stored(db))[reused][1] == vectors.text_hash("epsilon")
    assert dict(await index.search(sid, query(), 3))[reused] == pytest.approx(0.6, abs=1e-3)


async def test_a_changed_text_is_never_served_by_its_old_vector(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, ids = await add(db, "main", ["gamma", "beta"])
    await index.backfill(sid)
    await delete(db, sid, [ids[1]])
    _, (reused,) = await add(db, "main", ["delta"])  # before any backfill ran
    assert reused == ids[1]
    # beta's vector (0.8 on the axis) still sits under the id in memory and in the table:
    hits = await index.search(sid, query(), 2)
    assert reused not in [i for i, _ in hits]
    await index.drain()  # the mismatch asked for a survey
    assert dict(await index.search(sid, query(), 2))[reused] == pytest.approx(-1.0)


async def test_deep_changes_are_found_by_the_hourly_survey(db: Database, fake: FakeOpenAI) -> None:
    monotonic = ManualMonotonic()
    vi = VectorIndex(db, embedder(fake), monotonic=monotonic)
    try:
        count = vector_survey.RECENT_IDS + 20
        sid, ids = await add(db, "main", ["gamma"] * count)
        await vi.backfill(sid)
        await delete(db, sid, ids)  # every chunk deleted, as many written again:
        _, again = await add(db, "main", ["alpha"] * count)  # same ids, same count
        assert again == ids
        assert await vi.backfill(sid) == vector_survey.RECENT_IDS  # the newest, at once
        monotonic.advance(vector_survey.SURVEY_EVERY)
        assert await vi.backfill(sid) == 20  # the rest, by the survey
        assert {h for _, h in (await stored(db)).values()} == {vectors.text_hash("alpha")}
    finally:
        await vi.close()


async def test_big_scopes_are_surveyed_within_the_duty(
    db: Database, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_survey, "SMALL_SCOPE", 2)
    monotonic = ManualMonotonic()
    vi = VectorIndex(db, embedder(fake), monotonic=monotonic)
    try:
        sid, ids = await add(db, "main", ["alpha", "beta", "gamma", "delta"])
        await vi.backfill(sid)
        vi._backfills._surveys._watch[sid].cost = 1.0  # as if the survey had taken a second
        await delete(db, sid, [ids[0]])
        await vi.backfill(sid)
        assert ids[0] in await stored(db)  # wanted, but not before 100 s
        assert sid in vi._backfills._surveys._timers
        monotonic.advance(1.0 / vector_survey.SURVEY_DUTY)
        await vi.backfill(sid)
        assert ids[0] not in await stored(db)
    finally:
        await vi.close()


async def test_limit_embeds_part_and_the_next_backfill_the_rest(
    db: Database, index: VectorIndex
) -> None:
    sid, _ = await add(db, "main", ["alpha", "beta", "gamma", "delta", "epsilon"])
    assert await index.backfill(sid, limit=2) == 2
    assert await index.backfill(sid) == 3


async def test_switching_model_replaces_every_vector(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, ids = await add(db, "main", ["alpha", "beta"])
    await index.backfill(sid)
    other = OpenAIEmbedder(
        "other",
        base_url=fake.base_url,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
    )
    vi = VectorIndex(db, other)
    try:
        assert await vi.backfill(sid) == 2
        models = await db.read(
            lambda conn: conn.execute("SELECT DISTINCT model FROM chunk_vectors").fetchall()
        )
        assert models == [("openai:other",)]
        assert [i for i, _ in await vi.search(sid, query(), 1)] == [ids[0]]
    finally:
        await vi.close()


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


async def test_close_stops_retries_and_closes_the_embedder(
    db: Database, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_backfill, "RETRY_SECONDS", (0.05,))
    vi = VectorIndex(db, embedder(fake))
    sid, _ = await add(db, "main", ["alpha"])
    fake.fail_embeddings(500, times=10)
    vi.schedule(sid)
    await vi.drain()
    await vi.close()
    requests = len(fake.embedding_requests())
    await asyncio.sleep(0.15)
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


# --- the graph of a large scope (memory_core/storage/vectors/ann.py) --------------------------------

GRAPH_DIM = 32
GRAPH_ROWS = 600


def seeded(text: str, dim: int) -> list[float]:
    """ "s17" → a fixed random vector of its own; "q…" texts too (the queries)."""
    seed = int(text[1:]) + (1_000_000 if text[0] == "q" else 0)
    return list(np.random.default_rng(seed).standard_normal(dim))


@pytest.fixture
async def spread(tmp_path: Path) -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_dim=GRAPH_DIM) as server:
        server.set_embedding(seeded)
        yield server


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
    first = threading.Event()
    real = ann.Graph.add

    def slow(self, keys, vecs, **kwargs):  # type: ignore[no-untyped-def]
        slices.append(len(keys))
        first.set()
        time.sleep(0.02)
        return real(self, keys, vecs, **kwargs)

    monkeypatch.setattr(ann.Graph, "add", slow)
    vi = VectorIndex(db, embedder(spread), ann_min_rows=100)
    await vi.load(sid)
    assert await asyncio.to_thread(first.wait, 5)
    await vi.close()
    done = len(slices)
    await asyncio.sleep(0.1)
    assert len(slices) == done < GRAPH_ROWS // 8  # stopped within a slice, long before the end
