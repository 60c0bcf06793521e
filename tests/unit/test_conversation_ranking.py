"""The ranking rules found on public multi-session conversations, on hand-made turns:
the reply takes its question's rank, a shown turn with words of its own keeps a slot, a
dropped near-copy takes back what it lent, names count as speakers, an exchange scores
as one document, and vectors add to BM25 by kind of chunk (gated)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.records import Hit
from memory_core.base.text import tokenize
from memory_core.recall.index.pipeline import Ranking, lexical_scorer, rank
from memory_core.recall.index.ranking import CorpusStats
from memory_core.recall.index.rerank import Candidate, RankSettings, diversify, fuse
from tests.support import candidate

TODAY = date(2026, 3, 10)
AT = datetime(2026, 3, 1, 18, 0, tzinfo=UTC)
PLAIN: dict[str, object] = {"recency_boost": 0.0, "time_boost": 0.0, "answer_boost": 0.0}
"""No recency, time or answer lift: the rules alone."""


_IDS = itertools.count(1)


def turns(*said: tuple[str, str], path: str = "memory/2026-03-01-talk.md") -> list[Candidate]:
    """Archived turns of one conversation, one line each, linked to their neighbours."""
    first = next(_IDS)
    out = [
        candidate(
            first * 100 + i,
            f"18:0{i}:00 {who}: {text}",
            kind=ChunkKind.ARCHIVE_RAW,
            created_at=AT,
            path=path,
        )
        for i, (who, text) in enumerate(said)
    ]
    for c in out:  # an archived turn is tokenized without its "HH:MM:SS who:" prefix
        c.tokens = " ".join(tokenize(c.body))
    for i, c in enumerate(out):
        for j, other in enumerate(out):
            if 0 < abs(i - j) <= 2:
                c.neighbours.append((abs(i - j), other.id))
    return out


def pool_of(ranking: Ranking, *groups: list[Candidate]) -> dict[int, Candidate]:
    score = lexical_scorer(ranking)
    pool = {c.id: c for group in groups for c in group}
    for c in pool.values():
        c.lexical = score(c)
    return pool


def ranking(words: dict[str, int], docs: int = 40, **settings: object) -> Ranking:
    """A query of `words` (each held by that many chunks of a scope of `docs`)."""
    stats = CorpusStats(docs=docs, avg_len=6.0, doc_freq=dict(words))
    merged: dict[str, Any] = {**PLAIN, **settings}
    return Ranking(dict.fromkeys(words, 1.0), stats, None, TODAY, UTC, RankSettings(**merged))


def anchored(hits: Sequence[Hit], pool: dict[int, Candidate]) -> list[str]:
    """The text each hit is anchored on (its own turn, not the neighbours it shows)."""
    by_line = {(c.path, c.line_from): c.body for c in pool.values()}
    return [by_line[(h.path, h.anchor)] for h in hits]


def test_the_reply_takes_its_questions_rank() -> None:
    """ "What flavor did you make?" holds the query's words; the answer is the next turn."""
    r = ranking({"flavor": 2, "make": 6})
    talk = turns(
        ("Nate", "Sorry I was away, I made my friend some ice cream"),
        ("Joanna", "No worries! What flavor did you make?"),
        ("Nate", "Chocolate and vanilla swirl."),
        ("Joanna", "That looks delicious, but I can't have dairy."),
    )
    pool = pool_of(r, talk)
    hits = rank(pool, r, limit=3)
    assert anchored(hits, pool)[0] == "Chocolate and vanilla swirl."
    assert "What flavor did you make?" in hits[0].text  # shown with its question


def test_a_statement_ending_with_a_question_keeps_its_rank() -> None:
    """The words are in the statement, not in "how about you?": nothing to hand on."""
    r = ranking({"flavor": 2, "coconut": 2})
    talk = turns(
        ("Nate", "My favourite flavor is coconut, so creamy. How about you?"),
        ("Joanna", "Chocolate for me!"),
    )
    pool = pool_of(r, talk)
    hits = rank(pool, r, limit=2)
    assert anchored(hits, pool)[0].startswith("My favourite flavor is coconut")


def test_a_question_by_the_person_asked_about_keeps_its_rank() -> None:
    """ "Which language is Tim learning?": Tim's own turn says it and ends with a
    question; John's reply is about John, so it does not take Tim's rank."""
    said = (
        ("Tim", "I'm learning German now, tough but fun. Do you know any other languages?"),
        ("John", "I know a bit of Spanish, it makes travel easier."),
        ("Tim", "Nice, travel is great."),
    )
    r = ranking({"tim": 10, "languag": 2, "learn": 6}, docs=100)
    pool = pool_of(r, turns(*said))
    assert anchored(rank(pool, r, limit=2), pool)[0].startswith("I'm learning German")
    # The query names nobody: the reply takes the question's rank as before.
    r = ranking({"languag": 2, "learn": 6}, docs=100)
    pool = pool_of(r, turns(*said))
    assert anchored(rank(pool, r, limit=2), pool)[0].startswith("I know a bit of Spanish")


def test_a_turn_shown_beside_a_better_hit_keeps_a_slot_when_it_matches_itself() -> None:
    first = candidate(1, "the exchange the hit is anchored on", lexical=5.0)
    beside = candidate(2, "a neighbour holding a query word", lexical=1.0)
    filler = candidate(3, "a neighbour holding none", lexical=0.0)
    other = candidate(4, "a weaker hit elsewhere", lexical=0.5)
    for c, score in ((first, 9.0), (beside, 4.0), (filler, 3.0), (other, 2.0)):
        c.score = score
    shows = {1: {1, 2, 3}}
    taken = diversify(
        [first, beside, filler, other], 3, 0.8, shown=lambda c: shows.get(c.id, {c.id})
    )
    assert [c.id for c in taken] == [1, 2, 4]


