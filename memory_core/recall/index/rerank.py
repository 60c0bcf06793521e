"""Pure: the ranking's candidates and the rules its named steps call
(recall/index/steps/ holds the steps and their order, `RANK_STEPS`).

Each step is here because a measured loss showed it was needed (docs/decisions/0007-
ranking-steps.md has the figures of each ablation):

* **Fusion** of BM25 and vector similarity, reciprocal-rank or weighted, so a turn that
  shares no word with the question can still be found by meaning.
* **Context window**: a turn is scored with its neighbours in the same conversation, so
  an answer ("5 years already!") is found by its question's words one line above.
* **Time**: a question that names a time ("in May", "上个月") lifts the turns of that time;
  it is a boost, not a filter, because people misremember dates.
* **Priors as scores, not tiers**: long-term entries and recent turns get a small lift,
  summaries a small cut; a better older hit still wins over a weaker recent one.
* **Entries before the talk about them**: a long-term entry ranks above every
  conversation turn that says what it says (holds its words), whatever the turn's
  neighbours added to it; the diversity step then leaves the turn out as its near-copy.
* **Diversity**: a near-copy of a hit already taken does not take a slot.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo

from memory_core.base.chunks import ChunkKind
from memory_core.base.speaker_label import label_words
from memory_core.recall.index.rank_settings import RankSettings as RankSettings

CONVERSATION_KINDS = frozenset({ChunkKind.MESSAGE, ChunkKind.ARCHIVE_RAW})
"""Chunks that are turns of a conversation: they have neighbours worth reading."""

_SPEAKER = re.compile(r"^(?:\d{2}:\d{2}(?::\d{2})? )?([^:\n]{1,64}): ")


@dataclass(slots=True)
class Candidate:
    id: int
    path: str
    line_from: int
    line_to: int
    kind: ChunkKind
    created_at: datetime | None
    ref: str | None
    text: str
    tokens: str
    lexical: float = 0.0
    dense: float | None = None
    base: float = 0.0
    score: float = 0.0
    neighbours: list[tuple[int, int]] = field(default_factory=list)
    """(distance, candidate id) of the turns around this one."""
    exchange: float | None = None
    """BM25 of the turn's exchange (it and its neighbours) as one document, when scored
    so: it then stands in for the context window's shares (see pipeline.rank)."""
    unit: float = 1.0
    """What one point of lexical score adds to `base` in this query's fusion."""
    factor: float = 1.0
    """What time, priors and the kind of answer multiplied the context score by."""
    lent: tuple[int, float] | None = None
    """(question id, its score) when this turn took the score of the question it answers."""
    dates: tuple[tuple[date, date], ...] = ()
    """The local days its text speaks of ("last Friday" → that Friday), resolved when it
    was stored (memory_core/base/turn_dates.py)."""

    @property
    def speaker(self) -> str | None:
        return speaker_of(self.kind, self.text)

    @property
    def body(self) -> str:
        """What was said, without the turn's time and speaker (a time of day is no date,
        a speaker's name no answer to "who")."""
        return turn_body(self.kind, self.text)


def turn_body(kind: ChunkKind, text: str) -> str:
    """A conversation turn's text without its 'HH:MM:SS who: ' prefix; other text as is."""
    m = _SPEAKER.match(text) if kind in CONVERSATION_KINDS else None
    return text[m.end() :] if m else text


def speaker_of(kind: ChunkKind, text: str) -> str | None:
    """The speaker of a conversation turn ('Mia: …', '19:02:00 Mia: …'), else None."""
    if kind not in CONVERSATION_KINDS:
        return None
    m = _SPEAKER.match(text)
    return m.group(1).strip() if m else None


