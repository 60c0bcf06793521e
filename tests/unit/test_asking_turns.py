"""A turn that asks ranks below one that tells (`rerank.asks`, `recall.question_factor`):
"Did you bake for the party?" shares the words of what it asks about; the answer is in
another turn."""

from __future__ import annotations

from datetime import UTC, date

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.recall.index import CorpusStats
from memory_core.recall.index.pipeline import Ranking, rank
from memory_core.recall.index.rerank import RankSettings, asks
from tests.support import candidate

TODAY = date(2026, 3, 1)


@pytest.mark.parametrize(
    ("text", "kind", "asking"),
    [
        ("Mia: did you bake for the party?", ChunkKind.ARCHIVE_RAW, True),
        ("18:02:00 Mia: 你周末烤蛋糕了吗？", ChunkKind.ARCHIVE_RAW, True),
        ("Mia: did you bake?  ", ChunkKind.MESSAGE, True),
        ("Mia: I baked a peach cobbler for the party", ChunkKind.MESSAGE, False),
        ("Mia: what a party? No, a feast.", ChunkKind.MESSAGE, False),
        ("Is the party on Friday?", ChunkKind.LONG_TERM, False),
    ],
)
def test_asks(text: str, kind: ChunkKind, asking: bool) -> None:
    assert asks(candidate(1, text, kind=kind)) is asking


def ranked(factor: float) -> list[str]:
    pool = {
        1: candidate(1, "Leo: did you bake for the party?", kind=ChunkKind.MESSAGE, lexical=2.0),
        2: candidate(2, "Mia: I baked for the party", kind=ChunkKind.MESSAGE, lexical=2.0),
    }
    settings = RankSettings(context_weights=(), recency_boost=0.0, question_factor=factor)
    stats = CorpusStats(docs=20, avg_len=5.0, doc_freq={"bake": 2, "parti": 2})
    ranking = Ranking({"bake": 1.0, "parti": 1.0}, stats, None, TODAY, UTC, settings)
    hits = rank(pool, ranking, limit=2)
    if factor != 1.0:
        assert hits[1].score == pytest.approx(hits[0].score * factor)
    return [h.text for h in hits]


def test_a_turn_that_asks_ranks_below_one_that_tells() -> None:
    assert ranked(1.0) == ["Leo: did you bake for the party?", "Mia: I baked for the party"]
    assert ranked(0.8) == ["Mia: I baked for the party", "Leo: did you bake for the party?"]
