"""Exchange documents: a conversation turn is scored as one document with the turns read
around it (BM25 of the exchange's words), so an answer ("5 years already!") is found by
its question's words one line above."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import replace

from memory_core.recall.index.ranking import bm25_scorer
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate
from memory_core.recall.index.steps.run import Measure, Ranking, RankRun, Step

EXCHANGE_TURNS = 5
"""An exchange document is a turn and its neighbours up to distance 2: its BM25 length
norm is that of this many average turns."""


def exchange_scorer(ranking: Ranking) -> Callable[[str], float]:
    """BM25 of an exchange as one document (a turn with its neighbours' words). Names
    stay words here: an exchange that says a person's name is about them (scored
    without them: 0.680 against 0.685 on public conversations)."""
    stats = replace(ranking.stats, avg_len=ranking.stats.avg_len * EXCHANGE_TURNS)
    return bm25_scorer(ranking.terms, stats, ranking.k1, ranking.b)


def exchange_tokens(
    c: Candidate, pool: Mapping[int, Candidate], reach: int, gone: Set[int] = frozenset()
) -> str:
    """The words of a turn and of its neighbours within `reach` (but those in `gone`)."""
    return " ".join(
        [c.tokens, *(pool[o].tokens for d, o in c.neighbours if d <= reach and o not in gone)]
    )


def _exchange(run: RankRun) -> None:
    settings = run.settings
    scorer = exchange_scorer(run.ranking) if settings.exchange_documents else None
    run.window_scorer = scorer
    reach = len(settings.context_weights)
    if scorer is not None and reach:
        # Every turn, a lone one too: many people's separate messages pooled in one scope
        # lost to turns of conversations, which alone had their exchange's score added.
        for c in run.candidates:
            if c.kind in CONVERSATION_KINDS:
                c.exchange = scorer(exchange_tokens(c, run.pool, reach))


EXCHANGE = Step("exchange", _exchange, ("exchange_documents", "context_weights"), Measure.WORDS)
