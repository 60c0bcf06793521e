"""Meaning over words, the options measured in bench/recall_quality.py: a turn's cosine as
the best of its two windows (`rerank.window_max`), the query's vector moved toward the best
BM25 hits' (Rocchio: `VectorIndex.moved_toward`, recall/index/dense.py) and rare words of
the best hits joined to the query (recall/index/feedback.py).

Pure steps on hand-made candidates; the vector index and the search on a real SQLite
index with crafted vectors from the fake embeddings server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import openai
import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.scope import MAIN
from memory_core.embedding.remote import OpenAIEmbedder
from memory_core.engine import MemoryCore
from memory_core.recall.index import CorpusStats, SearchIndex
from memory_core.recall.index.dense import moved_query
from memory_core.recall.index.feedback import FEEDBACK_WEIGHT, feedback_terms
from memory_core.recall.index.rerank import RankSettings, window_max
from memory_core.recall.request import SearchRequest
from memory_core.storage.vectors.index import VectorIndex
from testkit.openai_server import FakeOpenAI
from tests.conftest import START
from tests.support import candidate, database, index_message

pytestmark = pytest.mark.timeout(60)

LOG = "sessions/2026-03-01.jsonl"


def test_a_turn_takes_the_better_of_its_two_windows() -> None:
    turns = {
        c.id: c
        for c in (
            candidate(1, "Deborah: How was your weekend?", kind=ChunkKind.MESSAGE, path=LOG),
            candidate(2, "Anna: My mom was into art", kind=ChunkKind.MESSAGE, path=LOG),
            candidate(3, "Deborah: She painted a lot", kind=ChunkKind.MESSAGE, path=LOG),
            candidate(4, "note about art", dense=0.9),
        )
    }
    turns[1].dense, turns[2].dense, turns[3].dense = 0.2, 0.3, 0.6
    for a, b in ((1, 2), (2, 3)):
        turns[a].neighbours.append((1, b))
        turns[b].neighbours.append((1, a))
    turns[3].neighbours.append((1, 4))  # another file: not a window of turn 3
    window_max(turns)
    # Turn 2's text is also in turn 3's vector (made with the turn before it).
    assert [turns[i].dense for i in (1, 2, 3, 4)] == [0.3, 0.6, 0.6, 0.9]


def test_a_turn_without_a_vector_takes_its_next_windows() -> None:
    first = candidate(1, "A: hi", kind=ChunkKind.MESSAGE, path=LOG)
    second = candidate(2, "B: photography lately", kind=ChunkKind.MESSAGE, path=LOG, dense=0.5)
    first.neighbours.append((1, 2))
    second.neighbours.append((1, 1))
    window_max({1: first, 2: second})
    assert (first.dense, second.dense) == (0.5, 0.5)


def test_feedback_words_are_the_best_hits_rare_words_held_twice_or_more() -> None:
    stats = CorpusStats(
        docs=200,
        avg_len=5.0,
        doc_freq={"paint": 3, "canva": 2, "studio": 4, "nice": 60, "uniqu": 1, "evan": 90},
    )
    best = ["evan paint canva nice", "paint studio uniqu", "evan nice"]
    got = feedback_terms(best, {"evan": 1.0, "paint": 1.0}, stats, 5)
    # Query words, common words (over 2 % of the scope) and a word of one chunk stay out;
    # the rarest come first.
    assert got == {"canva": FEEDBACK_WEIGHT, "studio": FEEDBACK_WEIGHT}
    assert list(feedback_terms(best, {}, stats, 1)) == ["canva"]
    assert feedback_terms(best, {}, stats, 0) == {}


VECTORS = {
    "glaze": [1.0, 0.0, 0.0, 0.0],
    "ceramics": [0.9, 0.436, 0.0, 0.0],
    "kiln": [0.0, 0.0, 1.0, 0.0],
}


def crafted(text: str, dim: int) -> list[float]:
    """A text whose last line holds a known word gets its vector (the first in
    `VECTORS`: the kiln line's is the glaze's); any other text one far from all."""
    line = text.splitlines()[-1]  # a turn's own line, not the turn before it
    for word, vector in VECTORS.items():
        if word in line:
            return vector
    return [0.0, 0.0, 0.0, 1.0]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(embedding_dim=4) as server:
        server.set_embedding(crafted)
        yield server


def vector_index(core: MemoryCore, fake: FakeOpenAI) -> VectorIndex:
    embedder = OpenAIEmbedder(
        "emb",
        base_url=fake.base_url,
        api_key="k",
        max_retries=0,
        timeout_seconds=5.0,
        http_client=openai.DefaultAsyncHttpxClient(trust_env=False),
    )
    return VectorIndex(database(core), embedder)


def write_note(core: MemoryCore, lines: list[str]) -> None:
    notes = core.workspace.memory_dir(MAIN)
    notes.mkdir(parents=True, exist_ok=True)
    Path(notes / "2026-03-01.md").write_text("".join(f"- 09:00:00 {line}\n" for line in lines))


async def test_the_vector_index_compares_chosen_chunks_and_moves_a_query(
    core: MemoryCore, fake: FakeOpenAI
) -> None:
    write_note(core, ["the kiln glaze recipe", "she loves ceramics", "a walk by the river"])
    vectors = vector_index(core, fake)
    index = SearchIndex(database(core), core.workspace, vectors=vectors)
    try:
        await index.sync_scope(MAIN)
        sid = await index.scope_id(MAIN, create=False)
        assert sid is not None
        await vectors.backfill(sid)
        ids = dict(await vectors_of(core))
        kiln = np.array(VECTORS["kiln"], dtype=np.float32)
        sims = await vectors.similarities(sid, kiln, [ids["ceramics"], ids["walk"], 10_000])
        assert sims == pytest.approx({ids["ceramics"]: 0.0, ids["walk"]: 0.0}, abs=1e-3)
        moved = await vectors.moved_toward(sid, kiln, [ids["glaze"]], 0.5)
        # kiln + 0.5 x the glaze note's vector, at unit length.
        assert moved == pytest.approx([0.4472, 0.0, 0.8944, 0.0], abs=1e-3)
        assert await vectors.moved_toward(sid, kiln, [10_000], 0.5) is kiln
    finally:
        await index.close()
        await vectors.close()


async def vectors_of(core: MemoryCore) -> list[tuple[str, int]]:
    """(first distinctive word, chunk id) of every note line."""
    rows = await database(core).read(
        lambda conn: conn.execute("SELECT id, text FROM chunks WHERE kind = 'daily'").fetchall()
    )
    out = []
    for chunk_id, text in rows:
        word = next((w for w in ("glaze", "ceramics", "walk") if w in text), None)
        if word is not None:
            out.append((word, int(chunk_id)))
    return out


async def test_rocchio_finds_what_the_words_hit_means_without_its_words(
    core: MemoryCore, fake: FakeOpenAI
) -> None:
    # Vectors by each turn's own line: the ceramics turn's is near the glaze's, the kiln
    # turn's is the glaze's, the others far from all; the ceramics turn is four turns
    # from the kiln turn, out of its context window and its neighbours' hits.
    said = [
        "Bob: she loves ceramics",
        "Ann: a walk by the river",
        "Bob: the weather is grey",
        "Ann: rain all week",
        "Bob: the kiln glaze recipe",
    ]
    for n, text in enumerate(said):
        speaker, words = text.split(": ")
        await index_message(core, MAIN, "s1", n + 1, speaker, words, START)
    vectors = vector_index(core, fake)
    anchored: dict[int, set[int]] = {}
    for feedback in (0, 1):
        index = SearchIndex(
            database(core),
            core.workspace,
            vectors=vectors,
            rank_settings=RankSettings(dense_feedback=feedback),
        )
        try:
            sid = await index.scope_id(MAIN, create=False)
            assert sid is not None
            await vectors.backfill(sid)
            hits = await index.search(MAIN, SearchRequest("kiln", limit=3, today=START.date()))
            assert hits[0].text.endswith("the kiln glaze recipe")
            anchored[feedback] = {h.line_from if h.anchor is None else h.anchor for h in hits}
        finally:
            await index.close()
    await vectors.close()
    # The query's own vector ("kiln") is far from every turn: the ceramics turn (line 1),
    # without a word of the question, anchors no hit (it may be shown beside one). Moved
    # toward the kiln turn's vector (glaze), the query is near it: found by meaning.
    assert 1 not in anchored[0]
    assert 1 in anchored[1]


async def test_rocchio_takes_no_feedback_from_statements() -> None:
    notes = {1: candidate(1, "the kiln glaze recipe", lexical=3.0)}
    # Long-term entries and notes are clean statements: no turn, no move (and no call).
    assert await moved_query(NoVectors(), 1, [1.0], notes, 3, 0.5) is None


class NoVectors:
    """A vector index that must not be asked."""

    async def moved_toward(self, *args: object) -> object:
        raise AssertionError("asked for feedback without a turn")