def test_a_dropped_near_copy_takes_back_what_it_lent_its_neighbours() -> None:
    """The same message twice (a copy in another file): the copy is dropped, and its
    unrelated neighbours, which scored its words through the exchange, do not take its
    slot; the next best candidate does."""
    r = ranking({"sneakers": 2, "wear": 8}, docs=200)
    said = ("me", "Which sneakers do I wear on my feet today, the white ones?")
    original = turns(("me", "morning"), said, ("me", "lunch at noon"))
    copy = turns(
        ("me", "the concealer shade I bought"),
        said,
        ("me", "my phone model is the new one"),
        path="memory/2026-03-01-copy.md",
    )
    elsewhere = [candidate(7, "I wear boots in winter", lexical=0.0, created_at=AT)]
    pool = pool_of(r, original, copy, elsewhere)
    hits = rank(pool, r, limit=2)
    shown = [h.text for h in hits]
    assert any("sneakers" in t for t in shown)
    assert "I wear boots in winter" in shown
    assert not any("concealer" in t or "phone model" in t for t in shown)


def test_a_name_asked_about_counts_as_the_speaker_not_as_a_word() -> None:
    """ "What does Nate like?": Joanna thanking Nate is not about what Nate likes."""
    r = ranking({"nate": 10, "like": 10}, docs=100)
    joanna = turns(("Joanna", "Thanks Nate, I like it a lot"), path="memory/a.md")
    nate = turns(("Nate", "I like turtles, they calm me"), path="memory/b.md")
    pool = pool_of(r, joanna, nate)
    hits = rank(pool, r, limit=2)
    assert anchored(hits, pool)[0] == "I like turtles, they calm me"
    plain = ranking(  # as before: names are words too, the speaker field half an idf
        {"nate": 10, "like": 10}, docs=100, speaker_names=False, speaker_weight=0.5
    )
    pool = pool_of(
        plain,
        turns(("Joanna", "Thanks Nate, I like it a lot"), path="memory/a.md"),
        turns(("Nate", "I like turtles, they calm me"), path="memory/b.md"),
    )
    assert anchored(rank(pool, plain, limit=2), pool)[0] == "Thanks Nate, I like it a lot"


def test_the_turn_speaking_of_the_asked_day_outranks_talk_made_that_day() -> None:
    """ "Which activity was James pursuing on 16 March?": the turn of the 17th saying
    "yesterday I went bowling" is the answer, not a turn of the 16th about bowling plans."""
    day = date(2026, 3, 2)
    (bowling,) = tokenize("bowling")
    r = Ranking(
        {bowling: 1.0},
        CorpusStats(docs=40, avg_len=6.0, doc_freq={bowling: 3}),
        (day, day),
        TODAY,
        UTC,
        RankSettings(**{**PLAIN, "time_boost": 1.0}),
    )
    plans = turns(("James", "Bowling tonight"), path="memory/2026-03-02-talk.md")
    for c in plans:
        c.created_at = datetime(2026, 3, 2, 18, tzinfo=UTC)
    told = turns(
        ("James", "Yesterday I went bowling"),
        path="memory/2026-03-03-talk.md",
    )
    for c in told:
        c.created_at = datetime(2026, 3, 3, 18, tzinfo=UTC)
        c.dates = ((day, day),)
    pool = pool_of(r, plans, told)
    assert plans[0].lexical > told[0].lexical  # the words alone prefer the short turn
    hits = rank(pool, r, limit=2)
    assert anchored(hits, pool)[0].startswith("Yesterday I went bowling")


def test_gated_fusion_adds_vectors_by_kind() -> None:
    settings = RankSettings()  # the default: gated, turn floor 0.3
    turn_near = candidate(1, "a", kind=ChunkKind.ARCHIVE_RAW, lexical=2.0, dense=0.65)
    turn_far = candidate(2, "b", kind=ChunkKind.ARCHIVE_RAW, lexical=4.0, dense=0.29)
    lone_entry = candidate(3, "c", kind=ChunkKind.LONG_TERM, lexical=0.0, dense=0.5)
    fuse([turn_near, turn_far, lone_entry], settings)
    assert turn_far.base == 4.0  # below the floor a turn's vector adds nothing
    assert turn_near.base == pytest.approx(2.0 + 4.0 * (0.65 - 0.3) / 0.7)
    assert lone_entry.base == 0.0  # not nearer the question than the best turn
    # Statements alone (long-term memories) keep the weighted fusion's order exactly.
    entries = [
        candidate(i, str(i), kind=ChunkKind.LONG_TERM, lexical=lex, dense=sim)
        for i, (lex, sim) in enumerate([(3.0, 0.1), (0.0, 0.6), (1.0, 0.4), (2.0, 0.35)])
    ]
    fuse(entries, settings)
    gated = sorted(entries, key=lambda c: -c.base)
    fuse(entries, RankSettings(fusion="weighted"))
    assert [c.id for c in gated] == [c.id for c in sorted(entries, key=lambda c: -c.base)]


def test_a_turn_alone_scores_as_its_own_exchange() -> None:
    """Many people's messages in one scope: a message with no neighbour is an exchange of
    one turn, not worth less than a turn whose neighbours add nothing (issue 35: it lost
    to the plain-BM25 floor on pooled daily-life messages)."""
    r = ranking({"kite": 3}, docs=100)
    alone = turns(("Bart", "I flew a kite at the beach"), path="memory/a.md")
    talk = turns(
        ("Lisa", "we flew a kite in the park"),
        ("Lisa", "then ate mango ice cream"),
        path="memory/b.md",
    )
    pool = pool_of(r, alone, talk)
    assert anchored(rank(pool, r, limit=2), pool)[0] == "I flew a kite at the beach"