def fuse(candidates: Sequence[Candidate], settings: RankSettings) -> None:
    """Set `base` from the lexical and the dense score of every candidate (the lexical
    score with its exchange's, when the turn is scored with its exchange).

    With no dense score anywhere (no embedder), base is the lexical score unchanged, so
    BM25-only ranking is exactly what it was.
    """
    dense = [c for c in candidates if c.dense is not None]
    if not dense:
        for c in candidates:
            c.base = words(c)
            c.unit = 1.0
        return
    if settings.fusion == "gated":
        _fuse_gated(candidates, dense, settings)
        return
    if settings.fusion == "weighted":
        top_lex = max((words(c) for c in candidates), default=0.0) or 1.0
        top_dense = max(c.dense or 0.0 for c in dense) or 1.0
        for c in candidates:
            sim = max(c.dense or 0.0, 0.0) / top_dense
            c.unit = (1 - settings.dense_weight) / top_lex
            c.base = c.unit * words(c) + settings.dense_weight * sim
        return
    lex_rank = _ranks(c for c in candidates if words(c) > 0)
    dense_rank = _ranks(dense, dense=True)
    k = settings.rrf_k
    for c in candidates:
        score = 0.0
        if c.id in lex_rank:
            score += (1 - settings.dense_weight) / (k + lex_rank[c.id])
        if c.id in dense_rank:
            score += settings.dense_weight / (k + dense_rank[c.id])
        # Scaled so a first place in both lists scores 1: thresholds stay readable.
        c.base = score * (k + 1)
        c.unit = 0.0  # ranks: a lost word moves no score


def window_max(pool: Mapping[int, Candidate]) -> None:
    """A turn's similarity becomes the best of the two vectors that hold it: its own
    (made with the turn before, `vectors.EMBED_TEXT`) and the next turn's (made with it),
    so an answer whose meaning the next line completes is not judged by the line before
    alone. The next turn is its distance-1 neighbour further down the same file."""
    own = {c.id: c.dense for c in pool.values()}
    for c in pool.values():
        if c.kind not in CONVERSATION_KINDS:
            continue
        for distance, other_id in c.neighbours:
            other = pool.get(other_id)
            if (
                distance != 1
                or other is None
                or other.path != c.path
                or other.line_from <= c.line_from
            ):
                continue
            after = own.get(other_id)
            if after is not None and (c.dense is None or after > c.dense):
                c.dense = after


def words(c: Candidate) -> float:
    """The lexical evidence fusion weighs: the turn's own, or its exchange's as well."""
    return c.lexical if c.exchange is None else c.lexical + c.exchange


def _fuse_gated(
    candidates: Sequence[Candidate], dense: Sequence[Candidate], settings: RankSettings
) -> None:
    """BM25 plus what the vectors add, in units of the best BM25 score, by kind of chunk.

    * A statement (long-term entry, summary, note) adds `dense_weight` of the weighted
      fusion: its order among statements is exactly the weighted fusion's.
    * A conversation turn adds only similarity above `turn_dense_floor`, at most
      `turn_dense_weight` of the best BM25 score. A turn's vector holds chat around one
      fact, its neighbour and its speaker's name, so nearby small talk ("Yep, Calvin!
      Can't wait to see you") reads as close to a question as the answer does: as a
      0.7 share of the score the vectors put such turns above answers BM25 found (public
      conversations, frac@5 of automatic recall 0.56 against 0.65 for BM25 alone); as a
      gated addition they only lift turns that are near the question in meaning.
    """
    top_lex = max((words(c) for c in candidates), default=0.0) or 1.0
    top_dense = max(c.dense or 0.0 for c in dense) or 1.0
    share = min(settings.dense_weight, 0.95)
    statement = share / (1 - share)
    floor = settings.turn_dense_floor
    # A statement's vector counts above the best turn's similarity: a lone entry near
    # nothing would otherwise outrank every turn whose vector is only gated in.
    said = max((c.dense or 0.0 for c in dense if c.kind in CONVERSATION_KINDS), default=0.0)
    for c in candidates:
        sim = max(c.dense or 0.0, 0.0)
        if c.kind in CONVERSATION_KINDS:
            lift = settings.turn_dense_weight * min(max((sim - floor) / (1 - floor), 0.0), 1.0)
        else:
            lift = statement * max(sim - said, 0.0) / max(top_dense - said, 1e-9)
        c.unit = 1.0
        c.base = words(c) + top_lex * lift


