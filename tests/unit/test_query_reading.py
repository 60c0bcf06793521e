"""How the product reads a query, as bench/recall_bench.py splits its recall@5 by
(testkit/query_reading.py, docs/decisions/0011): a question is read, a list of words is
taken as it is, which is what makes the bench's "same words" search the baseline's input."""

from __future__ import annotations

from datetime import date

import pytest

from memory_core.base.text import tokenize
from memory_core.recall.query import as_query
from testkit.query_reading import read_otherwise
from testkit.recall_agreement import Baseline, Quality

TODAY = date(2026, 11, 29)


@pytest.mark.parametrize(
    "query",
    [
        "name Jake",  # a word that only shapes a question is dropped
        "妖气 道义 上周",  # a time word weighs 0.3 and names a window
        "868是谁说的",  # "who said it?" wants a name
        "关于Isaac time的记录",
    ],
)
def test_a_query_the_product_reads_as_a_question(query: str) -> None:
    assert read_otherwise(query, TODAY)


@pytest.mark.parametrize("query", ["redis use", "header 朋友 src", "Non values house"])
def test_plain_words_are_read_as_they_are(query: str) -> None:
    assert not read_otherwise(query, TODAY)


@pytest.mark.parametrize("query", ["name Jake", "妖气 道义 上周", "868是谁说的"])
def test_a_list_of_words_keeps_every_word_at_full_weight(query: str) -> None:
    """The bench's same-words search: what the baseline scores, no window, no answer."""
    plan = as_query([query], TODAY)
    assert plan.terms == dict.fromkeys(tokenize(query), 1.0)
    assert plan.window is None and plan.answer is None


def test_the_agreement_counts_each_way_of_asking_apart() -> None:
    """A question the product reads otherwise counts in its own tally: the bench's
    "read as a question" column is where the two recalls part."""
    texts = ["jake likes tea", "jake can't stand name tags", "tea tags"]
    quality = Quality()
    # As asked the source sentence (1) is missed; with the same words and by BM25 found.
    quality.add(texts, 1, ([0, 2], [1, 0], [1, 0]), None, True)
    quality.add(texts, 2, ([2], [2], [2]), None, False)
    assert (quality.recall_ours, quality.recall_same_words, quality.recall_base) == (1, 2, 2)
    assert (quality.questions, quality.question_ours, quality.question_base) == (1, 0, 1)


def test_the_baseline_ranks_by_plain_bm25_over_the_same_terms() -> None:
    docs = ["jake can't stand name tags", "jake likes tea", "tea and cake", "name the cat"]
    baseline = Baseline([tokenize(d) for d in docs])
    top, scores = baseline.top("name Jake")
    assert top[0] == 0  # the one holding both words
    assert set(top) == {0, 1, 3} and scores is not None
