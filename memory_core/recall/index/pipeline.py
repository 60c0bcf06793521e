"""One query's ranking, from candidate rows to hits: pure, the same for every backend.

The storage backend supplies rows (lexical candidates, time-window candidates, vector
hits read back through the scope, and the neighbours of the best conversation turns);
this module scores them with `rerank`'s steps. Keeping it free of I/O is what lets the
rules be tested on hand-made rows and shared by a second backend.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from datetime import date, tzinfo
from functools import partial
from typing import Any

from memory_core.base.answer_kind import AnswerKind, holds_answer
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import parse_when
from memory_core.base.records import Hit
from memory_core.base.speaker_label import is_claim_text
from memory_core.base.text import tokenize
from memory_core.base.turn_dates import decode_days
from memory_core.longterm.claims import CLAIM_FACTOR
from memory_core.recall.index.ranking import K1, B, CorpusStats, bm25_scorer, ideal_score, idf
from memory_core.recall.index.rerank import (
    CONVERSATION_KINDS,
    Candidate,
    RankSettings,
    asks,
    confidence,
    context_score,
    diversify,
    entries_over_turns,
    fuse,
    prior_factor,
    spread_context,
    time_factor,
)

MAX_TERMS = 16
"""Most informative query terms a search ranks with (weight × idf in the scope)."""
EMPTY_STATS = CorpusStats(docs=1, avg_len=1.0, doc_freq={})
ANCHORS = 50
"""Conversation turns, best first, whose neighbours are read for the context window
(public conversations, frac@5 of automatic recall: 30 anchors 0.679, 50 0.685)."""
PRIOR_REACH = 3
"""Candidates per result slot that time and priors are weighed for (see `rank`)."""
HEADING_FACTOR = 0.2
"""A chunk that is only a heading ("# 2026-03-02 conversation") is found, but never above
a turn that matches as well: it holds no answer."""
RARE_HOLDERS = 3
"""A question's own term held by at most this many chunks of the scope names them: its
holders keep a place in the results (see `rare_holders`)."""
DENSE_FLOOR = 0.25
DENSE_FULL = 0.7
"""Cosine at which a vector hit is no evidence at all, and at which it is sure."""


@dataclass(slots=True)
class Ranking:
    """What a backend needs of the query to score its rows."""

    terms: Mapping[str, float]
    stats: CorpusStats
    window: tuple[date, date] | None
    today: date
    zone: tzinfo
    settings: RankSettings
    k1: float = K1
    b: float = B
    answer: AnswerKind | None = None
    speaker_terms: frozenset[str] = frozenset()
    """Query terms naming a speaker of the candidate turns (see `names_as_speakers`)."""
    several: bool = False
    """The question gathers its answer from several moments: a session's later hits rank
    lower (`settings.session_repeat`, see `rerank.diversify`)."""


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


def _text_terms(ranking: Ranking) -> Mapping[str, float]:
    names = ranking.speaker_terms
    if not names:
        return ranking.terms
    return {t: w for t, w in ranking.terms.items() if t not in names}


def names_as_speakers(candidates: Sequence[Candidate], ranking: Ranking) -> None:
    """A query word naming who spoke a turn is scored as that turn's speaker, not as a
    word of turns: in a conversation between Joanna and Nate each says the other's name
    in greetings and thanks ("Thanks, Nate!"), so "What does Nate like?" matched Joanna's
    thanks as well as Nate's own words. A turn's speaker field then counts the name's
    full idf (`speaker_weight`); long-term entries and notes keep names as words.
    Sets `ranking.speaker_terms` and rescores the turns when a name is asked about."""
    spoken: set[str] = set()
    for c in candidates:
        if c.kind in CONVERSATION_KINDS and c.speaker:
            spoken.update(tokenize(c.speaker))
    names = frozenset(t for t in ranking.terms if t in spoken)
    if not names:
        return
    ranking.speaker_terms = names
    text = bm25_scorer(_text_terms(ranking), ranking.stats, ranking.k1, ranking.b)
    for c in candidates:
        if c.kind in CONVERSATION_KINDS:
            c.lexical = text(c.tokens) + speaker_score(ranking, c)


def speaker_score(ranking: Ranking, c: Candidate) -> float:
    """The speaker field: a query word naming who spoke counts `speaker_weight` of its
    idf, apart from the text (a name in every turn of a person says little as text)."""
    weight = ranking.settings.speaker_weight
    speaker = c.speaker
    if not speaker or weight <= 0:
        return 0.0
    stats = ranking.stats
    total = 0.0
    for term in set(tokenize(speaker)):
        w = ranking.terms.get(term)
        if w:
            total += weight * w * idf(stats.docs, stats.doc_freq.get(term, 1))
    return total


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
) -> list[Hit]:
    """Names asked about as speakers, turns with their exchange, fuse, spread over the
    context window, hand questions' ranks to their replies, weigh time and priors, put
    entries before the turns that say what they say, diversify (docs/recall.md,
    "Ranking"; docs/decisions/0007-ranking-steps.md has each step's figures)."""
    settings = ranking.settings
    if not pool:
        return []
    candidates = list(pool.values())
    if settings.speaker_names:
        names_as_speakers(candidates, ranking)
    window_scorer = exchange_scorer(ranking) if settings.exchange_documents else None
    reach = len(settings.context_weights)
    if window_scorer is not None and reach:
        # Every turn, a lone one too: many people's separate messages pooled in one scope
        # lost to turns of conversations, which alone had their exchange's score added.
        for c in candidates:
            if c.kind in CONVERSATION_KINDS:
                c.exchange = window_scorer(exchange_tokens(c, pool, reach))
    fuse(candidates, settings)
    if _dated_only(ranking):
        for c in candidates:
            c.base = 1.0
    spread_context(pool, settings.context_weights)
    if settings.reply_anchors:
        hand_to_replies(
            pool,
            bm25_scorer(ranking.terms, ranking.stats, ranking.k1, ranking.b),
            ranking.speaker_terms,
        )
    weights = settings.context_weights
    dated_only = _dated_only(ranking)
    evidence: dict[int, float] = {}
    kept: list[Candidate] = []
    for c in candidates:
        lexical = c.lexical
        for d, o in c.neighbours:
            if d <= len(weights):
                lexical += weights[d - 1] * pool[o].lexical
        likely = _dense_confidence(c.dense) > 0.0
        if not (likely or dated_only) and (lexical < min_score or lexical <= 0):
            continue
        evidence[c.id] = lexical
        kept.append(c)
    # Time and priors move a score by a bounded factor (at most ~1.4 without a time in the
    # question), so only the best candidates, and those inside a named time, can still
    # reach the top `limit`: the rest are not weighed.
    kept.sort(key=lambda c: (-c.score, c.id))
    named = rare_holders(kept, ranking, limit)
    weighed: list[Candidate] = []
    for rank_, c in enumerate(kept):
        timely = time_factor(c.created_at, ranking.window, ranking.zone, settings, c.dates)
        if rank_ >= limit * PRIOR_REACH + 10 and timely <= 1 and c.id not in named:
            continue
        c.factor = timely * prior_factor(
            c.kind, c.created_at, ranking.today, ranking.zone, settings
        )
        if c.kind is ChunkKind.LONG_TERM and is_claim_text(c.text):
            c.factor *= CLAIM_FACTOR  # another member's word ranks below the member's
        if asks(c):
            c.factor *= settings.question_factor
        if ranking.speaker_terms and not speaks(c, ranking.speaker_terms):
            c.factor *= settings.other_speaker_factor
        if _heading_only(c.text):
            c.factor *= HEADING_FACTOR
        elif ranking.answer is not None and holds_answer(
            ranking.answer, c.body, dated=bool(c.dates)
        ):
            c.factor *= 1.0 + settings.answer_boost
        c.score *= c.factor
        weighed.append(c)
    entries_over_turns(weighed, settings.duplicate_similarity)
    weighed.sort(key=lambda c: (-c.score, c.id))
    chosen = diversify(
        weighed,
        limit,
        settings.duplicate_similarity,
        shown=_window,
        dropped=partial(_without_copies, pool, weights, window_scorer),
        repeat=settings.session_repeat if ranking.several else 1.0,
    )
    chosen = with_named(chosen, [c for c in weighed if c.id in named], limit)
    ideal = ideal_score(ranking.terms, ranking.stats, ranking.k1, ranking.b)
    return [
        _hit(c, pool, max(confidence(evidence[c.id], ideal), _dense_confidence(c.dense)))
        for c in chosen
    ]


_SENTENCE = re.compile(r"[^.!?。！？\n]*[.!?。！？\n]*")
QUESTION_KEEPS = 0.8
"""Share of its score a question keeps once its reply took it (a question can also hold
what was asked about; below 0.7 and above 0.9 measured the same or worse)."""


def asked_part(body: str) -> str:
    """The sentences of a turn that ask something (end with a question mark)."""
    if "?" not in body and "？" not in body:
        return ""
    return " ".join(s for s in _SENTENCE.findall(body) if s.rstrip().endswith(("?", "？")))


def reply_to(c: Candidate, pool: Mapping[int, Candidate]) -> Candidate | None:
    """The turn right after `c` in its conversation, said by someone else."""
    for distance, other in c.neighbours:
        o = pool[other]
        if distance == 1 and o.line_from > c.line_from and o.speaker != c.speaker:
            return o
    return None


def hand_to_replies(
    pool: Mapping[int, Candidate],
    text_score: Callable[[str], float],
    named: frozenset[str] = frozenset(),
) -> None:
    """A question and its reply form one exchange, and the hit belongs to the reply.

    "What kind of counseling do you want to pursue?" shares the query's words; the answer
    is the other speaker's next turn, which often shares none. When the asking sentences
    of a turn hold at least half its words' score, its reply takes the turn's score (if
    higher than its own) and the question keeps `QUESTION_KEEPS` of it; a turn that
    states something and ends with "how about you?" keeps its rank. Only turns whose
    neighbours were read (the best ones) can hand on.

    A question asked by the person the query names (`named`, see `names_as_speakers`)
    keeps its rank when someone else replies: "Which language is Tim learning?" wants
    Tim's "I'm learning German now - do you know any other languages?", not John's
    answer about his Spanish (public conversations, frac@5 0.686 → 0.689)."""
    moves: list[tuple[Candidate, Candidate]] = []
    for c in pool.values():
        if c.kind not in CONVERSATION_KINDS or c.lexical <= 0 or not c.neighbours:
            continue
        asked = asked_part(c.body)
        if not asked:
            continue
        reply = reply_to(c, pool)
        if reply is None or reply.score >= c.score:
            continue
        if named and _names(c, named) and not _names(reply, named):
            continue
        if text_score(" ".join(tokenize(asked))) < 0.5 * text_score(c.tokens):
            continue
        moves.append((reply, c))
    for reply, question in moves:
        if question.score > reply.score:
            reply.score = question.score
            reply.lent = (question.id, question.score)
    for _, question in moves:
        question.score *= QUESTION_KEEPS


def speaks(c: Candidate, named: frozenset[str]) -> bool:
    """Whether a conversation turn is said by someone the question names; what is no turn
    (an entry, a note) is not weighed by who said it.

    97 % of the evidence of public conversations' questions naming one person is that
    person's own words, but 15 % of the top 5 was the other's turns (their exchange held
    the named person's words): weighing those × 0.7 raised frac@5 0.714 → 0.719 (words
    alone) and 0.720 → 0.732 (with vectors)."""
    return c.kind not in CONVERSATION_KINDS or _names(c, named)


def _names(c: Candidate, named: frozenset[str]) -> bool:
    """Whether the turn's speaker is one the query names."""
    speaker = c.speaker
    return speaker is not None and not named.isdisjoint(tokenize(speaker))


def _without_copies(
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
    shown = set().union(*(_window(c) for c in chosen))
    missing = [c for c in named if c.id not in shown]
    if not missing:
        return chosen
    ids = {c.id for c in named}
    others = [c.id for c in chosen if c.id not in ids]
    room = max(limit - len(chosen) + len(others) - len(missing), 0)
    ids.update(others[:room])
    kept = [c for c in chosen if c.id in ids]
    return sorted([*kept, *missing], key=lambda c: (-c.score, c.id))


def _window(c: Candidate) -> set[int]:
    """The chunks a hit shows: itself and its nearest neighbours."""
    return {c.id, *(o for d, o in c.neighbours if d == 1)}


def _heading_only(text: str) -> bool:
    if not text.lstrip().startswith("#"):
        return False
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(line.lstrip().startswith("#") for line in lines)


def _dated_only(ranking: Ranking) -> bool:
    """A question made of a time alone ranks the turns of that time by date."""
    return not ranking.terms and ranking.window is not None


def _dense_confidence(similarity: float | None) -> float:
    if similarity is None:
        return 0.0
    return min(max((similarity - DENSE_FLOOR) / (DENSE_FULL - DENSE_FLOOR), 0.0), 1.0)


def _hit(c: Candidate, pool: Mapping[int, Candidate], sure: float) -> Hit:
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
    )
