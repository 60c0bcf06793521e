"""Exact terms: the holders of a question's rare term (an id, a made-up word, a code)
keep a place in the results (`RARE_TERMS` finds them, `EXACT_TERMS` puts back those the
other steps left out)."""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.recall.index.rerank import Candidate
from memory_core.recall.index.steps.run import Ranking, RankRun, Step, shown_window

RARE_HOLDERS = 3
"""A question's own term held by at most this many chunks of the scope names them: its
holders keep a place in the results (see `rare_holders`)."""


def rare_holders(candidates: Sequence[Candidate], ranking: Ranking, limit: int) -> set[int]:
    """Ids of the candidates holding a rare term of the question (one at most
    `RARE_HOLDERS` chunks of the scope hold), best lexical match first, for at most half
    the slots (rounded up).

    A term that rare is an exact name (an id, a made-up word, a code): the question asks
    for the chunks holding it. Their dense scores say nothing about that (a vector of
    "zq7x-4411" is noise), and fused with dense scores they can fall behind many chunks
    that merely read alike, or be dropped as near-copies of those. Words of the recent
    messages (weight below 1) name nothing and pin nothing."""
    doc_freq = ranking.stats.doc_freq
    rare = {
        term
        for term, weight in ranking.terms.items()
        if weight >= 1.0 and 0 < doc_freq.get(term, 0) <= RARE_HOLDERS
    }
    if not rare or limit <= 0:
        return set()
    holders = [c for c in candidates if not rare.isdisjoint(c.tokens.split())]
    holders.sort(key=lambda c: (-c.lexical, c.id))
    return {c.id for c in holders[: (limit + 1) // 2]}


def with_named(chosen: list[Candidate], named: Sequence[Candidate], limit: int) -> list[Candidate]:
    """`chosen` with every candidate of `named` that no chosen hit shows yet, in place of
    the weakest others; still best first and at most `limit` long."""
    shown = set().union(*(shown_window(c) for c in chosen))
    missing = [c for c in named if c.id not in shown]
    if not missing:
        return chosen
    ids = {c.id for c in named}
    others = [c.id for c in chosen if c.id not in ids]
    room = max(limit - len(chosen) + len(others) - len(missing), 0)
    ids.update(others[:room])
    kept = [c for c in chosen if c.id in ids]
    return sorted([*kept, *missing], key=lambda c: (-c.score, c.id))


def _rare_terms(run: RankRun) -> None:
    run.named = rare_holders(run.kept, run.ranking, run.limit)


def _exact_terms(run: RankRun) -> None:
    named = run.named
    run.chosen = with_named(run.chosen, [c for c in run.weighed if c.id in named], run.limit)


RARE_TERMS = Step("rare terms", _rare_terms)
EXACT_TERMS = Step("exact terms", _exact_terms)
