"""BM25 over pre-tokenized chunks: pure functions, the same for every storage backend.

*Why not FTS5's bm25() scores:* it clamps idf to 1e-6 once a term is in half the
documents, so in a scope of one or two memories nothing would ever pass a minimum score.
The candidates are the exact top N by this BM25 (`topk.py`); these functions score them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

K1 = 1.2
B = 0.75
"""BM25's defaults (`recall.k1`, `recall.b` override them)."""
CANDIDATE_FACTOR = 5
MIN_CANDIDATES = 50
"""Lexical candidates a search ranks: the exact BM25 top max(limit × factor, minimum)."""


@dataclass(frozen=True, slots=True)
class CorpusStats:
    docs: int
    avg_len: float
    doc_freq: dict[str, int]


def idf(docs: int, containing: int) -> float:
    """BM25 idf in the form that stays positive: log(1 + (N - n + 0.5) / (n + 0.5)).

    FTS5's own bm25() clamps the classic form to 1e-6 once a term is in half the
    documents, which in a scope of one or two memories means nothing ever scores.
    Counts outside 0 <= containing <= docs (statistics that lag their rows under
    concurrent writers) are taken at the nearest sane value.
    """
    docs = max(docs, 0)
    containing = min(max(containing, 0), docs)
    return math.log(1.0 + (docs - containing + 0.5) / (containing + 0.5))


def bm25_scorer(
    query_terms: Sequence[str] | Mapping[str, float],
    stats: CorpusStats,
    k1: float = K1,
    b: float = B,
) -> Callable[[str], float]:
    """BM25 (`recall.k1`, `recall.b`) of many documents for one query, each a stored
    `tokens` string: each term's idf is computed once per query instead of once per
    document, and term frequencies are counted for the query's terms only. With a
    mapping, each term's part is multiplied by its weight (a recent message's words
    count less). The one scorer of every path: index, file fallback, exchanges."""
    weighted = _weights(query_terms)
    weights = [(t, w * idf(stats.docs, stats.doc_freq.get(t, 1))) for t, w in weighted.items()]
    avg_len = stats.avg_len

    def score(tokens: str) -> float:
        doc = tokens.split()
        if not doc:
            return 0.0
        norm = k1 * (1.0 - b + b * len(doc) / avg_len)
        total = 0.0
        for term, weight in weights:
            tf = doc.count(term)
            if tf:
                total += weight * tf * (k1 + 1.0) / (tf + norm)
        return total

    return score


def _weights(query_terms: Sequence[str] | Mapping[str, float]) -> dict[str, float]:
    if isinstance(query_terms, Mapping):
        return dict(query_terms)
    return dict.fromkeys(query_terms, 1.0)


def ideal_score(
    query_terms: Mapping[str, float], stats: CorpusStats, k1: float = K1, b: float = B
) -> float:
    """What a document of average length holding each present query term once scores:
    the yardstick of a hit's confidence."""
    del b  # at average length the length norm is k1 whatever b is
    return sum(
        w * idf(stats.docs, stats.doc_freq[t]) * (k1 + 1.0) / (1.0 + k1)
        for t, w in query_terms.items()
        if stats.doc_freq.get(t)
    )


def select_terms(
    query_terms: Mapping[str, float],
    stats: CorpusStats,
    limit: int,
    shaping: AbstractSet[str] = frozenset(),
) -> dict[str, float]:
    """The `limit` most informative present terms (weight × idf), not the first ones:
    in a long message the question is rarely in its first words. None when only words
    that shape the question are left (`Query.shaping`): they find nothing alone."""
    present = [(t, w) for t, w in query_terms.items() if stats.doc_freq.get(t) and w > 0]
    present.sort(key=lambda tw: -tw[1] * idf(stats.docs, stats.doc_freq[tw[0]]))
    chosen = dict(present[: max(limit, 0)])
    return {} if chosen.keys() <= shaping else chosen
