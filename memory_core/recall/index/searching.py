"""One search of one scope of the index, from a `SearchRequest` to ranked hits.

The exact BM25 top N over every query term are the lexical candidates (pruned by
MaxScore: `topk.py`), the vector index adds its nearest chunks, a time the question
names adds that time's chunks; all are scored by `pipeline.rank` with the best turns'
neighbours. `SearchIndex.search` finds the scope and the day and hands over here; this
module owns the order of the reads (words on the database thread while the query is
embedded, then the vectors' hits and the neighbours) and nothing else: the SQL lives in
`search.py`, the scoring in `pipeline.py`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import date, tzinfo
from typing import Any

import memory_core.recall.index.dense as dense_extra
import memory_core.recall.index.feedback as feedback
import memory_core.recall.index.search as reads
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import format_when
from memory_core.base.sql import Connection, Db
from memory_core.base.when import day_bounds
from memory_core.recall.index.model import Hit
from memory_core.recall.index.pipeline import (
    EMPTY_STATS,
    MAX_TERMS,
    Ranking,
    add_neighbours,
    anchors,
    collect,
    rank,
)
from memory_core.recall.index.ranking import CANDIDATE_FACTOR, MIN_CANDIDATES, select_terms
from memory_core.recall.index.rerank import Candidate, RankSettings
from memory_core.recall.index.topk import Scoring
from memory_core.recall.query import Query
from memory_core.recall.request import SearchRequest
from memory_core.storage.interfaces import VectorSearch

Pool = tuple[dict[int, Candidate], Ranking]
"""The candidates read so far, and the ranking that scores them."""


@dataclass(frozen=True, slots=True)
class Searcher:
    """What a search of the index ranks with: the index's settings as they are now."""

    db: Db
    zone: tzinfo
    k1: float
    b: float
    settings: RankSettings
    vectors: VectorSearch | None

    async def search(self, sid: int, request: SearchRequest, plan: Query, day: date) -> list[Hit]:
        """`request`'s hits in scope `sid`, best first; `plan` is its query as read on `day`."""
        wanted = max(request.limit * CANDIDATE_FACTOR, MIN_CANDIDATES)
        work = _Reads.of(self, sid, request, plan, day, wanted)
        if self.vectors is None:
            pool, ranking = await self.db.read(work.words_and_neighbours)
        else:
            pool, ranking = await self._hybrid(work, self.vectors, plan)
        return rank(pool, ranking, limit=request.limit, min_score=request.min_score)

    async def _hybrid(self, work: _Reads, vectors: VectorSearch, plan: Query) -> Pool:
        """The query's embedding and vector search run while the database thread reads
        the lexical candidates: the two halves of the hybrid cost the slower one."""
        settings = self.settings
        sid, wanted = work.sid, work.wanted
        dense_task = asyncio.create_task(
            # With feedback the nearest chunks are searched once the BM25 hits are known.
            dense_extra.embed_and_search(
                vectors,
                sid,
                plan.text,
                0 if settings.dense_feedback > 0 else wanted,
                work.kind_list,
                work.exclude_paths,
            )
        )
        try:
            pool, ranking = await self.db.read(work.lexical)
        finally:
            query_vector, dense = await dense_task
        if query_vector is not None and settings.dense_feedback > 0:
            moved = await dense_extra.moved_query(
                vectors,
                sid,
                query_vector,
                pool,
                settings.dense_feedback,
                settings.dense_feedback_weight,
            )
            query_vector = query_vector if moved is None else moved
            dense = await dense_extra.nearest(
                vectors, sid, query_vector, wanted, work.kind_list, work.exclude_paths
            )
        await self.db.read(lambda conn: work.widen(conn, pool, ranking, dense))
        if query_vector is not None and settings.turn_window_max:
            await dense_extra.compare_all(vectors, sid, query_vector, pool)
        return pool, ranking


