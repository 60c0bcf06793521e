"""The days a turn speaks of, resolved when it is stored ("last Friday" on Monday 13
February 2023 is 10 February), kept with its chunk, and ranked by: a question naming that
day finds the turn, as a message, in an archive file, and after a reindex."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from memory_core.base.answer_kind import AnswerKind, holds_answer
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN
from memory_core.base.turn_dates import (
    MAX_RANGES,
    decode_days,
    encode_days,
    mentioned_days,
)
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall import fallback
from memory_core.recall.index.rerank import RankSettings, time_factor
from memory_core.recall.request import SearchRequest
from tests.support import sql, sql_write

pytestmark = pytest.mark.storage

D = date.fromisoformat
MONDAY = datetime(2023, 2, 13, 10, 0, tzinfo=UTC)
"""Monday 13 February 2023: 'last Friday' and '上周五' are 10 February."""


@pytest.mark.parametrize(
    ("text", "ranges"),
    [
        ("I went there last Friday", [("2023-02-10", "2023-02-10")]),
        ("we had a fight two weeks ago", [("2023-01-27", "2023-02-02")]),  # around 30 Jan
        ("yesterday was rough", [("2023-02-12", "2023-02-12")]),
        ("I watched the whole trilogy last night!", [("2023-02-12", "2023-02-12")]),
        ("昨晚看了那部电影", [("2023-02-12", "2023-02-12")]),
        ("my cousin got married on 9 February 2023", [("2023-02-09", "2023-02-09")]),
        ("I start the new job in May 2023", [("2023-05-01", "2023-05-31")]),
        ("see you tomorrow", [("2023-02-14", "2023-02-14")]),
        ("the party is next Friday", [("2023-02-17", "2023-02-17")]),
        ("上周五我去了医院", [("2023-02-10", "2023-02-10")]),
        ("前天下雨了", [("2023-02-11", "2023-02-11")]),
        ("去年五月我们去了日本", [("2022-05-01", "2022-05-31")]),
        ("2023年5月3日出发", [("2023-05-03", "2023-05-03")]),
        ("下周三开会", [("2023-02-22", "2023-02-22")]),
        (
            "yesterday I finally told her what happened last Friday",
            [("2023-02-10", "2023-02-10"), ("2023-02-12", "2023-02-12")],
        ),
        ("昨天和前天都在加班", [("2023-02-11", "2023-02-12")]),  # adjacent days: one range
    ],
)
def test_a_turn_resolves_against_its_own_day(text: str, ranges: list[tuple[str, str]]) -> None:
    assert mentioned_days(text, MONDAY, UTC) == tuple((D(a), D(b)) for a, b in ranges)


@pytest.mark.parametrize(
    "text",
    [
        "I may go there",  # "may" the verb
        "today was fine",  # the turn's own day: its date says so already
        "recently I've been busy",
        "over the last three months",
        "in 2022 I moved to Berlin",  # a year is too wide to lift a turn into a window
        "这阵子很忙",
        "一周一次，每周一去",  # "once a week", "every Monday"
        "帮我查一下周报",  # "a look at the weekly report", not "next week"
        "I'll finish it tomorrowish",
        "",
    ],
)
def test_vague_or_wide_times_are_not_kept(text: str) -> None:
    assert mentioned_days(text, MONDAY, UTC) == ()


def test_the_day_is_the_turn_s_local_day() -> None:
    late = datetime(2023, 2, 13, 17, 30, tzinfo=UTC)  # 01:30 on the 14th in Shanghai
    assert mentioned_days("yesterday", late, ZoneInfo("Asia/Shanghai")) == (
        (D("2023-02-13"), D("2023-02-13")),
    )
    assert mentioned_days("yesterday", late, UTC) == ((D("2023-02-12"), D("2023-02-12")),)


def test_a_list_of_dates_keeps_the_narrowest_few() -> None:
    text = "in March 2022, on 1 May 2022, on 3 June 2022, on 5 July 2022, on 7 August 2022"
    got = mentioned_days(text, MONDAY, UTC)
    assert len(got) == MAX_RANGES
    assert all(first == last for first, last in got)  # the month went first


def test_encoding_round_trip() -> None:
    ranges = ((D("2023-02-10"), D("2023-02-10")), (D("2023-05-01"), D("2023-05-31")))
    text = encode_days(ranges)
    assert text == "2023-02-10..2023-02-10 2023-05-01..2023-05-31"
    assert decode_days(text) == ranges
    assert decode_days("") == decode_days(None) == ()
    assert decode_days("2023-02-30..2023-03-01 2023-05-01..2023-05-31") == ranges[1:]


def test_time_factor_counts_the_days_a_turn_speaks_of() -> None:
    settings = RankSettings()
    window = (D("2023-02-10"), D("2023-02-10"))
    said = datetime(2023, 2, 20, 10, 0, tzinfo=UTC)  # ten days later: no lift of its own
    assert time_factor(said, window, UTC, settings) == 1.0
    friday = ((D("2023-02-10"), D("2023-02-10")),)
    # Speaking of the day is surer than being made on it (`spoken_time_boost`).
    assert time_factor(said, window, UTC, settings, friday) == 2.5
    thursday = ((D("2023-02-08"), D("2023-02-08")),)
    assert time_factor(said, window, UTC, settings, thursday) == 1.5  # near: half
    assert time_factor(None, window, UTC, settings, friday) == 2.5
    assert time_factor(said, None, UTC, settings, friday) == 1.0


def test_a_resolved_day_answers_when() -> None:
    assert not holds_answer(AnswerKind.DATE, "we broke up two weeks ago")
    assert holds_answer(AnswerKind.DATE, "we broke up two weeks ago", dated=True)
    assert not holds_answer(AnswerKind.NUMBER, "we broke up last month", dated=True)


# --- through a real core ---------------------------------------------------------------

TUESDAY = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
RAMEN = "where did we eat ramen on 9 March?"
SAID = "we had ramen at Ichiran yesterday"
"""Said on 10 March: of 9 March. Its twin below says the same in as many words, no day."""
TWIN = "we had ramen at Ichiran afterwards"


@pytest.fixture
async def tuesday(config: Config) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(config, clock=ManualClock(TUESDAY)) as core:
        yield core


async def record(core: MemoryCore, session: str, text: str, at: datetime) -> None:
    await core.record_session(MAIN, session, at, [RecordedMessage("user", "", text, at)])


async def dates_of(core: MemoryCore, text: str) -> list[str | None]:
    rows = await sql(core, "SELECT text, dates FROM chunks ORDER BY id")
    return [row[1] for row in rows if str(row[0]).endswith(text)]


async def test_a_message_is_found_by_the_day_it_speaks_of(tuesday: MemoryCore) -> None:
    """The twin is stored first: were the two equal, it would rank first."""
    morning = TUESDAY.replace(hour=9)
    await record(tuesday, "twin", TWIN, morning)
    await record(tuesday, "said", SAID, morning + timedelta(minutes=5))
    assert await dates_of(tuesday, SAID) == ["2026-03-09..2026-03-09"]
    assert await dates_of(tuesday, TWIN) == [""]
    hits = await tuesday.finder.search(MAIN, RAMEN)
    assert [h.text.removeprefix("user: ") for h in hits] == [SAID, TWIN]
    # A question with no time ranks them as equals (the older first).
    hits = await tuesday.finder.search(MAIN, "where did we eat ramen?")
    assert [h.text.removeprefix("user: ") for h in hits] == [TWIN, SAID]


async def test_archived_and_reindexed_turns_keep_their_days(tuesday: MemoryCore) -> None:
    """Each turn in an archive file of its own (two runs), so neither shows the other."""
    morning = TUESDAY.replace(hour=9)
    await record(tuesday, "twin", TWIN, morning)
    assert (await tuesday.conversation.archive(MAIN)).moved == 1
    await record(tuesday, "said", SAID, morning + timedelta(minutes=5))
    assert (await tuesday.conversation.archive(MAIN)).moved == 1
    for _ in ("archived", "reindexed"):
        assert await dates_of(tuesday, SAID) == ["2026-03-09..2026-03-09"]
        hits = await tuesday.finder.search(
            MAIN, SearchRequest(RAMEN, kinds=[ChunkKind.ARCHIVE_RAW])
        )
        assert [h.text.split(": ", 1)[1] for h in hits] == [SAID, TWIN]
        await tuesday.reindex()
    # The file-only fallback reads the same days from the files.
    hits = await asyncio.to_thread(
        fallback.search_files,
        tuesday.workspace,
        MAIN,
        SearchRequest(RAMEN, today=TUESDAY.date()),
        zone=tuesday.tz,
    )
    assert [h.text.split(": ", 1)[1] for h in hits] == [SAID, TWIN]


async def test_a_question_of_a_day_reaches_a_turn_made_later(tuesday: MemoryCore) -> None:
    """A question naming only a time reads the chunks of that time: those made then and
    those that speak of it, in both languages."""
    await record(tuesday, "s1", "the printer broke again", datetime(2026, 3, 4, 9, tzinfo=UTC))
    await record(
        tuesday, "s2", "my sister came over yesterday", datetime(2026, 3, 5, 9, tzinfo=UTC)
    )
    await record(tuesday, "s3", "我姐姐前天来吃饭了", datetime(2026, 3, 6, 9, tzinfo=UTC))
    await record(tuesday, "s4", "the garden needs water", datetime(2026, 3, 7, 9, tzinfo=UTC))
    for question in ("what happened on 4 March?", "3月4号发生了什么"):
        hits = await tuesday.finder.search(MAIN, question)
        shown = {h.text.removeprefix("user: ") for h in hits}
        assert shown == {
            "the printer broke again",
            "my sister came over yesterday",
            "我姐姐前天来吃饭了",
        }, question


async def test_a_reindex_resolves_messages_stored_before_days_were_kept(
    tuesday: MemoryCore,
) -> None:
    await record(tuesday, "said", SAID, TUESDAY.replace(hour=9))
    await sql_write(tuesday, ("UPDATE chunks SET dates = NULL WHERE kind = 'message'", ()))
    await tuesday.reindex()
    assert await dates_of(tuesday, SAID) == ["2026-03-09..2026-03-09"]


async def test_a_daily_note_keeps_its_days_through_a_reindex(tuesday: MemoryCore) -> None:
    await tuesday.notes.append(MAIN, "the plumber came yesterday", now=TUESDAY)
    for _ in ("appended", "reindexed"):
        assert await dates_of(tuesday, "the plumber came yesterday") == ["2026-03-09..2026-03-09"]
        await tuesday.reindex()


async def test_a_turn_with_look_alike_letters_is_stored_with_its_day(tuesday: MemoryCore) -> None:
    """'APRİL' (a dotted capital I) is April to a case-insensitive match, but lowers to
    'apri̇l': the turn is stored, with the day it names, not refused over a missed lookup."""
    said = "we signed the lease on 12 APR\u0130L and moved on the \u017fixth"
    await record(tuesday, "odd", said, TUESDAY)
    assert await dates_of(tuesday, said) == ["2025-04-12..2025-04-12"]
    [hit] = await tuesday.finder.search(MAIN, "lease")
    assert hit.text.endswith(said)
