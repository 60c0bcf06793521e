"""The dense half of a search: the query embedded and searched, Rocchio's feedback (the
query's vector moved toward the best BM25 turns' vectors) and every candidate's cosine
with the best of a turn's two windows (`rerank.window_max`); the last two are `[recall]`
options measured in bench/recall_quality.py. A vector failure leaves the ranking by
words."""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Sequence
from typing import Any

from memory_core.base.errors import ChatmemError
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate, window_max
from memory_core.storage.interfaces import VectorSearch

log = logging.getLogger(__name__)

VECTOR_WAIT_SECONDS = 3.0
"""How long a search waits for the scope's vectors to cover what was written before it
(`VectorIndex.settle`). A bot's are current but for the message just stored (one model
call: milliseconds); a command that just started reads the scope first (about 1 s per
100 000 chunks) and makes what is missing (about 400 chunks/s with the local model). A
scope far behind (the vector extra just installed) is ranked with the vectors made so far
and said so, rather than holding every turn for minutes."""


async def embed_and_search(
    vectors: VectorSearch | None,
    sid: int,
    text: str,
    wanted: int,
    kinds: Sequence[str] | None,
    exclude_paths: Sequence[str],
) -> tuple[Any, dict[int, float]]:
    """The query's vector and chunk id → cosine of its `wanted` nearest chunks; (None, {})
    without an embedder or when it fails (the lexical ranking still answers). The query
    is embedded while the scope's vectors catch up with what was written (at most
    `VECTOR_WAIT_SECONDS`), so every process, a short-lived command too, ranks with the
    same vectors; a command's index does all this only in a scope that has vectors
    (`searches`)."""
    if vectors is None or not text.strip():
        return None, {}
    try:
        if not await vectors.searches(sid):
            return None, {}
        query, _ = await asyncio.gather(
            vectors.embed_query(text), vectors.settle(sid, VECTOR_WAIT_SECONDS)
        )
        found = await vectors.search(sid, query, wanted, kinds=kinds, exclude_paths=exclude_paths)
    except ChatmemError as exc:
        log.warning("dense recall unavailable, ranking by words alone: %s", exc)
        return None, {}
    return query, dict(found)


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