def _ranks(candidates: Iterable[Candidate], *, dense: bool = False) -> dict[int, int]:
    ordered = sorted(candidates, key=lambda c: -(c.dense or 0.0) if dense else -words(c))
    return {c.id: rank for rank, c in enumerate(ordered, start=1)}


def spread_context(candidates: Mapping[int, Candidate], weights: Sequence[float]) -> None:
    """score = own base + Σ weight(distance) × neighbour's base; a turn scored with its
    exchange as one document (its base holds the exchange's words) adds nothing more."""
    for c in candidates.values():
        c.score = c.base if c.exchange is not None else context_score(c, candidates, weights)


def context_score(
    c: Candidate,
    candidates: Mapping[int, Candidate],
    weights: Sequence[float],
    gone: Set[int] = frozenset(),
) -> float:
    """Own base plus Σ weight(distance) × each neighbour's base, but those in `gone`."""
    total = c.base
    for distance, other in c.neighbours:
        if 1 <= distance <= len(weights) and other in candidates and other not in gone:
            total += weights[distance - 1] * candidates[other].base
    return total


def time_factor(
    created_at: datetime | None,
    window: tuple[date, date] | None,
    zone: tzinfo,
    settings: RankSettings,
    dates: Sequence[tuple[date, date]] = (),
) -> float:
    """How much the question's time window lifts a chunk of this date, or whose text
    speaks of these days (`dates`): a turn saying "last Friday" is of that Friday too,
    and more surely than the turns merely made on that Friday, so it is lifted more
    (`spoken_time_boost`): "what did James do on March 16?" is answered by the turn of
    March 17 saying "yesterday I went bowling", not by what was said on the 16th."""
    if window is None or settings.time_boost <= 0:
        return 1.0
    first, last = window
    if any(a <= last and first <= b for a, b in dates):
        return 1.0 + max(settings.spoken_time_boost, settings.time_boost)
    days = list(dates)
    if created_at is not None:
        day = created_at.astimezone(zone).date()
        days.append((day, day))
    if any(a <= last and first <= b for a, b in days):
        return 1.0 + settings.time_boost
    near = timedelta(days=settings.time_near_days)
    if any(a <= last + near and first - near <= b for a, b in days):
        return 1.0 + settings.time_boost / 2
    return 1.0


def prior_factor(
    kind: ChunkKind, created_at: datetime | None, today: date, zone: tzinfo, settings: RankSettings
) -> float:
    """The old recall tiers as small score terms: long-term memory up, summaries down,
    the recent a little up (half-life `recency_half_life_days`)."""
    factor = 1.0
    if kind is ChunkKind.LONG_TERM:
        factor += settings.long_term_boost
    elif kind is ChunkKind.SUMMARY:
        factor *= settings.summary_factor
    if created_at is not None and settings.recency_boost > 0:
        age = max((today - created_at.astimezone(zone).date()).days, 0)
        factor += settings.recency_boost * math.pow(0.5, age / settings.recency_half_life_days)
    return factor


def entries_over_turns(candidates: Sequence[Candidate], share: float) -> None:
    """Lift each long-term entry just above the best conversation turn holding at least
    `share` of its words (when that turn scores higher): the entry is what was kept of
    what the turn said, in its own words or the person's. A turn scores its neighbours
    too (the context window), so the turn that made an entry ("remember that the
    staging server is at 10.0.0.7", "我住在杭州…" said in passing) outscored the entry
    despite its ×1.15, and then hid it as a near-copy. Only entries move: turns keep
    their order among themselves, and a turn that merely shares some of an entry's words
    keeps its place. A group entry's label ("(by Alice) ") is not what was said: its
    words are not asked of the turn, so a member's fact stays above another member's turn
    that says it with another value."""
    turns = [
        (frozenset(c.tokens.split()), c.score) for c in candidates if c.kind in CONVERSATION_KINDS
    ]
    if not turns:
        return
    for c in candidates:
        words = frozenset(c.tokens.split()) if c.kind is ChunkKind.LONG_TERM else frozenset()
        if not words:
            continue
        needed = share * (len(words) - label_words(c.text))
        said = [score for held, score in turns if len(words & held) >= needed]
        best = max(said, default=0.0)
        if best >= c.score:
            c.score = math.nextafter(best, math.inf)


