"""Recall's ranking, the pure steps on hand-made candidates: fusion of the word and meaning
lists, the dense gate and rare terms, heading damping, near-copy removal, confidence, and
priors as score terms."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.recall.index import CorpusStats
from memory_core.recall.index.pipeline import HEADING_FACTOR, Ranking, rank
from memory_core.recall.index.ranking import ideal_score
from memory_core.recall.index.rerank import (
    Candidate,
    RankSettings,
    confidence,
    diversify,
    fuse,
    prior_factor,
)
from tests.support import bm25_score
from tests.support import candidate as make
from tests.unit.ranking_support import TODAY, link, texts

pytestmark = pytest.mark.storage

# --- fusion (pure) ----------------------------------------------------------------------


def test_bm25_only_is_unchanged_without_dense_scores() -> None:
    candidates = [make(i, f"t {i}", lexical=x) for i, x in enumerate((3.5, 0.0, 1.25))]
    for fusion in ("rrf", "weighted"):
        fuse(candidates, RankSettings(fusion=fusion))
        assert [c.base for c in candidates] == [3.5, 0.0, 1.25]


def test_reciprocal_rank_fusion() -> None:
    a = make(1, "a", lexical=3.0)
    b = make(2, "b", lexical=2.0, dense=0.9)
    c = make(3, "c", dense=0.8)  # no shared word: found by meaning alone
    d = make(4, "d", lexical=1.0, dense=0.1)
    settings = RankSettings(fusion="rrf", dense_weight=0.5, rrf_k=60)
    fuse([a, b, c, d], settings)
    k = 60

    def rrf(lex: int | None, dense: int | None) -> float:
        total = 0.5 / (k + lex) if lex else 0.0
        total += 0.5 / (k + dense) if dense else 0.0
        return total * (k + 1)

    assert a.base == pytest.approx(rrf(1, None))
    assert b.base == pytest.approx(rrf(2, 1))
    assert c.base == pytest.approx(rrf(None, 2))
    assert d.base == pytest.approx(rrf(3, 3))
    assert sorted((a, b, c, d), key=lambda x: -x.base)[0] is b  # in both lists
    both_first = [make(1, "x", lexical=1.0, dense=0.9), make(2, "y", lexical=0.5, dense=0.2)]
    fuse(both_first, settings)
    assert both_first[0].base == pytest.approx(1.0)  # first in both lists scores 1


def test_weighted_fusion_normalises_each_list() -> None:
    a = make(1, "a", lexical=4.0, dense=0.2)
    b = make(2, "b", lexical=1.0, dense=0.8)
    c = make(3, "c", dense=-0.3)
    fuse([a, b, c], RankSettings(fusion="weighted", dense_weight=0.25))
    assert a.base == pytest.approx(0.75 * 1.0 + 0.25 * 0.2 / 0.8)
    assert b.base == pytest.approx(0.75 * 0.25 + 0.25 * 1.0)
    assert c.base == 0.0  # a negative similarity is no evidence
    fuse([a, b, c], RankSettings(fusion="weighted", dense_weight=1.0))
    assert [a.base, b.base] == pytest.approx([0.25, 1.0])


def ranking(terms: dict[str, float], **settings: Any) -> Ranking:
    stats = CorpusStats(docs=20, avg_len=3.0, doc_freq={t: 2 for t in terms})
    return Ranking(terms, stats, None, TODAY, UTC, RankSettings(**settings))


def test_rank_keeps_a_dense_only_hit_and_min_score_bounds_the_words() -> None:
    """min_score drops weak lexical evidence, unless the vectors vouch for the hit."""
    r = ranking({"tea": 1.0}, recency_boost=0.0)
    weak = 0.1
    pool = {
        1: make(1, "green tea", lexical=2.0),
        2: make(2, "weak tea mention", lexical=weak),
        3: make(3, "a cup of sencha", dense=0.9),
        4: make(4, "weak tea but similar", lexical=weak, dense=0.5),
        5: make(5, "nothing at all"),
    }
    hits = rank(pool, r, limit=10, min_score=0.2)
    assert sorted(h.text for h in hits) == ["a cup of sencha", "green tea", "weak tea but similar"]
    assert {h.text: h.confidence for h in hits}["a cup of sencha"] == 1.0
    everything = rank(pool, r, limit=10, min_score=0.0)
    assert "weak tea mention" in texts(everything) and "nothing at all" not in texts(everything)


def test_a_rare_term_keeps_its_holders_among_chunks_that_only_read_alike() -> None:
    """A term of the question held by a single chunk names it: dense scores of chunks
    that merely read alike neither push it out of the results nor get it dropped as
    their near-copy. Such holders take at most half the slots; words of recent messages
    (weight below 1) pin nothing."""
    said = "the user said that we watched a film about whales and the code is"
    stats = CorpusStats(docs=300, avg_len=12.0, doc_freq={"code": 300, "zq7x": 1, "kizaqo": 1})
    pool = {i: make(i, f"{said} n{i}", lexical=0.1, dense=0.8) for i in range(1, 41)}
    pool[99] = make(99, f"{said} zq7x", lexical=3.0, dense=0.3)
    pool[98] = make(98, f"{said} kizaqo", lexical=3.0, dense=0.3)
    settings = RankSettings(recency_boost=0.0)

    def ranked(terms: dict[str, float], limit: int) -> list[str]:
        r = Ranking(terms, stats, None, TODAY, UTC, settings)
        return texts(rank(dict(pool), r, limit=limit))

    assert f"{said} zq7x" in ranked({"code": 1.0, "zq7x": 1.0}, 5)
    assert f"{said} zq7x" in ranked({"code": 1.0, "zq7x": 1.0}, 40)  # no near-copy drop
    both = ranked({"code": 1.0, "zq7x": 1.0, "kizaqo": 1.0}, 3)
    assert len(both) == 3 and f"{said} zq7x" in both and f"{said} kizaqo" in both
    assert len(ranked({"zq7x": 1.0, "kizaqo": 1.0}, 1)) == 1
    assert f"{said} zq7x" not in ranked({"code": 1.0, "zq7x": 0.5}, 5)


def test_heading_only_chunks_are_damped() -> None:
    r = ranking({"conversation": 1.0}, recency_boost=0.0)
    pool = {
        1: make(1, "# 2026-03-02 conversation", kind=ChunkKind.ARCHIVE_RAW, lexical=2.0),
        2: make(2, "Mia: what a conversation", kind=ChunkKind.ARCHIVE_RAW, lexical=2.0),
    }
    hits = rank(pool, r, limit=5)
    assert texts(hits) == ["Mia: what a conversation", "# 2026-03-02 conversation"]
    assert hits[1].score == pytest.approx(hits[0].score * HEADING_FACTOR)


def test_diversify_drops_near_copies_and_turns_already_shown() -> None:
    pool = {
        1: make(1, "Mia: the locker code is 4512", kind=ChunkKind.MESSAGE),
        2: make(2, "Bot: noted", kind=ChunkKind.MESSAGE),
        3: make(3, "Mia's locker code: 4512", kind=ChunkKind.DAILY),  # a near-copy of 1
        4: make(4, "locker moved to the second floor", kind=ChunkKind.DAILY),
    }
    link(pool, 1, 2, 1)
    ordered = [pool[1], pool[2], pool[3], pool[4]]

    def shown(c: Candidate) -> set[int]:
        return {c.id, *(o for d, o in c.neighbours if d == 1)}

    assert [c.id for c in diversify(ordered, 10, 0.8, shown)] == [1, 4]
    assert [c.id for c in diversify(ordered, 1, 0.8, shown)] == [1]
    assert [c.id for c in diversify(ordered, 10, 1.01)] == [1, 2, 3, 4]


def test_confidence_grows_with_the_score_against_the_ideal() -> None:
    stats = CorpusStats(docs=50, avg_len=4.0, doc_freq={"mochi": 2, "vet": 5})
    ideal = ideal_score({"mochi": 1.0, "vet": 1.0, "absent": 1.0}, stats)
    one_doc = bm25_score(["mochi", "vet"], ["mochi", "vet", "x", "y"], stats)
    assert one_doc == pytest.approx(ideal)  # both terms once, average length
    assert confidence(ideal, ideal) == pytest.approx(1 - math.exp(-1.6))
    assert confidence(0.0, ideal) == 0.0 and confidence(1.0, 0.0) == 0.0
    steps = [confidence(ideal * x, ideal) for x in (0.1, 0.5, 1.0, 2.0)]
    assert steps == sorted(steps) and steps[-1] < 1.0


# --- priors as score terms (pure) --------------------------------------------------------


def test_prior_factor_lifts_long_term_and_recent_and_cuts_summaries() -> None:
    settings = RankSettings()
    zone = UTC
    today = date(2026, 3, 1)

    def ago(days: float) -> datetime:
        return datetime(2026, 3, 1, 12, tzinfo=UTC) - timedelta(days=days)

    assert prior_factor(ChunkKind.DAILY, None, today, zone, settings) == 1.0
    assert prior_factor(ChunkKind.LONG_TERM, None, today, zone, settings) == pytest.approx(1.15)
    assert prior_factor(ChunkKind.SUMMARY, None, today, zone, settings) == pytest.approx(0.9)
    assert prior_factor(ChunkKind.DAILY, ago(0), today, zone, settings) == pytest.approx(1.1)
    assert prior_factor(ChunkKind.DAILY, ago(30), today, zone, settings) == pytest.approx(1.05)
    assert prior_factor(ChunkKind.DAILY, ago(60), today, zone, settings) == pytest.approx(1.025)
    assert prior_factor(ChunkKind.DAILY, ago(-3), today, zone, settings) == pytest.approx(1.1)
    assert prior_factor(ChunkKind.LONG_TERM, ago(0), today, zone, settings) == pytest.approx(1.25)
    assert prior_factor(ChunkKind.SUMMARY, ago(30), today, zone, settings) == pytest.approx(0.95)
    # Small factors: no prior more than doubles or halves a score.
    for kind in ChunkKind:
        for days in (0, 1, 400):
            assert 0.5 < prior_factor(kind, ago(days), today, zone, settings) < 2.0
    off = RankSettings(recency_boost=0.0, long_term_boost=0.0, summary_factor=1.0)
    for kind in ChunkKind:
        assert prior_factor(kind, ago(0), today, zone, off) == 1.0


def test_a_better_older_hit_beats_a_weak_recent_long_term_one() -> None:
    r = ranking({"ramen": 1.0, "broth": 1.0})
    fresh = datetime.combine(TODAY, datetime.min.time(), tzinfo=UTC)
    pool = {
        1: make(1, "likes ramen", kind=ChunkKind.LONG_TERM, lexical=1.0, created_at=fresh),
        2: make(2, "ramen broth recipe", lexical=2.0, created_at=fresh - timedelta(days=300)),
        3: make(3, "walked past ramen", lexical=1.0, created_at=fresh),
        4: make(4, "ramen tour notes", kind=ChunkKind.SUMMARY, lexical=1.0, created_at=fresh),
    }
    assert texts(rank(pool, r, limit=5)) == [
        "ramen broth recipe",
        "likes ramen",
        "walked past ramen",
        "ramen tour notes",
    ]
