"""Compound words written three ways: "road trip", "road-trip" and "roadtrip" share a term.

The tokenizer (`text.tokenize`, the same for documents and queries) adds the closed form
of a compound to the terms its parts give:

* two adjacent words whose concatenation is a listed closed compound ("road trip",
  "check up", "ice creams"; the list is `data/compounds_en.txt`, see
  scripts/make_compounds.py) add that word;
* a hyphenated chain of letters ("e-mail", "well-being", "mother-in-law") adds its parts
  joined, listed or not.

A closed compound ("roadtrip", "checkups") is one word already, so a text in any of the
three spellings holds the closed term and matches a query in any of them. Only the closed
form is added, never the parts of a closed word: a query for "trip" does not reach
"roadtrip", and a text grows by one term per compound it spells apart, so BM25's lengths
and term counts move by that much and no more.

Chinese has no such rule: search mode already gives the sub-words of the longer word on
either side (咖啡店 -> 咖啡, 咖啡店; 打篮球 -> 篮球, 打篮球), and bench/segmentation_probe.py
over the labelled Chinese sets and MADial-zh (666 question/evidence pairs) finds no
question word whose characters the evidence holds in a row but not as a term. The one
recurring mismatch, reduplication (舅舅 / 我舅, 画画 / 画), was tried as a rule (妈妈 also
gives 妈) and cost BM25 0.3-0.4 points on both Chinese sets for no gain (docs/
decisions/0003-tokenizer.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from memory_core.base.patterns import LazyPattern

__all__ = [
    "Listed",
    "closed_compound",
    "closed_compounds",
    "has_hyphen",
    "hyphen_joins",
]

DATA = Path(__file__).with_name("data")
NON_BREAKING = "\u2010"
"""The hyphen NFKC leaves of a non-breaking one; a hyphen-minus is the other."""
_CHAIN_RE = LazyPattern("[a-z]++(?:-[a-z]++)+")
"""Letters joined by hyphens; possessive, so a word without one fails at once."""


class Listed(NamedTuple):
    """The listed compounds, as the tokenizer tests two adjacent words against them."""

    firsts: frozenset[str]
    """Every listed first part: a word that is none starts no compound (one lookup)."""
    closed: frozenset[str]
    """The closed words and their plurals ("roadtrips": "road trips" spells it)."""


@functools.cache
def closed_compounds() -> Listed:
    """`data/compounds_en.txt` read once, at the first Latin text tokenized (about 12 000
    splits, lowercase ASCII as scripts/make_compounds.py writes them: ~3 ms)."""
    raw = (DATA / "compounds_en.txt").read_text(encoding="ascii")
    body = raw[raw.index("\n\n") + 2 :] if raw.startswith("#") else raw  # after the header
    words = body.split()
    firsts, seconds = words[0::2], words[1::2]
    closed = list(map(str.__add__, firsts, seconds))
    plurals = [word + "s" for word in closed]
    return Listed(frozenset(firsts), frozenset(closed + plurals))


def closed_compound(listed: Listed, first: str, second: str) -> str | None:
    """The closed compound two adjacent lowercased words spell, if listed; else None.
    `text.tokenize` inlines this test."""
    if first in listed.firsts and (word := first + second) in listed.closed:
        return word
    return None


def hyphen_joins(text: str) -> Iterator[tuple[str, int, int]]:
    """(joined word, start, end) of each hyphenated chain of ASCII letters in lowercased
    `text`, except a two-part chain that spells a listed compound: the adjacent-word rule
    adds that one already.

    Found from the hyphens (`str.find`) rather than by a regex scanning every character:
    a text without a chain costs next to nothing."""
    if NON_BREAKING in text:
        text = text.replace(NON_BREAKING, "-")  # the same length: spans stay right
    listed = closed_compounds()
    at = text.find("-", 1)
    while at > 0:
        start = at
        while start and "a" <= text[start - 1] <= "z":
            start -= 1
        chain = _CHAIN_RE.match(text, start) if start < at else None
        if chain is None or (start and text[start - 1].isalnum()):
            at = text.find("-", at + 1)
            continue
        end = chain.end()
        if end == len(text) or not text[end].isalnum():
            parts = chain.group().split("-")
            if len(parts) > 2 or not closed_compound(listed, parts[0], parts[1]):
                yield "".join(parts), start, end
        at = text.find("-", end)


def has_hyphen(text: str) -> bool:
    """Whether `hyphen_joins` can find anything (a cheap test before calling it)."""
    return "-" in text or NON_BREAKING in text