def asks(c: Candidate) -> bool:
    """Whether a conversation turn ends in a question: "Did you bake for the party?"
    shares the words of what it asks about, and the answer is another turn's."""
    return c.kind in CONVERSATION_KINDS and c.body.rstrip().endswith(("?", "？"))


def session_of(c: Candidate) -> str | None:
    """The conversation session a turn was said in (a session's messages share a path,
    an archived session has a file of its own); None for what is no turn."""
    return c.path if c.kind in CONVERSATION_KINDS else None


def diversify(
    ranked: Sequence[Candidate],
    limit: int,
    threshold: float,
    shown: Callable[[Candidate], set[int]] = lambda c: {c.id},
    dropped: Callable[[Candidate, set[int]], Iterable[Candidate]] = lambda c, gone: (),
    repeat: float = 1.0,
) -> list[Candidate]:
    """The best `limit` candidates, skipping near-copies of one taken (the same note saved
    twice, a summary repeating a turn word for word) and turns a better hit already shows
    (inside its exchange) that match none of the query's words themselves.

    A shown turn holding query words of its own keeps its slot unless its hit would show
    the very lines of one taken (a two-line exchange): it may be the evidence the better
    hit only displays beside its anchor (measured on public conversations: suppressing
    it, or only when it held less than the hit, lost 2-4 points of frac@5).

    A near-copy goes with what it lent: `dropped(copy, gone)` rescores the candidates
    that scored part of the copy (its neighbours), which then take the place their own
    evidence earns, so the slot goes to the next best candidate, not to the copy's
    neighbours.

    A turn of a session that already has hits ranks at `repeat` of its score for each
    of them (the score it is taken with): a question with several answers has them in
    several sessions, and the second best turn of one session mostly says the first's
    again.
    """
    taken: list[Candidate] = []
    taken_sets: list[frozenset[str]] = []
    seen: set[int] = set()
    displayed: set[frozenset[int]] = set()
    gone: set[int] = set()
    sessions: Counter[str] = Counter()

    def current(c: Candidate) -> float:
        session = session_of(c) if repeat < 1 else None
        return c.score * repeat ** sessions[session] if session is not None else c.score

    queue = [(-c.score, c.id, c) for c in ranked]
    heapq.heapify(queue)
    while queue and len(taken) < limit:
        score, _, c = heapq.heappop(queue)
        now = current(c)
        if -score != now:  # rescored, or its session took a hit, since it was queued
            heapq.heappush(queue, (-now, c.id, c))
            continue
        window = frozenset(shown(c))
        if c.id in seen and (c.lexical <= 0 or window in displayed):
            continue
        words = frozenset(c.tokens.split())
        if words and any(_jaccard(words, other) >= threshold for other in taken_sets):
            gone.add(c.id)
            dropped(c, gone)
            continue
        c.score = now
        taken.append(c)
        taken_sets.append(words)
        seen |= window
        displayed.add(window)
        session = session_of(c)
        if session is not None:
            sessions[session] += 1
    return taken


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def confidence(score: float, ideal: float) -> float:
    """How sure a hit is, 0..1, from its score against what a turn holding every query
    term once would score (`ideal`): the injection's tiers read it."""
    if ideal <= 0 or score <= 0:
        return 0.0
    return 1.0 - math.exp(-1.6 * score / ideal)
