"""Counts in English text: "1 memory", "2 memories", never "1 memories" or "memory(s)"."""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def plural(word: str) -> str:
    """The regular English plural of the nouns our texts count (entry, memory, hit,
    block, match, summary); a compound (`daily file`) changes its last word."""
    if word.endswith("y") and len(word) > 1 and word[-2] not in _VOWELS:
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def counted(count: int, word: str, *, grouped: bool = False) -> str:
    """`count` and `word`, plural unless the count is one: `counted(1, "memory")` is
    "1 memory", `counted(3, "entry")` "3 entries" (`grouped`: "1,200 entries")."""
    number = f"{count:,}" if grouped else str(count)
    return f"{number} {word if count == 1 else plural(word)}"
