"""Archive runs with a ManualClock: pending before any work, age
buckets and the month-boundary example, slug rules, backoff and the backlog event,
trigger rules, monthly summaries hiding daily ones, offline summaries, and the index."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock, parse_when
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.conversation.archive import (
    SLUG_MAX,
    backoff_delay,
    day_activity,
    make_slug,
    plan_archive,
)
from memory_core.conversation.archiver import Due
from memory_core.engine import MemoryCore
from memory_core.notes.event_log import decision_events, message_events
from memory_core.recall.request import SearchRequest
from memory_core.storage.sessions import ArchiveState, NewMessage, StoredMessage
from testkit.openai_server import FakeOpenAI, Reply
from tests.postgres import with_storage
from tests.support import sql, sql_write

pytestmark = [pytest.mark.storage, pytest.mark.timeout(60)]

ALICE = ScopeKey("peer:alice")
JAN31 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
SLUG = re.compile(r"^[a-z0-9-]{1,32}$")


def at(year: int, month: int, day: int, hour: int = 10) -> datetime:
    return datetime(year, month, day, hour, 0, tzinfo=UTC)


def msg(n: int, when: datetime, text: str = "", role: str = "user") -> StoredMessage:
    return StoredMessage(
        id=n,
        scope="main",
        session_id="s",
        role=role,
        speaker="",
        content=text or f"message {n}",
        created_at=when,
        archived=ArchiveState.FALSE,
        archive_attempts=0,
        archive_next_at=None,
        compacted=False,
        meta={},
    )


@pytest.fixture
def jan31() -> ManualClock:
    return ManualClock(JAN31)


@pytest.fixture
async def offline(config: Config, jan31: ManualClock) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(config, clock=jan31) as core:
        yield core


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def online(
    fake: FakeOpenAI, workspace: Path, jan31: ManualClock
) -> AsyncIterator[MemoryCore]:
    config = load_config(
        None,
        env=with_storage({"CHATMEM_MODEL": "gpt-fake", "OPENAI_BASE_URL": fake.base_url}),
        workspace=workspace,
    )
    config = config.model_copy(
        update={"llm": config.llm.model_copy(update={"max_retries": 0, "timeout_seconds": 2.0})}
    )
    async with MemoryCore.open(config, clock=jan31) as core:
        yield core


async def add(
    core: MemoryCore, scope: ScopeKey, when: datetime, text: str, role: str = "user"
) -> StoredMessage:
    history = core.history
    session = await history.open_session(scope, when)
    return await history.add_message(NewMessage(scope, session.id, role, text, when))


async def message_row(core: MemoryCore, message_id: int) -> dict[str, Any]:
    [row] = await sql(
        core,
        "SELECT archived, archive_attempts, archive_failed_at, archive_next_at FROM messages"
        " WHERE id = ?",
        message_id,
    )
    return {
        "archived": row[0],
        "attempts": row[1],
        "failed_at": parse_when(row[2]) if row[2] else None,
        "next_at": parse_when(row[3]) if row[3] else None,
    }


def rel(core: MemoryCore, scope: ScopeKey, name: str) -> str:
    return core.workspace.relative(core.workspace.memory_dir(scope) / name)


# --- pure rules --------------------------------------------------------------------------------


def test_month_boundary_example() -> None:
    """On 31 January December goes daily and November monthly; on 1 February December
    goes monthly too."""
    messages = [
        msg(1, at(2026, 1, 29)),  # 2 days
        msg(2, at(2026, 1, 26)),  # 5 days: still raw
        msg(3, at(2026, 1, 25)),  # 6 days: daily
        msg(4, at(2026, 1, 3)),
        msg(5, at(2025, 12, 31)),
        msg(6, at(2025, 12, 1)),
        msg(7, at(2025, 11, 30)),
        msg(8, at(2025, 11, 2)),
        msg(9, at(2025, 10, 5)),
    ]
    plan = plan_archive(messages, JAN31, UTC)
    assert {d.isoformat(): [m.id for m in g] for d, g in plan.raw.items()} == {
        "2026-01-29": [1],
        "2026-01-26": [2],
    }
    assert {d.isoformat(): [m.id for m in g] for d, g in plan.daily.items()} == {
        "2026-01-25": [3],
        "2026-01-03": [4],
        "2025-12-31": [5],
        "2025-12-01": [6],
    }
    assert {k: [m.id for m in g] for k, g in plan.monthly.items()} == {
        "2025-11": [7, 8],
        "2025-10": [9],
    }

    feb1 = plan_archive(messages, datetime(2026, 2, 1, 12, 0, tzinfo=UTC), UTC)
    assert {k: [m.id for m in g] for k, g in feb1.monthly.items()} == {
        "2025-12": [5, 6],
        "2025-11": [7, 8],
        "2025-10": [9],
    }
    assert sorted(d.isoformat() for d in feb1.daily) == ["2026-01-03", "2026-01-25", "2026-01-26"]
    assert [d.isoformat() for d in feb1.raw] == ["2026-01-29"]


def test_plan_buckets_by_local_day() -> None:
    shanghai = zoneinfo.ZoneInfo("Asia/Shanghai")
    late = datetime(2025, 11, 30, 20, 0, tzinfo=UTC)  # 1 December 04:00 in Shanghai
    assert list(plan_archive([msg(1, late)], JAN31, UTC).monthly) == ["2025-11"]
    assert [d.isoformat() for d in plan_archive([msg(1, late)], JAN31, shanghai).daily] == [
        "2025-12-01"
    ]


def test_slug_from_keywords() -> None:
    slug = make_slug(
        ["Deploy to Cloudflare workers", "the cloudflare deploy hit a timeout"], "abcdef12", set()
    )
    assert SLUG.match(slug)
    assert slug == "deploy-cloudflare-workers"  # most frequent first, ties in order


@pytest.mark.parametrize(
    "texts",
    [["部署到云上遇到了超时"], ["the and for you"], ["a b c 12 2026 !!"], [""], []],
)
def test_slug_falls_back_to_short_id(texts: list[str]) -> None:
    assert make_slug(texts, "ABCDEF1234", set()) == "mem-abcdef12"


def test_slug_is_bounded() -> None:
    slug = make_slug(
        [
            "internationalization localization accessibility " * 3,
            "supercalifragilisticexpialidociously",
        ],
        "abcdef12",
        set(),
    )
    assert SLUG.match(slug) and len(slug) <= SLUG_MAX
    assert slug.startswith("internationalization")
    huge = make_slug(["x" + "y" * 60], "abcdef12", set())
    assert huge == "mem-abcdef12"


def test_slug_collisions_get_numbered() -> None:
    texts = ["cloudflare deploy"]
    first = make_slug(texts, "abcdef12", set())
    second = make_slug(texts, "abcdef12", {first})
    third = make_slug(texts, "abcdef12", {first, second})
    assert (first, second, third) == (
        "cloudflare-deploy",
        "cloudflare-deploy-2",
        "cloudflare-deploy-3",
    )
    long_texts = ["aaaaaaaaaa bbbbbbbbbb cccccccccc"]
    base = make_slug(long_texts, "abcdef12", set())
    assert len(base) == 32
    numbered = make_slug(long_texts, "abcdef12", {base})
    assert numbered.endswith("-2") and len(numbered) <= SLUG_MAX and SLUG.match(numbered)
    assert make_slug(["中文"], "abcdef12", {"mem-abcdef12"}) == "mem-abcdef12-2"


def test_backoff_schedule() -> None:
    schedule = [10, 30, 120, 360, 720]
    delays = [backoff_delay(n, schedule, 5) for n in range(1, 8)]
    assert delays == [
        timedelta(minutes=10),
        timedelta(minutes=30),
        timedelta(hours=2),
        timedelta(hours=6),
        timedelta(hours=12),
        timedelta(hours=24),  # past the last attempt: the wait is extended
        timedelta(hours=24),
    ]


# --- runs --------------------------------------------------------------------------------------


async def test_age_buckets_write_their_files_offline(offline: MemoryCore) -> None:
    await add(offline, MAIN, at(2026, 1, 29), "We moved the deploy to Cloudflare workers")
    await add(offline, MAIN, at(2026, 1, 29, 11), "ok, noted", role="assistant")
    await add(offline, MAIN, at(2026, 1, 20), "周二讨论了季度预算")
    await add(offline, MAIN, at(2025, 12, 15), "十二月的年会在杭州")
    await add(offline, MAIN, at(2025, 11, 10), "十一月买了新电脑")
    await add(offline, MAIN, at(2025, 11, 12), "十一月还换了显示器")
    report = await offline.conversation.archive(MAIN)
    assert (report.moved, report.summarized, report.failed) == (2, 4, 0)

    raw = [f for f in report.files if f.startswith("memory/2026-01-29-")]
    assert len(raw) == 1
    assert re.fullmatch(r"memory/2026-01-29-[a-z0-9-]{1,32}\.md", raw[0])
    assert "cloudflare" in raw[0]
    raw_text = (offline.workspace.root / raw[0]).read_text(encoding="utf-8")
    assert "user: We moved the deploy to Cloudflare workers" in raw_text
    assert "assistant: ok, noted" in raw_text

    assert sorted(f for f in report.files if "/summary/" in f) == [
        "memory/summary/2025-11.md",
        "memory/summary/2025-12-15.md",
        "memory/summary/2026-01-20.md",
    ]
    monthly = (offline.workspace.root / "memory/summary/2025-11.md").read_text(encoding="utf-8")
    assert "extractive summary (no model configured)" in monthly
    assert "- 十一月买了新电脑" in monthly and "- 十一月还换了显示器" in monthly
    daily = (offline.workspace.root / "memory/summary/2026-01-20.md").read_text(encoding="utf-8")
    assert daily.startswith("## Day 2026-01-20") and "- 周二讨论了季度预算" in daily
    assert await offline.history.counts(MAIN) == {"false": 0, "pending": 0, "true": 6}


async def test_scoped_archive_stays_in_the_scope_directory(offline: MemoryCore) -> None:
    await add(offline, ALICE, at(2026, 1, 30), "alice talked about kangaroos")
    await add(offline, ALICE, at(2025, 12, 2), "alice in december")
    report = await offline.conversation.archive(ALICE)
    base = offline.workspace.relative(offline.workspace.memory_dir(ALICE))
    assert base.startswith("memory/scopes/")
    assert all(f.startswith(base + "/") for f in report.files)
    assert f"{base}/summary/2025-12-02.md" in report.files
    assert not (offline.workspace.root / "memory/summary").exists()


async def test_pending_before_the_model_is_called(online: MemoryCore, fake: FakeOpenAI) -> None:
    seen: list[dict[str, int]] = []

    async def respond(body: dict[str, Any]) -> str:
        seen.append(await online.history.counts(MAIN))
        return "- 用户讨论了预算和年会"

    fake.set_responder(respond)
    for day in (3, 4, 5):
        await add(online, MAIN, at(2026, 1, day), f"一月{day}日的事情")
    await add(online, MAIN, at(2025, 11, 5), "十一月的事情")
    assert await online.history.counts(MAIN) == {"false": 4, "pending": 0, "true": 0}
    report = await online.conversation.archive(MAIN)
    assert report.summarized == 4 and report.failed == 0
    assert seen[0] == {"false": 0, "pending": 4, "true": 0}
    assert seen[-1] == {"false": 0, "pending": 1, "true": 3}
    prompts = [b["messages"][0]["content"] for b in fake.chat_requests()]
    assert [p for p in prompts if "日期 / date: 2026-01-03" in p]
    assert [p for p in prompts if "月份 / month: 2025-11" in p]
    text = (online.workspace.root / "memory/summary/2025-11.md").read_text(encoding="utf-8")
    assert "model summary" in text and "- 用户讨论了预算和年会" in text
    assert await online.history.counts(MAIN) == {"false": 0, "pending": 0, "true": 4}


async def test_failed_summaries_back_off_then_backlog(
    online: MemoryCore, fake: FakeOpenAI, jan31: ManualClock
) -> None:
    fake.set_responder(lambda body: Reply(status=500))
    message = await add(online, MAIN, at(2026, 1, 10), "一月十日的事情")
    archiver = online.conversation.archiver
    waits = [timedelta(minutes=m) for m in (10, 30, 120, 360, 720, 1440)]
    for attempt, wait in enumerate(waits, start=1):
        failed_at = online.now()
        report = await archiver.run(MAIN)
        assert report.failed == 1
        row = await message_row(online, message.id)
        assert row == {
            "archived": "false",
            "attempts": attempt,
            "failed_at": failed_at,
            "next_at": failed_at + wait,
        }, f"after failure {attempt}"
        backlog = await online.audit.events(MAIN, "archive_backlog")
        assert len(backlog) == max(0, attempt - 4)
        assert report.backlog is (attempt >= 5)
        # Not due before its time: a run in between does not touch it.
        calls = len(fake.chat_requests())
        jan31.advance(wait - timedelta(minutes=1))
        await archiver.run(MAIN)
        assert len(fake.chat_requests()) == calls
        jan31.advance(timedelta(minutes=1))
    [latest, *_] = await online.audit.events(MAIN, "archive_backlog")
    assert latest.detail["attempts"] == 6

    fake.set_responder(lambda body: "- 一月十日的要点")
    report = await archiver.run(MAIN)
    assert (report.summarized, report.failed) == (1, 0)
    row = await message_row(online, message.id)
    assert (row["archived"], row["next_at"]) == ("true", None)
    assert (online.workspace.root / "memory/summary/2026-01-10.md").exists()


async def test_trigger_rules(offline: MemoryCore, jan31: ManualClock) -> None:
    archiver = offline.conversation.archiver
    assert not await archiver.due(ALICE, offline.now())
    for i in range(100):
        await add(offline, ALICE, offline.now(), f"message {i}")
    assert not await archiver.due(ALICE, offline.now())  # 100 is not more than 100
    await add(offline, ALICE, offline.now(), "one more")
    assert await archiver.due(ALICE, offline.now())

    await archiver.run(ALICE)
    assert not await archiver.due(ALICE, offline.now())  # nothing unarchived
    jan31.advance(timedelta(hours=1))
    later = await add(offline, ALICE, offline.now(), "later")
    await offline.history.close_session(later.session_id, offline.now())
    jan31.advance(timedelta(hours=4, minutes=59))
    assert not await archiver.due(ALICE, offline.now())
    jan31.advance(timedelta(minutes=1))  # 6 h since the last run
    assert await archiver.due(ALICE, offline.now()) is Due.ENDED


async def test_interval_pass_leaves_an_open_session_whole(
    offline: MemoryCore, jan31: ManualClock
) -> None:
    """A session still going is not cut between two archive files by the interval pass:
    recall reads a turn's neighbours in its own file, so a cut loses the exchange."""
    archiver = offline.conversation.archiver
    history = offline.history
    first = await add(offline, ALICE, offline.now(), "what flavour did you make?")
    for hour in range(7):  # a session that keeps going, never idle long enough to close
        jan31.advance(timedelta(hours=1))
        await add(offline, ALICE, offline.now(), f"still talking, hour {hour}")
    assert await archiver.due(ALICE, offline.now()) is None  # only an open session waits
    ran = await offline.conversation.tick(offline.now())  # the daily pass included
    assert not [job for job in ran if job.startswith("archive:")]
    assert (await message_row(offline, first.id))["archived"] == "false"
    reply = await add(offline, ALICE, offline.now(), "chocolate and vanilla swirl")
    await history.close_session(first.session_id, offline.now())
    report = await archiver.run(ALICE, whole_sessions=True)
    assert report.moved == 9 and len(report.files) == 1
    text = (offline.workspace.root / report.files[0]).read_text(encoding="utf-8")
    assert "what flavour did you make?" in text and "chocolate and vanilla swirl" in text
    assert (await message_row(offline, reply.id))["archived"] == "true"


