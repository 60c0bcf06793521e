"""Duplicates and sessions: the best `limit` candidates, a near-copy of one taken (and
what it lent its neighbours) left out, and a session's later turns weighed
`session_repeat` when the question gathers several moments (`rerank.diversify`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from memory_core.recall.index.rerank import Candidate, context_score, diversify
from memory_core.recall.index.steps.exchange import exchange_tokens
from memory_core.recall.index.steps.run import Measure, RankRun, Step, shown_window


def without_copies(
    pool: Mapping[int, Candidate],
    weights: Sequence[float],
    window_scorer: Callable[[str], float] | None,
    copy: Candidate,
    gone: set[int],
) -> list[Candidate]:
    """Rescore the neighbours of a dropped near-copy without what the copies in `gone`
    lent them (their words in the exchange, a question's score handed to its reply); a
    score only goes down. Returns the candidates rescored."""
    out: list[Candidate] = []
    for distance, other in copy.neighbours:
        n = pool[other]
        if distance > len(weights) or n.id in gone:
            continue
        if window_scorer is not None and n.exchange is not None:
            lost = n.exchange - window_scorer(exchange_tokens(n, pool, len(weights), gone))
            context = n.base - n.unit * lost
        else:
            context = context_score(n, pool, weights, gone)
        if n.lent is not None and n.lent[0] not in gone:
            context = max(context, n.lent[1])
        score = context * n.factor
        if score < n.score:
            n.score = score
            out.append(n)
    return out


def _duplicates(run: RankRun) -> None:
    settings = run.settings
    run.weighed.sort(key=lambda c: (-c.score, c.id))
    run.chosen = diversify(
        run.weighed,
        run.limit,
        settings.duplicate_similarity,
        shown=shown_window,
        dropped=partial(without_copies, run.pool, settings.context_weights, run.window_scorer),
        repeat=settings.session_repeat if run.ranking.several else 1.0,
    )


DUPLICATES = Step(
    "duplicates", _duplicates, ("duplicate_similarity", "session_repeat"), Measure.SCORE
)
