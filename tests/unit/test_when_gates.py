"""The digit gates of `when.time_mentions` (`_gate_keys`: "0-", "019", "0m"): the four
patterns of numbered dates ran on every text holding a digit, and now only where they
can match, so what a text is read as does not change. Each text is read twice: gated,
and with those four patterns run on any digit, as before the gates."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base import when
from testkit.chat_sample import generate_sentences

TODAYS = (date(2023, 2, 13), date(2026, 3, 1), date(2024, 12, 31))
DIGIT_KEYS = frozenset({"0-", "019", "0m"})
GATE_KEYS = when._gate_keys


def digit_ungated(text: str) -> set[str]:
    """The gate keys with every numbered-date pattern run on any digit (the gate before)."""
    present = GATE_KEYS(text)
    if any(ch.isdecimal() for ch in text):
        present |= DIGIT_KEYS
    return present


FRAGMENTS = [
    # numbered dates and what the digit gates look for beside a digit
    *"0123456789",
    "19",
    "20",
    "2023",
    "1999",
    "-",
    "/",
    ":",
    "st",
    "th",
    " of ",
    ", ",
    " ",
    # months, also in the letters an IGNORECASE pattern folds to latin ones
    *("May", "march", "SEPT", "Dec", "april", "APR\u0130L", "apr\u0131l", "\u017fept"),
    *("August", "\u212aey", "in ", "on ", "early ", "mid-", "end of "),
    # other English and Chinese time words, and plain text around them
    *("last ", "next ", "this ", "ago", "week", "weekend", "days", "Friday", "tomorrow"),
    *("yesterday", "recently", "we met ", "Jake", "\u00e9", "_", "x"),
    *("年", "月", "日", "号", "周", "星期", "上", "下", "个", "前", "天", "今天", "去年"),
    *("最近", "三", "十", "两", "已经", "了", "我们", "，", "。"),
]


def reading(text: str, today: date, ahead: bool, *, gated: bool = True) -> object:
    """The mentions, or the error the patterns met (a month's name in the letters that
    fold to latin ones, "in \u017fept", is read as no month of `_MONTHS_EN`: a KeyError
    with or without the gates, for a fix of its own)."""
    with pytest.MonkeyPatch.context() as patched:
        if not gated:
            patched.setattr(when, "_gate_keys", digit_ungated)
        try:
            return when.time_mentions(text, today, ahead=ahead)
        except KeyError as exc:
            return ("KeyError", str(exc))


@settings(max_examples=600, deadline=None)
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12),
    today=st.sampled_from(TODAYS),
    ahead=st.booleans(),
)
def test_the_gates_skip_no_pattern_that_matches(parts: list[str], today: date, ahead: bool) -> None:
    text = "".join(parts)
    assert reading(text, today, ahead) == reading(text, today, ahead, gated=False)


@pytest.mark.parametrize(
    "text",
    [
        "on 2023-05-04 we met",
        "in 1999 and 2020-7",
        "14th of May, 2024",
    ],
)
def test_numbered_dates_are_read_through_their_gates(text: str) -> None:
    today = date(2026, 3, 1)
    every = reading(text, today, True, gated=False)
    assert every  # each names a date
    assert reading(text, today, True) == every


@pytest.mark.parametrize("text", ["12 APR\u0130L 2023", "3rd of \u017fept"])
def test_a_month_in_letters_folding_to_latin_passes_the_gate(text: str) -> None:
    """ "İ" matches "i" when ignoring case, and casefolded it is "i̇": the gate reads the
    text's words with such letters made latin (`patterns.LATIN_LOOK_ALIKES`)."""
    today = date(2026, 3, 1)
    assert "0m" in when._gate_keys(text)
    assert reading(text, today, True) == reading(text, today, True, gated=False)


def test_chat_texts_are_read_the_same_gated_or_not() -> None:
    """The bench corpus's sentences (half of them hold a digit) and the chat sample's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        from corpus import sentences
    finally:
        sys.path.pop(0)
    texts = [*sentences(3_000, 7), *generate_sentences(1_000)]
    today = date(2024, 6, 9)
    every = [reading(t, today, True, gated=False) for t in texts]
    assert [reading(t, today, True) for t in texts] == every
    assert sum(1 for m in every if m) > 500
