"""One query's ranking, from candidate rows to hits: pure, the same for every backend.

The storage backend supplies rows (lexical candidates, time-window candidates, vector
hits read back through the scope, and the neighbours of the best conversation turns);
this module makes them candidates and runs the named steps of `steps.RANK_STEPS` over
them. Keeping it free of I/O is what lets the rules be tested on hand-made rows and
shared by a second backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import memory_core.recall.index.steps as rank_steps
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import parse_when
from memory_core.base.records import Hit
from memory_core.base.turn_dates import decode_days
from memory_core.recall.index.ranking import CorpusStats, bm25_scorer, ideal_score
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate, confidence
from memory_core.recall.index.steps.answer import HEADING_FACTOR as HEADING_FACTOR
from memory_core.recall.index.steps.run import Ranking as Ranking
from memory_core.recall.index.steps.run import (
    RankRun,
    Step,
    Trace,
    dense_confidence,
    explain_asked,
    run_steps,
)
from memory_core.recall.index.steps.speakers import speaker_score as speaker_score
from memory_core.recall.index.steps.speakers import speaks as speaks

MAX_TERMS = 16
"""Most informative query terms a search ranks with (weight × idf in the scope)."""
EMPTY_STATS = CorpusStats(docs=1, avg_len=1.0, doc_freq={})
ANCHORS = 50
"""Conversation turns, best first, whose neighbours are read for the context window
(public conversations, frac@5 of automatic recall: 30 anchors 0.679, 50 0.685)."""


def to_candidate(row: Sequence[Any]) -> Candidate:
    """A row of `search.CANDIDATE_COLUMNS`."""
    return Candidate(
        id=int(row[0]),
        path=str(row[1]),
        line_from=int(row[2]),
        line_to=int(row[3]),
        tokens=str(row[4]),
        text=str(row[5]),
        kind=ChunkKind(row[6]),
        created_at=parse_when(row[7]) if row[7] else None,
        ref=row[8],
        dates=decode_days(row[9]),
    )


def lexical_scorer(ranking: Ranking) -> Callable[[Candidate], float]:
    """BM25 of the turn's own words plus its speaker field."""
    bm25 = bm25_scorer(ranking.terms, ranking.stats, ranking.k1, ranking.b)
    return lambda c: bm25(c.tokens) + speaker_score(ranking, c)


def collect(
    rows: Sequence[Sequence[Any]], dense: Mapping[int, float], ranking: Ranking
) -> dict[int, Candidate]:
    """Candidates by id, each scored once, whichever lists found it."""
    score = lexical_scorer(ranking)
    pool: dict[int, Candidate] = {}
    for row in rows:
        chunk_id = int(row[0])
        if chunk_id in pool:
            continue
        c = to_candidate(row)
        c.lexical = score(c)
        c.dense = dense.get(chunk_id)
        pool[chunk_id] = c
    return pool


def anchors(pool: Mapping[int, Candidate], count: int = ANCHORS) -> list[tuple[int, str, int]]:
    """(id, path, line) of the best conversation turns, to read their neighbours."""
    turns = [c for c in pool.values() if c.kind in CONVERSATION_KINDS]
    turns.sort(key=lambda c: -(c.lexical + (c.dense or 0.0)))
    return [(c.id, c.path, c.line_from) for c in turns[:count]]


def add_neighbours(
    pool: dict[int, Candidate],
    found: Sequence[tuple[int, int, Sequence[Any]]],
    dense: Mapping[int, float],
    ranking: Ranking,
) -> None:
    """Link each anchor and its neighbours both ways; neighbours join the pool."""
    score = lexical_scorer(ranking)
    for anchor, distance, row in found:
        chunk_id = int(row[0])
        other = pool.get(chunk_id)
        if other is None:
            other = to_candidate(row)
            other.lexical = score(other)
            other.dense = dense.get(chunk_id)
            pool[chunk_id] = other
        owner = pool[anchor]
        if (distance, chunk_id) not in owner.neighbours:
            owner.neighbours.append((distance, chunk_id))
        if (distance, anchor) not in other.neighbours:
            other.neighbours.append((distance, anchor))


def rank(
    pool: dict[int, Candidate],
    ranking: Ranking,
    *,
    limit: int,
    min_score: float = 0.0,
    steps: Sequence[Step] | None = None,
    explain: bool | None = None,
) -> list[Hit]:
    """The best `limit` hits of the pool: `steps` (default `steps.RANK_STEPS`, read at
    each call) run in order, each hit with its confidence. With `explain` (default: when
    the caller is inside `steps.explaining`), each hit carries what each step
    contributed to it (`Hit.steps`); docs/recall.md, "Ranking", has the steps."""
    if not pool:
        return []
    run = RankRun(pool, ranking, limit, min_score, candidates=list(pool.values()))
    if explain_asked() if explain is None else explain:
        run.trace = Trace()
    run_steps(run, rank_steps.RANK_STEPS if steps is None else steps)
    ideal = ideal_score(ranking.terms, ranking.stats, ranking.k1, ranking.b)
    return [
        _hit(
            c,
            pool,
            max(confidence(run.evidence[c.id], ideal), dense_confidence(c.dense)),
            run.trace,
        )
        for c in run.chosen
    ]


def _hit(c: Candidate, pool: Mapping[int, Candidate], sure: float, trace: Trace | None) -> Hit:
    """A conversation turn is returned with the turns next to it: the exchange, not the
    lone line ("5 years already!" means nothing without its question). The location then
    spans the exchange, so memory_get reads what the hit showed."""
    window = sorted([c, *(pool[o] for d, o in c.neighbours if d == 1)], key=lambda x: x.line_from)
    return Hit(
        path=c.path,
        line_from=window[0].line_from,
        line_to=window[-1].line_to,
        score=c.score,
        text="\n".join(x.text for x in window),
        kind=c.kind,
        created_at=c.created_at,
        ref=c.ref,
        confidence=sure,
        anchor=c.line_from,
        steps=trace.of(c) if trace is not None else (),
    )