@dataclass(frozen=True, slots=True)
class _Reads:
    """The reads of one search, each one call on the database thread."""

    searcher: Searcher
    sid: int
    plan: Query
    day: date
    wanted: int
    kind_list: list[str] | None
    exclude_paths: tuple[str, ...]
    window: reads.Window | None
    filters: list[str] = field(default_factory=list)
    params: list[object] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        searcher: Searcher,
        sid: int,
        request: SearchRequest,
        plan: Query,
        day: date,
        wanted: int,
    ) -> _Reads:
        kinds = request.kinds
        kind_list = [ChunkKind(k).value for k in kinds] if kinds is not None else None
        window: reads.Window | None = None
        if plan.window is not None:
            since_at, until_at = day_bounds(*plan.window, searcher.zone)
            window = reads.Window(format_when(since_at), format_when(until_at), *plan.window)
        made = cls(
            searcher, sid, plan, day, wanted, kind_list, tuple(request.exclude_paths), window
        )
        made._filter(request)
        return made

    def _filter(self, request: SearchRequest) -> None:
        """The request's hard filters as SQL conditions on the chunk `c`."""
        filters, params = self.filters, self.params
        if self.kind_list is not None:
            filters.append(f"c.kind IN ({','.join('?' * len(self.kind_list))})")
            params.extend(self.kind_list)
        if request.since is not None:
            filters.append("c.created_at >= ?")
            params.append(format_when(request.since))
        if request.until is not None:
            filters.append("c.created_at < ?")
            params.append(format_when(request.until))
        if self.exclude_paths:
            filters.append(f"c.path NOT IN ({','.join('?' * len(self.exclude_paths))})")
            params.extend(self.exclude_paths)

    def words_and_neighbours(self, conn: Connection) -> Pool:
        """Words alone: every read of the query in one call."""
        pool, ranking = self.lexical(conn)
        self.widen(conn, pool, ranking, {})
        return pool, ranking

    def lexical(self, conn: Connection) -> Pool:
        """The BM25 candidates (and those of the time the question names)."""
        searcher, sid, plan, window = self.searcher, self.sid, self.plan, self.window
        settings, k1, b = searcher.settings, searcher.k1, searcher.b
        filters, params, wanted = self.filters, self.params, self.wanted
        stats = reads.corpus_stats(conn, sid, set(plan.terms)) if plan.terms else EMPTY_STATS
        terms = select_terms(plan.terms, stats, MAX_TERMS, plan.shaping)
        ranking = Ranking(
            terms,
            stats,
            plan.window,
            self.day,
            searcher.zone,
            settings,
            k1,
            b,
            answer=plan.answer,
            several=plan.several,
        )
        rows: list[Any] = []
        if terms:
            scoring = Scoring.of(terms, stats, k1, b, plan.shaping)
            # The read within the time finds the first's postings in the connection's
            # cache (`postings_cache.py`).
            rows += reads.candidates(conn, sid, scoring, filters, params, wanted)
            if window is not None:
                named, bounds = window.filter()
                within = [*filters, named]
                rows += reads.candidates(conn, sid, scoring, within, [*params, *bounds], wanted)
        elif window is not None and not terms:
            rows += reads.dated(conn, sid, filters, params, window, wanted)
        pool = collect(rows, {}, ranking)
        if settings.lexical_feedback > 0 and terms:
            return feedback.expand(
                conn,
                sid,
                rows,
                pool,
                ranking,
                settings.lexical_feedback,
                lambda words, stats: reads.candidates(
                    conn,
                    sid,
                    Scoring.of(dict.fromkeys(words, 1.0), stats, k1, b),
                    filters,
                    params,
                    wanted,
                ),
            )
        return pool, ranking

    def widen(
        self,
        conn: Connection,
        pool: dict[int, Candidate],
        ranking: Ranking,
        dense: dict[int, float],
    ) -> None:
        """Vector hits read back through the scope, then the best turns' neighbours."""
        sid = self.sid
        for chunk_id, similarity in dense.items():
            if chunk_id in pool:
                pool[chunk_id].dense = similarity
        missing = [i for i in dense if i not in pool]
        for chunk_id, c in collect(
            reads.by_ids(conn, sid, missing, self.filters, self.params), dense, ranking
        ).items():
            pool[chunk_id] = c
        reach = len(self.searcher.settings.context_weights)
        if reach:
            found = reads.neighbours(conn, sid, anchors(pool), reach)
            add_neighbours(pool, found, dense, ranking)
