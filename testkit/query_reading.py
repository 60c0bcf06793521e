"""Whether the product reads a query as a question or as the plain words a BM25 baseline
scores: what bench/recall_bench.py splits its recall@5 by (docs/decisions/0011)."""

from __future__ import annotations

from datetime import date

from memory_core.base.text import tokenize
from memory_core.recall.query import as_query


def read_otherwise(query: str, today: date) -> bool:
    """Whether the product reads `query` otherwise than as its plain words: it drops words
    that only shape a question ("name", "time", "谁", "说"), weighs the words naming a
    time at 0.3 and lifts that time's chunks, or lifts the chunks holding the kind of
    answer asked for ("是谁说的": a name). Each was measured on real conversations
    (docs/decisions/0007)."""
    plan = as_query(query, today)
    plain = dict.fromkeys(tokenize(query), 1.0)
    return plan.terms != plain or plan.window is not None or plan.answer is not None
