"""Time references in questions (English and Chinese) → a window of local dates, and the
words that named the time leaving the lexical query."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memory_core.base.when import day_bounds, find_time_reference
from memory_core.recall.query import TIME_WORD_WEIGHT, build_query

TODAY = date(2026, 3, 1)
"""A Sunday: 'last Friday' is two days back, 'this week' began on 23 February."""

D = date.fromisoformat


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        # English
        ("what did we eat in May 2023?", "2023-05-01", "2023-05-31"),
        ("what did we do in May?", "2025-05-01", "2025-05-31"),  # latest May not after today
        ("last Friday", "2026-02-27", "2026-02-27"),
        ("two weeks ago", "2026-02-12", "2026-02-18"),  # a week wide around 15 February
        ("3 days ago", "2026-02-25", "2026-02-27"),
        ("on 14 March", "2025-03-14", "2025-03-14"),  # 14 March 2026 is still to come
        ("on May 3", "2025-05-03", "2025-05-03"),
        ("early March", "2026-03-01", "2026-03-10"),
        ("in mid May", "2025-05-10", "2025-05-20"),
        ("yesterday", "2026-02-28", "2026-02-28"),
        ("the day before yesterday", "2026-02-27", "2026-02-27"),
        ("last week", "2026-02-16", "2026-02-22"),
        ("in 2025, on 3 May", "2025-05-03", "2025-05-03"),  # the narrowest of two
        ("over the last couple of months", "2025-12-31", "2026-03-01"),  # up to today
        ("in the past 3 weeks", "2026-02-08", "2026-03-01"),
        ("the last few days", "2026-02-26", "2026-03-01"),
        # Chinese
        ("上个月我们去哪了", "2026-02-01", "2026-02-28"),
        ("去年五月", "2025-05-01", "2025-05-31"),  # May, not the whole year
        ("三月初", "2026-03-01", "2026-03-10"),
        ("上周三我们吃了什么", "2026-02-18", "2026-02-18"),
        ("前天", "2026-02-27", "2026-02-27"),
        ("大前天", "2026-02-26", "2026-02-26"),
        ("我们3月15号聊了什么", "2025-03-15", "2025-03-15"),
        ("两周前", "2026-02-12", "2026-02-18"),
        ("2024年3月", "2024-03-01", "2024-03-31"),
        ("上上周", "2026-02-09", "2026-02-15"),
        ("最近三个月体重怎么样", "2025-12-01", "2026-03-01"),
        ("过去两周", "2026-02-15", "2026-03-01"),
        ("这阵子我在忙什么", "2026-02-08", "2026-03-01"),
    ],
)
def test_time_references(text: str, first: str, last: str) -> None:
    found = find_time_reference(text, TODAY)
    assert found is not None, text
    assert (found.first, found.last) == (D(first), D(last)), text
    assert found.spans and all(0 <= a < b <= len(text) for a, b in found.spans)


@pytest.mark.parametrize(
    "text",
    [
        "I may go hiking",
        "May I ask you something?",
        "you may be right",
        "Five years already!",  # a duration, not a date
        "How long have I played the cello?",
        "the last two chapters were great",  # "last" with no unit of time
        "我学大提琴多久了？",
        "我们一周一次的课叫什么",  # "once a week": no Monday
        "每周一的例会在哪开",  # "every Monday": no one Monday
        "",
    ],
)
def test_no_time_reference(text: str) -> None:
    assert find_time_reference(text, TODAY) is None


def test_weekday_on_that_weekday_means_a_week_back() -> None:
    friday = date(2026, 2, 27)
    found = find_time_reference("last Friday", friday)
    assert found is not None and found.first == found.last == D("2026-02-20")


def test_the_time_words_leave_the_lexical_query() -> None:
    """'may' the month and '上周三' are in no memory's text: the window does their work,
    and they keep only a small weight (a summary headed 'May 2023' still matches)."""
    english = build_query("what did we eat in May 2023?", today=TODAY)
    assert english.window == (D("2023-05-01"), D("2023-05-31"))
    assert english.terms["eat"] == 1.0
    assert all(w == TIME_WORD_WEIGHT for t, w in english.terms.items() if t != "eat")
    chinese = build_query("上周三我们吃了什么", today=TODAY)
    assert chinese.window == (D("2026-02-18"), D("2026-02-18"))
    assert chinese.terms["吃"] == 1.0
    assert {t for t, w in chinese.terms.items() if w == TIME_WORD_WEIGHT} >= {"上周三"}
    # 'may' the verb is a word of the question, with no window.
    verb = build_query("I may go hiking with Leo", today=TODAY)
    assert verb.window is None and verb.terms["leo"] == 1.0
    # Without a day to count from, nothing is read as a time.
    assert build_query("what did we eat in May 2023?").window is None


def test_day_bounds_are_local_midnights() -> None:
    zone = ZoneInfo("Asia/Shanghai")
    start, end = day_bounds(D("2026-02-18"), D("2026-02-18"), zone)
    assert start.astimezone(UTC) == datetime(2026, 2, 17, 16, tzinfo=UTC)
    assert end - start == timedelta(days=1)


LOOK_ALIKES = [
    str.maketrans({"i": "\u0130", "s": "\u017f", "k": "\u212a"}),
    str.maketrans({"i": "\u0131"}),
]
"""Letters a case-insensitive match takes for 'i', 's' and 'k' whose lower case is no
ASCII letter (the Turkish dotted capital I and dotless i, the long s, the Kelvin sign)."""


@pytest.mark.parametrize(
    "text",
    [
        "we met on 12 April 2025",
        "on August 3",
        "last Sunday",
        "six weeks ago",
        "this week",
        "the day before yesterday",
        "in early April",
        "the last six days",
        "it was back in mid-August, I think",
    ],
)
def test_look_alike_letters_name_the_same_time(text: str) -> None:
    """A time written with look-alike letters (text from anywhere: a chat, a pasted page)
    names the time its plain letters name; it neither fails nor is read as another."""
    plain = find_time_reference(text, TODAY)
    assert plain is not None, text
    for look_alikes in LOOK_ALIKES:
        odd = find_time_reference(text.translate(look_alikes), TODAY)
        assert odd is not None and (odd.first, odd.last) == (plain.first, plain.last), text
