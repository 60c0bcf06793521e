"""Counts in the product's English texts: "1 memory", never "1 memories"."""

from __future__ import annotations

import pytest

from memory_core.base.wording import counted


@pytest.mark.parametrize(
    ("count", "word", "text"),
    [
        (1, "memory", "1 memory"),
        (2, "memory", "2 memories"),
        (0, "entry", "0 entries"),
        (1, "forgotten entry", "1 forgotten entry"),
        (3, "hit", "3 hits"),
        (1, "daily file", "1 daily file"),
        (2, "day", "2 days"),
        (2, "summary", "2 summaries"),
        (2, "match", "2 matches"),
    ],
)
def test_counted_says_one_in_the_singular(count: int, word: str, text: str) -> None:
    assert counted(count, word) == text


def test_grouped_counts() -> None:
    assert counted(3000, "entry", grouped=True) == "3,000 entries"
    assert counted(1, "entry", grouped=True) == "1 entry"
