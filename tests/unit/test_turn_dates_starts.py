"""Times a turn counts back from its own day, resolved when it is stored: the start a
duration that still lasts points at ("two years now", "已经两年了"), points years back
("three years ago", "三年前"), and last week or month as the whole week or month. A "when
did … start" question is answered by a resolved start; an index made before the resolver
read these is brought up to date at its next open."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory_core.base.answer_kind import AnswerKind, holds_answer, wanted_answer
from memory_core.base.clock import ManualClock
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN
from memory_core.base.turn_dates import encode_days, mentioned_days
from memory_core.base.when import find_time_reference
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tests.support import sql, sql_write

MONDAY = datetime(2023, 2, 13, 10, 0, tzinfo=UTC)
"""Monday 13 February 2023. Two years back is 13 February 2021, a year's precision."""
TWO_YEARS = "2020-08-15..2021-08-14"
THREE_YEARS = "2019-08-16..2020-08-14"
SIX_MONTHS = "2022-08-02..2022-09-01"
LAST_WEEK = "2023-02-06..2023-02-12"
LAST_MONTH = "2023-01-01..2023-01-31"


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("we have been together for two years now", TWO_YEARS),
        ("two years now!", TWO_YEARS),
        ("been doing it for six months", SIX_MONTHS),
        ("I play guitar since three years", THREE_YEARS),
        ("I've had him for 3 years", THREE_YEARS),
        ("Been playing it for a month now", "2022-12-30..2023-01-29"),
        ("I've been playing for about four months now", "2022-10-01..2022-10-31"),
        ("it's been a year since Dad passed", "2021-08-15..2022-08-14"),
        ("I started surfing three years ago", THREE_YEARS),
        ("三年前我去过一次", THREE_YEARS),
        ("两个月前开始的", "2022-11-30..2022-12-30"),
        ("半年前换的工作", SIX_MONTHS),
        ("我们在一起已经两年了", TWO_YEARS),
        ("这份工作我做了六个月", SIX_MONTHS),
        ("学吉他两年了", TWO_YEARS),
        ("last week was busy", LAST_WEEK),
        ("上周很忙", LAST_WEEK),
        ("上个星期去了趟上海", LAST_WEEK),
        ("last month I quit", LAST_MONTH),
        ("上个月辞职了", LAST_MONTH),
        ("last weekend we hiked", "2023-02-11..2023-02-12"),
    ],
)
def test_a_time_counted_back_from_the_turn_is_kept(text: str, days: str) -> None:
    assert encode_days(mentioned_days(text, MONDAY, UTC)) == days


@pytest.mark.parametrize(
    "text",
    [
        "I'm going to Paris for two weeks",  # a plan, not something that still lasts
        "I worked there for three years",  # it ended: no start relative to today
        "买了三个月的会员",  # a three-month membership
        "好几年了",  # "several years": no count
        "离比赛不到两个月了",  # time left, not time since
        "只剩一个月了！",
        "去年我们搬家了",  # a whole year lifts a turn into too many windows (measured)
        "last year was hard",
    ],
)
def test_durations_without_a_start_or_too_wide_are_not_kept(text: str) -> None:
    assert mentioned_days(text, MONDAY, UTC) == ()


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("三年前我在哪儿工作？", THREE_YEARS),
        ("半年前我换了什么工作", SIX_MONTHS),
        ("半个月前我们吃了什么", "2023-01-27..2023-02-02"),
    ],
)
def test_a_question_counting_years_or_half_back_names_that_time(question: str, window: str) -> None:
    """The question's parser is the turn's: '三年前' is a year around then, '半年前' six
    months back (neither was read before)."""
    found = find_time_reference(question, MONDAY.date())
    assert found is not None
    assert f"{found.first.isoformat()}..{found.last.isoformat()}" == window


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did Melanie start painting?", AnswerKind.DATE),
        ("你什么时候开始学钢琴的？", AnswerKind.DATE),
        # A length of time is a number ("3 years", "两年"): a kind of its own for it,
        # lengths in words ("an hour") and resolved starts, cost LoCoMo dev 0.1 and the
        # labelled en set 0.3 (docs/decisions/0008).
        ("How long did it take Jon to open his studio?", AnswerKind.NUMBER),
        ("你弹吉他多久了？", AnswerKind.NUMBER),
    ],
)
def test_start_and_length_questions(question: str, kind: AnswerKind) -> None:
    assert wanted_answer(question) is kind


def test_a_resolved_start_answers_when() -> None:
    """'I've been playing for about four months now' names no date in words; its start,
    resolved at write time, answers "When did Tim start playing the violin?"."""
    text = "I've been playing for about four months now"
    assert not holds_answer(AnswerKind.DATE, text)
    assert mentioned_days(text, MONDAY, UTC) != ()
    assert holds_answer(AnswerKind.DATE, text, dated=True)
    assert holds_answer(AnswerKind.NUMBER, text)  # and "how long?" by its count


# --- an index made by the previous resolver ---------------------------------------------

STARTED = "I've had the turtles for 3 years now"
PLAIN = "the turtles love the new tank"


async def _dates(core: MemoryCore) -> dict[str, str | None]:
    rows = await sql(core, "SELECT text, dates FROM chunks WHERE kind = 'message'")
    return {str(text).removeprefix("user: "): dates for text, dates in rows}


@pytest.mark.storage
async def test_an_index_of_the_previous_resolver_is_resolved_again_at_open(
    config: Config,
) -> None:
    """The previous resolver stored '' for the start; the migration that followed it
    forgets every message's days and the next open fills them (`sync_opened`)."""
    clock = ManualClock(MONDAY)
    async with MemoryCore.open(config, clock=clock) as core:
        for session, text in (("a", STARTED), ("b", PLAIN)):
            message = RecordedMessage("user", "", text, MONDAY)
            await core.record_session(MAIN, session, MONDAY, [message])
        assert await _dates(core) == {STARTED: THREE_YEARS, PLAIN: ""}
        # As the previous code left it: no start, and the migration not yet applied.
        await sql_write(
            core,
            ("UPDATE chunks SET dates = '' WHERE kind = 'message'", ()),
            ("DROP INDEX chunks_dates_unresolved", ()),
            ("DELETE FROM _migrations WHERE name LIKE '%chunk_dates_starts'", ()),
        )
        assert await _dates(core) == {STARTED: "", PLAIN: ""}
    async with MemoryCore.open(config, clock=clock) as core:
        assert await _dates(core) == {STARTED: THREE_YEARS, PLAIN: ""}