async def test_trigger_six_hours_after_the_oldest_unarchived(
    offline: MemoryCore, jan31: ManualClock
) -> None:
    archiver = offline.conversation.archiver
    await add(offline, ALICE, offline.now(), "first words")
    jan31.advance(timedelta(hours=5, minutes=59))
    more = await add(offline, ALICE, offline.now(), "more words")
    await offline.history.close_session(more.session_id, offline.now())
    assert not await archiver.due(ALICE, offline.now())
    jan31.advance(timedelta(minutes=1))
    assert await archiver.due(ALICE, offline.now())
    assert await archiver.last_run(ALICE) is None


async def test_monthly_summary_hides_daily_summaries(
    offline: MemoryCore, jan31: ManualClock
) -> None:
    await add(offline, ALICE, at(2025, 12, 15), "zebra migration plan for the zoo")
    await offline.conversation.archive(ALICE)
    daily = rel(offline, ALICE, "summary/2025-12-15.md")
    hits = await offline.finder.search(ALICE, SearchRequest("zebra migration", min_score=0.0))
    assert [h.path for h in hits] == [daily]

    jan31.set(datetime(2026, 2, 1, 12, 0, tzinfo=UTC))
    await add(offline, ALICE, at(2025, 12, 20), "yak shaving session before christmas")
    report = await offline.conversation.archive(ALICE)
    monthly = rel(offline, ALICE, "summary/2025-12.md")
    assert report.files == [monthly]
    assert await offline.finder.search(ALICE, SearchRequest("zebra migration", min_score=0.0)) == []
    assert [
        h.path
        for h in await offline.finder.search(ALICE, SearchRequest("yak shaving", min_score=0.0))
    ] == [monthly]
    assert (offline.workspace.root / daily).exists()  # hidden from search, not deleted


