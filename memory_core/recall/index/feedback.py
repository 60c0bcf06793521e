"""Pseudo-relevance feedback by rare words: the best BM25 hits' rarest other words join
the query at a small weight, so a turn saying the answer in the hits' words ("art",
"photography") is found though it shares none of the question's.

An earlier RM3-like variant (the hits' most frequent words) drifted to the talk around an
answer (docs/decisions/0008-ranking-variants-tried.md); this one takes only words rare in the
scope (high idf) that at least two documents hold, so a word of one hit alone, which can
only lift that hit, never joins.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import memory_core.recall.index.search as reads
from memory_core.base.sql import Connection
from memory_core.recall.index.pipeline import Ranking, collect
from memory_core.recall.index.ranking import CorpusStats, idf
from memory_core.recall.index.rerank import Candidate

FEEDBACK_WEIGHT = 0.3
"""A feedback word's weight beside a query word's 1.0."""
MAX_SHARE = 0.02
"""A feedback word is held by at most this share of the scope's chunks (rare)."""
BEST = 3
"""How many of the best BM25 hits give their words."""


def hit_words(best: Iterable[str], query_terms: Mapping[str, float]) -> set[str]:
    """The words of the best hits (their token strings) that the query does not have."""
    out: set[str] = set()
    for tokens in best:
        out.update(t for t in tokens.split() if t not in query_terms)
    return out


def feedback_terms(
    best: Sequence[str], query_terms: Mapping[str, float], stats: CorpusStats, count: int
) -> dict[str, float]:
    """Up to `count` rare words of the best hits' token strings, rarest first, at
    `FEEDBACK_WEIGHT`: held by 2 or more chunks and at most `MAX_SHARE` of the scope."""
    seen: Counter[str] = Counter()
    for tokens in best:
        seen.update({t for t in tokens.split() if t not in query_terms})
    limit = max(2, int(stats.docs * MAX_SHARE))
    rare = [t for t in seen if 2 <= stats.doc_freq.get(t, 0) <= limit and len(t) > 1]
    rare.sort(key=lambda t: (-idf(stats.docs, stats.doc_freq[t]), t))
    return {t: FEEDBACK_WEIGHT for t in rare[: max(count, 0)]}


def expand(
    conn: Connection,
    sid: int,
    rows: list[Any],
    pool: dict[int, Candidate],
    ranking: Ranking,
    count: int,
    fetch: Callable[[list[str], CorpusStats], list[Any]],
) -> tuple[dict[int, Candidate], Ranking]:
    """The pool and ranking with up to `count` feedback words of the best 3 hits added
    (their chunks read by `fetch(terms, stats)`), on the database thread; unchanged when
    no word qualifies."""
    best = [c.tokens for c in heapq.nlargest(BEST, pool.values(), key=lambda c: c.lexical)]
    words = hit_words(best, ranking.terms)
    if not words:
        return pool, ranking
    found = reads.corpus_stats(conn, sid, words)
    extra = feedback_terms(best, ranking.terms, found, count)
    if not extra:
        return pool, ranking
    stats = CorpusStats(
        ranking.stats.docs, ranking.stats.avg_len, {**ranking.stats.doc_freq, **found.doc_freq}
    )
    wider = replace(ranking, terms={**ranking.terms, **extra}, stats=stats)
    return collect([*rows, *fetch(list(extra), stats)], {}, wider), wider
