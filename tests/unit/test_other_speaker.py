"""A question naming who spoke wants that person's own turns (`pipeline.speaks`,
`recall.other_speaker_factor`): "What video games does Nate play?" is answered by Nate,
not by Joanna asking him about games."""

from __future__ import annotations

from datetime import UTC, date

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.text import tokenize
from memory_core.recall.index import CorpusStats
from memory_core.recall.index.pipeline import Ranking, lexical_scorer, rank, speaks
from memory_core.recall.index.rerank import RankSettings
from tests.support import candidate

TODAY = date(2026, 3, 1)
JOANNA = "Joanna: video games, video games! you play video games all night, Nate"
NATE = "Nate: I play video games with my team after work on weekends"
ENTRY = "Joanna plays video games too"


def ranked(factor: float, query: str, texts: list[tuple[str, ChunkKind]]) -> list[str]:
    pool = {
        i: candidate(i, text, kind=kind, path=f"sessions/{i}.md")
        for i, (text, kind) in enumerate(texts, start=1)
    }
    # The speaker field at half the name's idf: Joanna's turn, richer in the words, then
    # outscores Nate's before the factor (by less than 1 / 0.7).
    settings = RankSettings(
        context_weights=(),
        recency_boost=0.0,
        long_term_boost=0.0,
        speaker_weight=0.5,
        other_speaker_factor=factor,
    )
    terms = dict.fromkeys(tokenize(query), 1.0)
    freq = {t: 2 for t in terms}
    stats = CorpusStats(docs=20, avg_len=8.0, doc_freq=freq)
    ranking = Ranking(terms, stats, None, TODAY, UTC, settings)
    score = lexical_scorer(ranking)
    for c in pool.values():
        c.lexical = score(c)
    return [h.text for h in rank(pool, ranking, limit=len(pool))]


TURNS = [(JOANNA, ChunkKind.MESSAGE), (NATE, ChunkKind.MESSAGE)]


def test_the_named_speakers_turn_ranks_above_the_other_speakers() -> None:
    assert ranked(1.0, "What video games does Nate play?", TURNS) == [JOANNA, NATE]
    assert ranked(0.7, "What video games does Nate play?", TURNS) == [NATE, JOANNA]


def test_a_question_naming_no_speaker_leaves_the_order_alone() -> None:
    assert ranked(0.7, "What video games are played?", TURNS) == [JOANNA, NATE]


def test_a_question_naming_both_speakers_leaves_the_order_alone() -> None:
    query = "What video games do Joanna and Nate play?"
    assert ranked(0.7, query, TURNS) == ranked(1.0, query, TURNS)


@pytest.mark.parametrize(
    ("text", "kind", "named"),
    [
        (NATE, ChunkKind.MESSAGE, True),
        ("18:02:00 Nate: 我周末打游戏", ChunkKind.ARCHIVE_RAW, True),
        (JOANNA, ChunkKind.MESSAGE, False),
        (ENTRY, ChunkKind.LONG_TERM, True),
    ],
)
def test_speaks(text: str, kind: ChunkKind, named: bool) -> None:
    assert speaks(candidate(1, text, kind=kind), frozenset({"nate"})) is named
