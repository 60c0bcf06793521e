"""Speakers: a query word naming who spoke a turn is scored as the turn's speaker
(`SPEAKER_NAMES`), and the turns of people the question does not name weigh less
(`OTHER_SPEAKERS`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.base.text import tokenize
from memory_core.recall.index.ranking import bm25_scorer, idf
from memory_core.recall.index.rerank import CONVERSATION_KINDS, Candidate
from memory_core.recall.index.steps.run import Measure, Ranking, RankRun, Step


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


def speaks(c: Candidate, named: frozenset[str]) -> bool:
    """Whether a conversation turn is said by someone the question names; what is no turn
    (an entry, a note) is not weighed by who said it.

    97 % of the evidence of public conversations' questions naming one person is that
    person's own words, but 15 % of the top 5 was the other's turns (their exchange held
    the named person's words): weighing those × 0.7 raised frac@5 0.714 → 0.719 (words
    alone) and 0.720 → 0.732 (with vectors)."""
    return c.kind not in CONVERSATION_KINDS or names(c, named)


def names(c: Candidate, named: frozenset[str]) -> bool:
    """Whether the turn's speaker is one the query names."""
    speaker = c.speaker
    return speaker is not None and not named.isdisjoint(tokenize(speaker))


def _speaker_names(run: RankRun) -> None:
    if run.settings.speaker_names:
        names_as_speakers(run.candidates, run.ranking)


def _other_speakers(run: RankRun) -> None:
    named = run.ranking.speaker_terms
    if not named:
        return
    factor = run.settings.other_speaker_factor
    for c in run.weighed:
        if not speaks(c, named):
            c.factor *= factor


SPEAKER_NAMES = Step(
    "speaker names", _speaker_names, ("speaker_names", "speaker_weight"), Measure.LEXICAL
)
OTHER_SPEAKERS = Step("other speakers", _other_speakers, ("other_speaker_factor",), Measure.FACTOR)