async def test_archived_messages_leave_the_index(offline: MemoryCore, jan31: ManualClock) -> None:
    for i in range(3):
        await offline.conversation.chat.turn(ALICE, f"kangaroo sighting number {i}")
    message_hits = await offline.finder.search(
        ALICE, SearchRequest("kangaroo", kinds=[ChunkKind.MESSAGE])
    )
    # A hit shows its exchange: the three lines may come as one hit or several.
    shown = "\n".join(h.text for h in message_hits)
    assert all(f"kangaroo sighting number {i}" in shown for i in range(3))
    jan31.advance(timedelta(minutes=5))
    report = await offline.conversation.archive(ALICE)
    assert report.moved == 3  # the user's lines (offline notices are not stored)
    assert (
        await offline.finder.search(ALICE, SearchRequest("kangaroo", kinds=[ChunkKind.MESSAGE]))
        == []
    )
    hits = await offline.finder.search(ALICE, "kangaroo sighting")
    assert hits and {h.kind for h in hits} == {ChunkKind.ARCHIVE_RAW}
    assert hits[0].path == report.files[0]
    assert re.fullmatch(r".*/2026-01-31-[a-z0-9-]+\.md", hits[0].path)
    assert "kangaroo" in hits[0].path


async def test_same_day_runs_do_not_overwrite_each_other(
    offline: MemoryCore, jan31: ManualClock
) -> None:
    await add(offline, ALICE, at(2026, 1, 30), "cloudflare deploy failed")
    first = await offline.conversation.archive(ALICE)
    await add(offline, ALICE, at(2026, 1, 30, 15), "cloudflare deploy failed")
    second = await offline.conversation.archive(ALICE)
    assert first.files == [rel(offline, ALICE, "2026-01-30-cloudflare-deploy-failed.md")]
    assert second.files == [rel(offline, ALICE, "2026-01-30-cloudflare-deploy-failed-2.md")]
    for name in (*first.files, *second.files):
        assert "cloudflare deploy failed" in (offline.workspace.root / name).read_text(
            encoding="utf-8"
        )


