"""MaxScore's top N is the brute-force top N (memory_core/recall/index/topk.py): over any
corpus, weights and filters, and while it skips the postings that cannot matter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.recall.index.ranking import CorpusStats
from memory_core.recall.index.topk import Scoring, exact_top

WORDS = ["tea", "green", "cat", "boiler", "rose", "oak", "kayak", "bench"]


def index(docs: Sequence[str]) -> tuple[dict[str, list[tuple[int, int, int]]], CorpusStats]:
    """Postings (id, tf, length) per term, ids from 1, and the corpus' statistics."""
    postings: dict[str, list[tuple[int, int, int]]] = {}
    df: Counter[str] = Counter()
    for chunk_id, tokens in enumerate(docs, start=1):
        words = tokens.split()
        for term, tf in Counter(words).items():
            postings.setdefault(term, []).append((chunk_id, tf, len(words)))
            df[term] += 1
    total = sum(len(d.split()) for d in docs)
    return postings, CorpusStats(len(docs), total / max(len(docs), 1), dict(df))


def brute(scoring: Scoring, docs: Sequence[str], hidden: set[int], wanted: int) -> list[int]:
    """Every visible chunk holding a term that finds (not a boost alone), by its score."""
    finders = set(scoring.finders)
    scored = [
        (-scoring.score(tokens), chunk_id)
        for chunk_id, tokens in enumerate(docs, start=1)
        if chunk_id not in hidden and not finders.isdisjoint(tokens.split())
    ]
    return [chunk_id for _, chunk_id in sorted(scored)[:wanted]]


def run(
    scoring: Scoring,
    docs: Sequence[str],
    postings: dict[str, list[tuple[int, int, int]]],
    hidden: set[int],
    wanted: int,
    read: Counter[str] | None = None,
    blind: bool = False,
) -> list[int]:
    """`exact_top` over in-memory postings; `blind`: every length given as 0 (unknown,
    as SQLite gives a chunk of 128 tokens or more)."""

    def terms(term: str) -> tuple[list[int], list[int], list[int]]:
        if read is not None:
            read[term] += 1
        held = postings.get(term, [])
        return [p[0] for p in held], [p[1] for p in held], [0 if blind else p[2] for p in held]

    def fetch(ids: list[int]) -> list[Any]:
        assert not set(ids) & fetched, "a chunk is fetched once"
        fetched.update(ids)
        return [(i, "", 0, 0, docs[i - 1]) for i in ids if i not in hidden]

    def admit(ids: list[int]) -> set[int]:
        return {i for i in ids if i not in hidden}

    fetched: set[int] = set()
    return [int(row[0]) for row in exact_top(scoring, wanted, terms, fetch, admit)]


doc = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(doc, min_size=1, max_size=40),
    query=st.dictionaries(
        st.sampled_from(WORDS), st.sampled_from([0.3, 0.5, 1.0, 2.0]), min_size=1
    ),
    wanted=st.integers(1, 8),
    hidden=st.sets(st.integers(1, 40), max_size=30),
    k1=st.sampled_from([0.5, 1.2, 2.0]),
    b=st.sampled_from([0.0, 0.75, 1.0]),
    blind=st.booleans(),
    boosts=st.sets(st.sampled_from(WORDS), max_size=3),
)
def test_the_pruned_top_n_is_the_brute_force_one(
    docs: list[str],
    query: dict[str, float],
    wanted: int,
    hidden: set[int],
    k1: float,
    b: float,
    blind: bool,
    boosts: set[str],
) -> None:
    postings, stats = index(docs)
    scoring = Scoring.of(query, stats, k1, b, boosts)
    read: Counter[str] = Counter()
    found = run(scoring, docs, postings, hidden, wanted, read, blind=blind)
    assert found == brute(scoring, docs, hidden, wanted)
    assert set(read) <= set(query), "only the query's terms are read"


def test_a_boost_lifts_the_chunks_found_and_finds_none() -> None:
    """A word that only shapes the question ("name") orders the chunks holding the
    question's words and brings in none of its own, however few those are."""
    docs = ["cat oak"] * 3 + ["cat name"] + ["name bench"] * 5
    postings, stats = index(docs)
    scoring = Scoring.of({"cat": 1.0, "name": 0.5}, stats, 1.2, 0.75, {"name"})
    assert run(scoring, docs, postings, set(), 8) == [4, 1, 2, 3]
    assert (
        run(Scoring.of({"name": 0.5}, stats, 1.2, 0.75, {"name"}), docs, postings, set(), 8) == []
    )


def test_a_common_term_that_cannot_matter_is_never_read() -> None:
    """MaxScore: once the top N holding the rare term scores above all a common term can
    add, the common term's postings are skipped, and the result is still exact."""
    docs = ["kayak oak"] * 3 + ["kayak"] * 3 + ["tea cat"] * 200
    postings, stats = index(docs)
    scoring = Scoring.of({"kayak": 1.0, "tea": 1.0}, stats, 1.2, 0.75)
    read: Counter[str] = Counter()
    found = run(scoring, docs, postings, set(), 2, read)
    assert found == brute(scoring, docs, set(), 2)
    assert read == {"kayak": 1}


def test_a_common_term_that_may_matter_is_read() -> None:
    """Two common words together outscore the rare one alone ("喜欢 认为 女儿" where the
    best chunks hold the first two): both are read, and the chunks holding only them are
    the top N."""
    docs = ["女儿 cat"] * 250 + ["喜欢 oak"] * 400 + ["认为 oak"] * 400 + ["喜欢 认为"] * 3
    postings, stats = index(docs)
    scoring = Scoring.of({"喜欢": 1.0, "认为": 1.0, "女儿": 1.0}, stats, 1.2, 0.75)
    read: Counter[str] = Counter()
    found = run(scoring, docs, postings, set(), 3, read)
    assert found == brute(scoring, docs, set(), 3) == [1051, 1052, 1053]
    assert set(read) == {"喜欢", "认为", "女儿"}
