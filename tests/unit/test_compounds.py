"""Compounds written apart, hyphenated or closed share a term (memory_core/base/compounds.py):
in the tokenizer (documents and queries alike) and through the index, both ways."""

from __future__ import annotations

import pytest

from memory_core.base.compounds import closed_compounds, hyphen_joins
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.text import matched_terms, tokenize
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.request import SearchRequest

SPELLINGS = [
    ("roadtrip", "road trip", "road-trip", "road trips", "roadtrips"),
    ("checkups", "check-up", "check up", "checkup"),
    ("email", "e-mail"),
    ("weekend", "week-end", "week end"),
    ("wellbeing", "well-being", "well being"),
    ("selfcare", "self-care", "self care"),
    ("icecream", "ice cream", "ice-cream"),
]
"""The issue's examples and the brief's: every spelling of one line means the same."""

PAIRS = [
    (first, second)
    for spellings in SPELLINGS
    for first in spellings
    for second in spellings
    if first != second
]


@pytest.mark.parametrize(("document", "query"), PAIRS)
def test_every_spelling_holds_the_closed_term(document: str, query: str) -> None:
    """Whatever the spellings of a document and of a query, they share the closed form's
    term (a query's words are tokenized as a document's are)."""
    closed = tokenize(query.replace("-", "").replace(" ", ""))
    assert len(closed) == 1
    assert closed[0] in tokenize(document)


def test_only_the_closed_form_is_added() -> None:
    """A compound written apart gains one term; a closed word gains none (no parts), so
    BM25's lengths move by one term per compound written apart."""
    assert tokenize("we went on a road trip") == ["went", "road", "roadtrip", "trip"]
    assert tokenize("our roadtrip") == ["roadtrip"]
    assert tokenize("annual checkups") == ["annual", "checkup"]
    assert tokenize("mother-in-law") == ["mother", "law", "motherinlaw"]
    # A listed pair that is hyphenated is joined once, not by both rules.
    assert tokenize("check-up") == ["check", "checkup"]


@pytest.mark.parametrize(
    "text",
    ["covid-19 vaccine", "2023-08-01", "road, trip", "a -b", "ab- cd", "9a-b", "road咖啡trip"],
)
def test_no_join_across_numbers_or_other_scripts(text: str) -> None:
    joined = {t for t in tokenize(text) if t in {"roadtrip", "covid19", "20230801", "abcd", "9ab"}}
    if text == "road, trip":
        # Punctuation between two words is not looked at: side by side is enough.
        assert joined == {"roadtrip"}
    else:
        assert joined == set()
    assert [w for w, _, _ in hyphen_joins(text)] == []


def test_the_list_is_loaded_and_plurals_are_in_it() -> None:
    listed = closed_compounds()
    assert {"road", "ice", "check", "self", "e"} <= listed.firsts
    assert {"roadtrip", "roadtrips", "checkup", "checkups", "icecream"} <= listed.closed


def test_highlights_cover_the_joined_words() -> None:
    text = "we went on a road trip, then self-care and e-mail"
    spans = matched_terms(text, "roadtrip selfcare email")
    assert [text[start:end] for start, end in spans] == ["road trip", "self-care", "e-mail"]


pytestmark = pytest.mark.storage


async def test_the_index_finds_every_spelling_both_ways(core: MemoryCore) -> None:
    """Each spelling indexed in one scope is found first by each other spelling as a
    query, through the real index, in both directions. The parts are common words among
    the other notes (as they are in a real scope), the closed word is rare: a note
    spelling it closed shares only that term with "road trip" and must still lead. (A note
    holding both parts apart, "the end of the week", shares two terms with "week-end"
    and may lead: no such note is among them.)"""
    distractors = [
        "the road was wet",
        "a long road home",
        "the trip to the lake",
        "a short trip",
        "check the mail",
        "the mail came late",
        "the end of the day",
        "every week we meet",
        "feeling well",
        "care for the cat",
        "a self help book",
        "ice on the lake",
        "cream cheese",
        "check it",
    ]
    for number, spellings in enumerate(SPELLINGS):
        for index, written in enumerate(spellings):
            scope = ScopeKey(f"peer:{number}-{index}")
            for day in ("on monday", "on tuesday", "on friday"):
                for text in distractors:
                    await core.notes.append(scope, f"{text} {day}")
            await core.notes.append(scope, f"we talked about the {written} today")
            for asked in spellings:
                if asked == written:
                    continue
                hits = await core.finder.search(scope, SearchRequest(f"the {asked}", limit=1))
                assert hits, (written, asked)
                assert written in hits[0].text, (written, asked)
    assert await core.finder.search(MAIN, "road trip") == []


async def test_the_file_search_finds_them_too(core: MemoryCore) -> None:
    """The degraded search, straight from the files, tokenizes as the index does."""
    await core.notes.append(MAIN, "booked the roadtrip and a check-up")
    distractors = ("the road was wet", "a long road home", "a trip to the zoo", "the trip was long")
    for text in (*distractors, "check it", "check the mail"):
        await core.notes.append(MAIN, text)
    for query in ("road trip", "checkups"):
        hits = fallback.search_files(core.workspace, MAIN, query)
        assert [h.text for h in hits][:1] == ["booked the roadtrip and a check-up"], query