async def test_pending_left_by_a_crashed_run_is_archived_next_time(offline: MemoryCore) -> None:
    """A run that died between marking and finishing leaves 'pending' rows; the next run
    (which holds the scope's archive lock, so no other run is alive) takes them over."""
    message = await add(offline, ALICE, at(2026, 1, 30), "stranded by a crash")
    await sql_write(
        offline, ("UPDATE messages SET archived = 'pending' WHERE id = ?", (message.id,))
    )
    report = await offline.conversation.archive(ALICE)
    assert report.moved == 1
    assert (await message_row(offline, message.id))["archived"] == "true"


def test_day_activity_counts_what_only_the_event_log_has() -> None:
    when = at(2026, 1, 20)
    events = [
        *message_events("user", "what did I say about the budget?", when, "s1"),
        *message_events("tool", "[]", when, "s1", "memory_search", {"arguments": "{}"}),
        *message_events("tool", "ok", when, "s1", "memory_search", {"arguments": "{}"}),
        *message_events("tool", "saved", when, "s1", "memory_save", {"arguments": "{}"}),
        *message_events("assistant", "sorry", when, "s1", meta={"error": "timeout"}),
        *decision_events("extract", [("add", "a1"), ("add", "a2"), ("reinforce", "b")], when, "s1"),
    ]
    assert day_activity(events) == (
        "Event log: 3 tool calls (memory_save 1, memory_search 2); "
        "long-term add 2, reinforce 1; 1 model failures."
    )
    assert day_activity(message_events("user", "hi", when, "s1")) == ""


async def test_a_daily_summary_carries_the_day_s_event_log(offline: MemoryCore) -> None:
    day = at(2026, 1, 20)
    await add(offline, MAIN, day, "周二讨论了季度预算")
    await offline.event_log.record(
        MAIN, *message_events("tool", "[]", day, "s1", "memory_search", {"arguments": "{}"})
    )
    await offline.event_log.record(MAIN, *decision_events("capture", [("add", "x")], day, None))
    await add(offline, MAIN, at(2026, 1, 19), "周一没有别的事")
    await offline.conversation.archive(MAIN)
    summary = offline.workspace.root / "memory/summary"
    with_log = (summary / "2026-01-20.md").read_text(encoding="utf-8")
    assert "Event log: 1 tool call (memory_search 1); long-term add 1." in with_log
    assert "Event log" not in (summary / "2026-01-19.md").read_text(encoding="utf-8")
