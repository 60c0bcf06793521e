"""VectorIndex and its SQL (memory_core/storage/vectors/: index.py, backfill.py,
survey.py, graphs.py, rows.py, ann.py): vectors made through the real
openai client against the fake server, stored in a real SQLite file, searched exactly or
through a real usearch graph, and never leaking across scopes. Backfill and the cache
are here; search is test_vector_search.py's, the graph test_vector_graph.py's."""

from __future__ import annotations

import logging

import numpy as np
import openai
import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualMonotonic
from memory_core.embedding.remote import OpenAIEmbedder
from memory_core.storage.db import Database
from memory_core.storage.vectors import backfill as vector_backfill
from memory_core.storage.vectors import rows as vectors
from memory_core.storage.vectors import survey as vector_survey
from memory_core.storage.vectors.index import VectorIndex
from testkit.openai_server import FakeOpenAI
from testkit.waiting import turns, until
from tests.unit.vector_support import (
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
    db: Database, fake: FakeOpenAI
) -> None:
    """A failed backfill is tried again once the schedule's first wait has passed on the
    injected clock, and not before."""
    clock = ManualMonotonic()
    index = VectorIndex(db, embedder(fake), batch_size=2, monotonic=clock, sleep=clock.sleep)
    try:
        sid, ids = await add(db, "main", ["alpha", "beta"])
        fake.fail_embeddings(500)
        index.schedule(sid)
        await index.drain()
        assert await stored(db) == {}
        await until(lambda: clock.sleeping == 1, what="the retry waiting")
        first = vector_backfill.RETRY_WAITS.wait(1)
        clock.advance(first - 1)
        await turns()
        await index.drain()
        assert clock.sleeping == 1 and len(fake.embedding_requests()) == 1

        async def backfilled() -> bool:
            await index.drain()
            return len(await stored(db)) == 2

        clock.advance(1)  # the retry is due: it backfills
        await until(backfilled, what="the retried backfill")
        assert set(await stored(db)) == set(ids)
        assert clock.sleeping == 0  # it worked: no further retry waits
    finally:
        await index.close()


async def test_schedule_coalesces_and_drain_waits(
    db: Database, fake: FakeOpenAI, index: VectorIndex
) -> None:
    sid, _ = await add(db, "main", ["alpha", "beta"])
    fake.fail_embeddings(200, delay=0.2)  # the first batch is slow
    index.schedule(sid)
    await until(fake.embedding_requests, what="the first batch with the model")
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


async def test_a_survey_put_off_starts_by_itself_on_the_injected_clock(
    db: Database, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait of a survey put off for the duty is reckoned and slept on one clock: the
    test's, moved past it, starts the survey without any backfill being asked for."""
    monkeypatch.setattr(vector_survey, "SMALL_SCOPE", 2)
    clock = ManualMonotonic()
    vi = VectorIndex(db, embedder(fake), monotonic=clock, sleep=clock.sleep)
    try:
        sid, ids = await add(db, "main", ["alpha", "beta", "gamma", "delta"])
        await vi.backfill(sid)
        vi._backfills._surveys._watch[sid].cost = 1.0  # as if the survey had taken a second
        await delete(db, sid, [ids[0]])
        await vi.backfill(sid)
        assert ids[0] in await stored(db)  # wanted, but not before 100 s
        await until(lambda: clock.sleeping == 1, what="the survey put off")
        clock.advance(1.0 / vector_survey.SURVEY_DUTY)

        async def surveyed() -> bool:
            await vi.drain()
            return ids[0] not in await stored(db)

        await until(surveyed, what="the survey's backfill")
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
