"""The runtime around the chat engine: scheduled jobs (quiet-period consolidation, the
daily 04:00 archive) that run once per day even across restarts, and a graceful stop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.conversation.prompting import COMPACT_INSTRUCTIONS
from memory_core.engine import MemoryCore
from testkit.openai_server import FakeOpenAI
from testkit.waiting import turns, until
from tests.conftest import START
from tests.postgres import with_storage
from tests.support import sql

pytestmark = pytest.mark.timeout(60)

ALICE = ScopeKey("peer:alice")


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def offline_config(workspace: Path, **top: Any) -> Config:
    return load_config(None, env=with_storage(), workspace=workspace).model_copy(update=top)


async def schedule_state(core: MemoryCore) -> dict[str, str]:
    return {r[0]: r[1] for r in await sql(core, "SELECT name, last_run FROM schedule_state")}


async def archive_runs(core: MemoryCore) -> int:
    [row] = await sql(core, "SELECT COUNT(*) FROM archive_runs")
    return int(row[0])


# --- quiet-period consolidation ----------------------------------------------------------------


async def test_quiet_consolidation_once_per_day(core: MemoryCore, clock: ManualClock) -> None:
    old, _ = await core.memories.capture(ALICE, "a memory nobody mentions again")
    clock.advance(timedelta(days=400))
    ran = await core.conversation.tick()
    assert "quiet-consolidation" in ran
    # It really consolidated: the stale entry was forgotten, and the audit log says why.
    assert await core.memories.entries(ALICE) == []
    [record] = await core.audit.forgotten(ALICE)
    assert (record.entry_id, record.source) == (old.id, "consolidate")

    clock.advance(timedelta(hours=3))
    assert "quiet-consolidation" not in await core.conversation.tick()
    clock.advance(timedelta(days=1))
    assert "quiet-consolidation" in await core.conversation.tick()


async def test_no_consolidation_within_twenty_minutes_of_a_message(
    core: MemoryCore, clock: ManualClock
) -> None:
    assert "quiet-consolidation" in await core.conversation.tick()
    clock.advance(timedelta(days=1))
    await core.conversation.turn(ALICE, "still talking")
    clock.advance(timedelta(minutes=10))
    assert "quiet-consolidation" not in await core.conversation.tick()
    clock.advance(timedelta(minutes=9))
    assert "quiet-consolidation" not in await core.conversation.tick()
    clock.advance(timedelta(minutes=2))
    assert "quiet-consolidation" in await core.conversation.tick()
    assert (await schedule_state(core))["quiet-consolidation"] == "2026-03-02"


# --- the daily archive -------------------------------------------------------------------------


async def test_daily_archive_at_four_local_time_once_per_day(workspace: Path) -> None:
    # 04:00 in Shanghai is 20:00 UTC the day before.
    config = offline_config(workspace, timezone="Asia/Shanghai")
    clock = ManualClock(datetime(2026, 3, 1, 17, 0, tzinfo=UTC))  # 01:00 local, 2 March
    async with MemoryCore.open(config, clock=clock) as core:
        await core.conversation.turn(ALICE, "a message that waits for the archive")
        ran = await core.conversation.tick()
        assert "daily-archive" not in ran
        assert await archive_runs(core) == 0

        # 04:01 local: the session has been idle long enough to end, so it goes whole.
        clock.advance(timedelta(hours=3, minutes=1))
        assert "daily-archive" in await core.conversation.tick()
        assert await archive_runs(core) == 1
        assert (await core.history.counts(ALICE))["false"] == 0
        assert (await schedule_state(core))["daily-archive"] == "2026-03-02"

        clock.advance(timedelta(hours=1))
        await core.conversation.turn(ALICE, "another message")
        clock.advance(timedelta(hours=1))
        assert "daily-archive" not in await core.conversation.tick()
        assert await archive_runs(core) == 1

        clock.advance(timedelta(hours=20))  # 02:01 local on 3 March
        ran = await core.conversation.tick()
        assert "daily-archive" not in ran
        clock.advance(timedelta(hours=2))  # 04:01 local
        assert "daily-archive" in await core.conversation.tick()
        assert (await schedule_state(core))["daily-archive"] == "2026-03-03"


async def test_jobs_do_not_rerun_after_a_restart(workspace: Path) -> None:
    config = offline_config(workspace)
    clock = ManualClock(START)  # 12:00 UTC
    async with MemoryCore.open(config, clock=clock) as core:
        await core.conversation.turn(ALICE, "hello")
        clock.advance(timedelta(minutes=30))
        ran = await core.conversation.tick()
        assert {"daily-archive", "quiet-consolidation"} <= set(ran)
        runs = await archive_runs(core)

    clock.advance(timedelta(hours=1))
    async with MemoryCore.open(config, clock=clock) as again:
        await again.conversation.turn(ALICE, "back again")
        clock.advance(timedelta(minutes=30))
        ran = await again.conversation.tick()
        assert "daily-archive" not in ran and "quiet-consolidation" not in ran
        assert await archive_runs(again) == runs

    clock.advance(timedelta(days=1))
    async with MemoryCore.open(config, clock=clock) as third:
        ran = await third.conversation.tick()
        assert {"daily-archive", "quiet-consolidation"} <= set(ran)


async def test_two_processes_run_a_daily_job_once(workspace: Path) -> None:
    """Two bot processes of one workspace (on PostgreSQL: two replicas of one database)
    tick at the same moment: the 04:00 archive and the quiet consolidation run in one of
    them, once, and neither runs them again that day."""
    config = offline_config(workspace)
    clock = ManualClock(START)  # 12:00 UTC: past 04:00
    async with (
        MemoryCore.open(config, clock=clock) as first,
        MemoryCore.open(config, clock=clock) as second,
    ):
        await first.conversation.turn(ALICE, "hello")
        await second.conversation.turn(ScopeKey("peer:bob"), "hi")
        clock.advance(timedelta(minutes=30))
        ran = await asyncio.gather(first.conversation.tick(), second.conversation.tick())
        for job in ("daily-archive", "quiet-consolidation"):
            assert sum(job in names for names in ran) == 1, (job, ran)
        assert await archive_runs(first) == 2  # both scopes, archived by one process
        again = await asyncio.gather(first.conversation.tick(), second.conversation.tick())
        assert not {"daily-archive", "quiet-consolidation"} & {n for r in again for n in r}


async def test_a_job_held_by_another_process_is_left_to_it(workspace: Path) -> None:
    config = offline_config(workspace)
    clock = ManualClock(START)
    async with (
        MemoryCore.open(config, clock=clock) as holder,
        MemoryCore.open(config, clock=clock) as other,
    ):
        async with holder.conversation.locks.try_hold("schedule-daily-archive") as mine:
            assert mine
            assert "daily-archive" not in await other.conversation.tick()
        # The holder died before marking it done: the next tick runs it.
        assert "daily-archive" in await other.conversation.tick()


async def test_start_runs_a_tick_and_stop_cancels_it(core: MemoryCore) -> None:
    runtime = core.conversation
    runtime.start()

    async def ticked() -> bool:
        return "quiet-consolidation" in await schedule_state(core)

    await until(ticked, what="the first tick")
    await runtime.stop()
    assert runtime._ticker is None
    with pytest.raises(RuntimeError, match="shutting down"):
        await runtime.turn(ALICE, "too late")


# --- stopping ------------------------------------------------------------------------------


async def test_stop_waits_for_the_turn_then_flushes(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    config = load_config(
        None,
        env=with_storage({"CHATMEM_MODEL": "gpt-fake", "OPENAI_BASE_URL": fake.base_url}),
        workspace=workspace,
    )
    config = config.model_copy(
        update={"llm": config.llm.model_copy(update={"max_retries": 0, "timeout_seconds": 5.0})}
    )
    compactions: list[int] = []

    def respond(body: dict[str, Any]) -> str:
        names = [t["function"]["name"] for t in body.get("tools") or []]
        if names == ["memory_save"]:
            return "NO_REPLY"
        if body["messages"][0]["content"] == COMPACT_INSTRUCTIONS:
            compactions.append(len(fake.requests))
            return "- 摘要：用户聊了很多"
        return "ok"

    fake.set_responder(respond)
    async with MemoryCore.open(config, clock=clock) as core:
        for i in range(4):
            await core.conversation.turn(ALICE, f"第 {i} 句话")
        fake.delay(0.5, text="slow answer")
        turn = asyncio.ensure_future(core.conversation.turn(ALICE, "a slow question"))
        await until(lambda: len(fake.chat_requests()) == 5, what="the slow turn at the model")
        slow_request = len(fake.requests)
        assert not turn.done()

        await core.conversation.stop()
        assert turn.done()
        result = turn.result()  # finished, not cancelled
        assert result.reply == "slow answer"
        stored = await core.history.session_messages(result.session_id, include_compacted=True)
        assert [m.content for m in stored if m.role == "assistant"][-1] == "slow answer"
        # The flush came after the slow turn's request, and compacted the session.
        assert len(compactions) == 1 and compactions[0] > slow_request
        assert [m.content for m in stored if m.role == "summary"] == ["- 摘要：用户聊了很多"]
        requests_after_stop = len(fake.requests)
    # Closing the core stops the runtime again: nothing new to flush, no model call.
    assert len(fake.requests) == requests_after_stop
    assert len(compactions) == 1


async def test_a_core_that_took_no_turn_leaves_open_sessions_alone(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    """A command that opens the workspace beside a running bot (status, the TUI, MCP) and
    closes it must not flush the bot's open sessions through the model: only a process
    that ran turns or schedules owns them."""
    config = load_config(
        None,
        env=with_storage({"CHATMEM_MODEL": "gpt-fake", "OPENAI_BASE_URL": fake.base_url}),
        workspace=workspace,
    )
    fake.set_responder(lambda body: "ok")
    async with MemoryCore.open(config, clock=clock) as bot:
        for i in range(4):
            await bot.conversation.turn(ALICE, f"message {i}")
        assert await bot.history.open_sessions() != []
        before = len(fake.requests)
        async with MemoryCore.open(config, clock=clock) as command:
            assert await command.memories.scopes() != []
        assert len(fake.requests) == before
        await bot.conversation.stop()
        assert len(fake.requests) > before  # the bot's own stop does flush them


async def test_stop_waits_for_a_turn_whose_caller_stopped_waiting(core: MemoryCore) -> None:
    """A caller cancelled while its turn runs (a front end that gave up) leaves the turn
    running under the runtime's shield; `stop()` still waits for it, so the reply is
    stored before the database closes."""
    runtime = core.conversation
    entered = asyncio.Event()
    release = asyncio.Event()
    real_turn = runtime.chat.turn

    async def slow_turn(
        scope: ScopeKey, text: str, *, speaker: str = "", speaker_id: str | None = None
    ) -> Any:
        entered.set()
        await release.wait()
        return await real_turn(scope, text, speaker=speaker, speaker_id=speaker_id)

    runtime.chat.turn = slow_turn  # type: ignore[method-assign]
    flushed: list[bool] = []
    real_flush = runtime._flush_open_sessions

    async def flush() -> None:
        flushed.append(True)
        await real_flush()

    runtime._flush_open_sessions = flush  # type: ignore[method-assign]
    waiting = asyncio.ensure_future(runtime.turn(MAIN, "hello there"))
    await entered.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    stopping = asyncio.ensure_future(runtime.stop())
    await turns(50)  # a stop that did not wait would be flushing by now
    assert not stopping.done() and not flushed  # the turn is still in flight
    release.set()
    await stopping
    history = runtime.history
    session = await history.current_session(MAIN)
    assert session is not None
    assert [m.content for m in await history.session_messages(session.id)][:1] == ["hello there"]


async def test_quiet_consolidation_waits_for_the_active_hours_to_end(
    workspace: Path, clock: ManualClock
) -> None:
    """The quiet period is 20 minutes without messages *and* outside the
    active hours (here 08:00-23:00 UTC; START is 12:00)."""
    config = offline_config(workspace)
    config = config.model_copy(
        update={"schedule": config.schedule.model_copy(update={"active_hours": "08:00-23:00"})}
    )
    async with MemoryCore.open(config, clock=clock) as core:
        clock.advance(timedelta(hours=1))  # 13:00: quiet, but people are up
        assert "quiet-consolidation" not in await core.conversation.tick()
        clock.advance(timedelta(hours=10, minutes=1))  # 23:01
        assert "quiet-consolidation" in await core.conversation.tick()


@pytest.mark.parametrize(
    ("hours", "inside", "outside"),
    [("08:00-23:00", "12:00", "23:30"), ("22:00-06:00", "02:00", "12:00"), ("", None, "12:00")],
)
def test_active_hours_may_wrap_past_midnight(hours: str, inside: str | None, outside: str) -> None:
    from datetime import time as clock_time

    from memory_core.config.memory import within_hours

    if inside is not None:
        assert within_hours(hours, clock_time.fromisoformat(inside))
    assert not within_hours(hours, clock_time.fromisoformat(outside))
