"""The dense half of a search beyond the nearest chunks: Rocchio's feedback (the query's
vector moved toward the best BM25 hits' vectors) and every candidate's cosine with the
best of a turn's two windows (`rerank.window_max`). Both are `[recall]` options measured
in bench/recall_quality.py; a vector failure leaves the ranking by words."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence
from typing import Any

from memory_core.base.errors import ChatmemError
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate, window_max
from memory_core.storage.interfaces import VectorSearch

log = logging.getLogger(__name__)


async def moved_query(
    vectors: VectorSearch,
    sid: int,
    query: Any,
    pool: dict[int, Candidate],
    best: int,
    weight: float,
) -> Any | None:
    """The query's vector moved toward the vectors of the `best` conversation turns BM25
    found, or None when there are none or the vectors failed. Turns only: a turn's vector
    mixes its words with small talk, and the turns the words found lend the query their
    talk; long-term entries are clean statements whose own vectors already match by
    meaning (moved toward entries, MADial-Bench lost 2.4 / 0.5 points of frac@5)."""
    hits = heapq.nlargest(
        best,
        (c for c in pool.values() if c.lexical > 0 and c.kind in CONVERSATION_KINDS),
        key=lambda c: c.lexical,
    )
    if not hits:
        return None
    try:
        return await vectors.moved_toward(sid, query, [c.id for c in hits], weight)
    except ChatmemError as exc:
        log.warning("dense feedback unavailable: %s", exc)
        return None


async def nearest(
    vectors: VectorSearch,
    sid: int,
    query: Any,
    wanted: int,
    kinds: Sequence[str] | None,
    exclude_paths: Sequence[str],
) -> dict[int, float]:
    """Chunk id → cosine of the chunks nearest to an embedded query; {} on failure."""
    try:
        found = await vectors.search(sid, query, wanted, kinds=kinds, exclude_paths=exclude_paths)
    except ChatmemError as exc:
        log.warning("dense recall unavailable, ranking by words alone: %s", exc)
        return {}
    return dict(found)


async def compare_all(
    vectors: VectorSearch, sid: int, query: Any, pool: dict[int, Candidate]
) -> None:
    """Every candidate's cosine (not only the nearest chunks'), then each turn's best of
    its two windows."""
    try:
        sims = await vectors.similarities(sid, query, list(pool))
    except ChatmemError as exc:
        log.warning("dense recall unavailable for the window maximum: %s", exc)
        return
    for chunk_id, c in pool.items():
        c.dense = sims.get(chunk_id, c.dense)
    window_max(pool)
