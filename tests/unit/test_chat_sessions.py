"""Chat sessions with the model: `/new` extracts, merges, audits and counts; extraction once
per session, retried after a failure; idle sessions closed; the full lifecycle; and the
flush before compaction."""

from __future__ import annotations

import itertools
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.merge_values import ChangeKind
from memory_core.conversation.prompting import (
    COMPACT_INSTRUCTIONS,
    FLUSH_INSTRUCTIONS,
)
from memory_core.conversation.tools import MEMORY_SAVE
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import parse_memory
from testkit.openai_server import FakeOpenAI, Reply, ToolCall
from tests.unit.chat_support import (
    ALICE,
    everything,
    fake_fixture,  # noqa: F401  (a fixture)
    history_of,
    mcore_fixture,  # noqa: F401  (a fixture)
    model_config,
    session_messages,
    system_of,
    turn_requests,
)

pytestmark = pytest.mark.timeout(60)


# --- /new with the model ---------------------------------------------------------------------


async def test_new_extracts_merges_audits_and_counts(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    pytest_pref, _ = await mcore.memories.capture(
        ALICE, "用户喜欢用 pytest 写测试", category="preference"
    )
    city, _ = await mcore.memories.capture(ALICE, "用户住在杭州西湖区", category="fact")
    clock.advance(timedelta(hours=1))
    first = await mcore.conversation.turn(ALICE, "我还是用 pytest 写测试")
    await mcore.conversation.turn(ALICE, "我搬到了杭州西湖区附近，也开始学日语和吉他")
    clock.advance(timedelta(minutes=5))
    fake.reply_json(
        [
            {"content": "用户在学日语", "category": "fact", "importance": "medium"},
            {"content": "用户在学吉他", "category": "skill_usage", "importance": "low"},
            {"content": "用户下周三要交季度报告", "category": "todo", "importance": "high"},
            {
                "content": "用户喜欢用 pytest 写测试",
                "category": "preference",
                "matches": pytest_pref.id,
            },
            {"content": "用户住在杭州", "category": "fact", "matches": city.id},
        ]
    )
    done = await mcore.conversation.new_session(ALICE)
    assert done.closed_session == first.session_id
    assert done.result is not None
    assert done.reply == "New session started. Learned: 3 new, 2 reinforced."
    assert (done.result.count(ChangeKind.ADDED), done.result.count(ChangeKind.REINFORCED)) == (3, 2)

    parsed = parse_memory(mcore.memories.path(ALICE).read_text(encoding="utf-8"))
    assert parsed.quarantined == []
    by_content = {e.content: e for e in parsed.entries}
    assert len(by_content) == 5
    # Used in the session and confirmed by the model: reinforced once, not twice.
    assert by_content["用户喜欢用 pytest 写测试"].hits == 1
    assert by_content["用户喜欢用 pytest 写测试"].score == pytest.approx(0.68)
    assert by_content["用户住在杭州西湖区"].hits == 1
    assert by_content["用户下周三要交季度报告"].score == 0.8
    assert by_content["用户在学吉他"].score == 0.4
    assert by_content["用户在学日语"].source_session == first.session_id

    records = [r for r in await mcore.audit.recent(ALICE) if r.at == mcore.now()]
    assert sorted(r.action for r in records) == ["add"] * 3 + ["reinforce"] * 2
    assert {r.source for r in records} == {"extract"}
    session = await mcore.history.get_session(first.session_id)
    assert session is not None and session.status == "extracted"
    # The model saw the conversation and the existing memories with their ids.
    prompt = everything(fake.chat_requests()[-1])
    assert "我还是用 pytest 写测试" in prompt and f"[{pytest_pref.id}]" in prompt
    # A new session is open for the next message.
    nxt = await mcore.conversation.turn(ALICE, "新的一天")
    assert nxt.session_id != first.session_id


async def test_new_reply_in_chinese(mcore: MemoryCore, fake: FakeOpenAI) -> None:
    await mcore.conversation.turn(ALICE, "我喜欢喝乌龙茶，不加糖")
    fake.reply_json([{"content": "用户喜欢喝不加糖的乌龙茶", "category": "preference"}])
    done = await mcore.conversation.new_session(ALICE, chinese=True)
    assert done.reply == "新会话已开始。记住了 1 条新记忆，强化了 0 条。"


async def test_extraction_is_idempotent_per_session(mcore: MemoryCore, fake: FakeOpenAI) -> None:
    first = await mcore.conversation.turn(ALICE, "我喜欢喝乌龙茶，不加糖")
    fake.reply_json([{"content": "用户喜欢喝不加糖的乌龙茶", "category": "preference"}])
    await mcore.conversation.new_session(ALICE)
    path = mcore.memories.path(ALICE)
    text, backup = path.read_text(encoding="utf-8"), mcore.workspace.backup_path(ALICE)
    backup_text = backup.read_text(encoding="utf-8") if backup.exists() else None
    calls = len(fake.chat_requests())
    audit_before = len(await mcore.audit.recent(ALICE))

    fake.reply_json([{"content": "用户喜欢喝不加糖的乌龙茶", "category": "preference"}])
    again = await mcore.conversation.chat.extract_session(ALICE, first.session_id)
    assert again is not None and again.skipped and again.changes == []
    assert len(fake.chat_requests()) == calls  # not even a model call
    assert path.read_text(encoding="utf-8") == text
    assert (backup.read_text(encoding="utf-8") if backup.exists() else None) == backup_text
    assert len(await mcore.audit.recent(ALICE)) == audit_before
    [entry] = await mcore.memories.entries(ALICE)
    assert entry.hits == 0


async def test_failed_extraction_is_retried_later(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    first = await mcore.conversation.turn(ALICE, "我喜欢喝乌龙茶，不加糖")
    fake.fail(500, times=1, retry_after=0)
    done = await mcore.conversation.new_session(ALICE)
    assert done.retry_later and done.result is None
    assert "retried later" in done.reply
    history = mcore.history
    session = await history.get_session(first.session_id)
    assert session is not None and session.status == "extract_failed"
    assert session.extract_attempts == 1
    assert session.next_extract_at is not None and session.next_extract_at > mcore.now()
    assert session.next_extract_at == mcore.now() + timedelta(minutes=5)
    assert await mcore.memories.entries(ALICE) == []

    calls = len(fake.chat_requests())
    assert await mcore.conversation.chat.close_idle_sessions() == 0  # not due yet
    assert len(fake.chat_requests()) == calls

    clock.advance(timedelta(minutes=6))
    fake.fail(503, times=1, retry_after=0)
    assert await mcore.conversation.chat.close_idle_sessions() == 0
    session = await history.get_session(first.session_id)
    assert session is not None and session.extract_attempts == 2
    assert session.next_extract_at == mcore.now() + timedelta(minutes=30)

    clock.advance(timedelta(minutes=31))
    fake.reply_json([{"content": "用户喜欢喝不加糖的乌龙茶", "category": "preference"}])
    assert await mcore.conversation.chat.close_idle_sessions() == 1
    session = await history.get_session(first.session_id)
    assert session is not None and session.status == "extracted"
    assert session.next_extract_at is None
    assert [e.content for e in await mcore.memories.entries(ALICE)] == ["用户喜欢喝不加糖的乌龙茶"]
    assert await mcore.conversation.chat.close_idle_sessions() == 0  # nothing left to do


async def test_idle_session_is_closed_and_extracted(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    first = await mcore.conversation.turn(ALICE, "我决定下个月开始学游泳")
    clock.advance(timedelta(minutes=119))
    assert await mcore.conversation.chat.close_idle_sessions() == 0
    session = await mcore.history.get_session(first.session_id)
    assert session is not None and session.status == "open"

    clock.advance(timedelta(minutes=2))
    fake.reply_json([{"content": "用户决定下个月开始学游泳", "category": "decision"}])
    assert await mcore.conversation.chat.close_idle_sessions() == 1
    session = await mcore.history.get_session(first.session_id)
    assert session is not None and session.status == "extracted"
    assert [e.content for e in await mcore.memories.entries(ALICE)] == ["用户决定下个月开始学游泳"]
    nxt = await mcore.conversation.turn(ALICE, "新的话题")
    assert nxt.session_id != first.session_id


def matching_responder(content: str, extra: list[str]) -> Any:
    """An extraction model that restates `content` (naming its id once it exists) and adds one
    new memory per call, taken from `extra`."""
    queue = list(extra)

    def respond(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Output only a JSON array" not in prompt:
            return "ok"
        item: dict[str, Any] = {"content": content, "category": "preference"}
        found = re.search(r"^\[(\w+)\] " + re.escape(content) + "$", prompt, re.MULTILINE)
        if found:
            item["matches"] = found.group(1)
        return json.dumps([item, {"content": queue.pop(0), "category": "fact"}], ensure_ascii=False)

    return respond


async def test_memory_mentioned_in_three_sessions_accumulates(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    content = "用户偏好用 pytest 写测试"
    fake.set_responder(matching_responder(content, ["用户养猫", "用户会弹钢琴", "用户住在苏州"]))
    scores, counts = [], []
    for _ in range(3):
        await mcore.conversation.turn(ALICE, "我写测试一直用 pytest")
        await mcore.conversation.new_session(ALICE)
        entries = {e.content: e for e in await mcore.memories.entries(ALICE)}
        scores.append(entries[content].score)
        counts.append(len(entries))
        clock.advance(timedelta(days=1))
    assert counts == [2, 3, 4]
    assert scores[0] == 0.6
    assert scores[1] > scores[0] and scores[2] > scores[1]
    assert scores[2] == pytest.approx(0.744)
    final = {e.content: e for e in await mcore.memories.entries(ALICE)}[content]
    assert final.hits >= 2


async def test_full_lifecycle(mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock) -> None:
    await mcore.conversation.turn(ALICE, "我写 Python 测试都用 pytest")
    fake.reply_json([{"content": "用户写 Python 测试都用 pytest", "category": "preference"}])
    await mcore.conversation.new_session(ALICE)
    [entry] = await mcore.memories.entries(ALICE)
    assert "用户写 Python 测试都用 pytest" in mcore.memories.path(ALICE).read_text(encoding="utf-8")

    clock.advance(timedelta(hours=1))
    await mcore.conversation.turn(ALICE, "早上好")
    assert "用户写 Python 测试都用 pytest" in system_of(turn_requests(fake)[-1])

    clock.advance(timedelta(days=400))
    result = await mcore.memories.consolidate(ALICE)
    assert result.count(ChangeKind.FORGOTTEN) == 1
    assert await mcore.memories.entries(ALICE) == []
    await mcore.conversation.new_session(ALICE)
    await mcore.conversation.turn(ALICE, "早上好，今天做什么")
    assert "pytest" not in everything(turn_requests(fake)[-1])
    [forgotten] = await mcore.audit.forgotten(ALICE)
    assert (forgotten.entry_id, forgotten.content) == (entry.id, "用户写 Python 测试都用 pytest")
    assert forgotten.source == "consolidate"
    assert forgotten.new_score is None


# --- flush before compaction ----------------------------------------------------------------------


def flush_responder(saved: str, summary: str, calls: dict[str, int]) -> Any:
    def respond(body: dict[str, Any]) -> Reply | str:
        names = [t["function"]["name"] for t in body.get("tools") or []]
        system = str(body["messages"][0]["content"])
        if names == ["memory_save"]:
            calls["flush"] += 1
            if body["messages"][-1]["role"] == "tool":
                return "NO_REPLY"
            return Reply(
                tool_calls=(ToolCall("memory_save", {"content": saved, "target": "daily"}),)
            )
        if system == COMPACT_INSTRUCTIONS:
            calls["compact"] += 1
            return summary
        return "ok"

    return respond


async def test_flush_before_compaction(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    config = model_config(fake, workspace, context_tokens=400, keep_after_compaction=4)
    calls = {"flush": 0, "compact": 0}
    summary = "- 用户在计划云南旅行，预算一万元"
    fake.set_responder(flush_responder("用户计划十月去云南旅行", summary, calls))
    async with MemoryCore.open(config, clock=clock) as core:
        replies = []
        session_id = ""
        turns = 0
        while calls["compact"] == 0 and turns < 20:
            result = await core.conversation.turn(
                ALICE, f"第{turns}轮：我们继续讨论云南旅行的行程安排和住宿细节"
            )
            replies.append(result.reply)
            session_id = result.session_id
            clock.advance(timedelta(minutes=1))
            turns += 1
        assert calls == {"flush": 2, "compact": 1}, "no flush happened"
        assert 3 <= turns < 20
        assert set(replies) == {"ok"}  # NO_REPLY never reaches the user

        flushes = [b for b in fake.chat_requests() if b.get("tools") == [MEMORY_SAVE]]
        assert len(flushes) == 2
        assert flushes[0]["messages"][0] == {"role": "system", "content": FLUSH_INSTRUCTIONS}
        daily = core.workspace.daily_path(ALICE, core.notes.today()).read_text(encoding="utf-8")
        assert "用户计划十月去云南旅行" in daily

        stored = await session_messages(core, session_id)
        summaries = [m for m in stored if m.role == "summary"]
        assert [m.content for m in summaries] == [summary]
        talk = [m for m in stored if m.role in ("user", "assistant")]
        assert all(m.compacted for m in talk[:-4])
        assert not any(m.compacted for m in talk[-4:])
        session = await core.history.get_session(session_id)
        assert session is not None and session.flushed_at is not None

        await core.conversation.turn(ALICE, "那住宿订好了吗")
        body = turn_requests(fake)[-1]
        history = history_of(body)
        assert history[0] == {
            "role": "system",
            "content": "Earlier in this conversation:\n" + summary,
        }
        assert len(history) == 1 + 4
        assert "第0轮" not in everything(body)


async def test_compaction_retires_old_tool_results(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    """Every turn searches memory (big tool results in the session). Once compacted, the
    session is back under the line: the next turns do not flush again and again."""
    config = model_config(fake, workspace, context_tokens=2000, keep_after_compaction=4)
    calls = {"flush": 0, "compact": 0}

    def respond(body: dict[str, Any]) -> Reply | str:
        names = [t["function"]["name"] for t in body.get("tools") or []]
        if names == ["memory_save"]:
            calls["flush"] += 1
            return "NO_REPLY"
        if body["messages"][0]["content"] == COMPACT_INSTRUCTIONS:
            calls["compact"] += 1
            return "- 用户在问云南旅行"
        if body["messages"][-1]["role"] == "tool":
            return "ok"
        return Reply(tool_calls=(ToolCall("memory_search", {"query": "云南 旅行"}),))

    fake.set_responder(respond)
    async with MemoryCore.open(config, clock=clock) as core:
        for i in range(30):
            await core.memories.capture(
                ALICE, f"云南旅行 第{i}个细节 " + "很长的内容" * 10, importance="low"
            )
        flushed_at: list[int] = []
        for turn in range(10):
            before = calls["compact"]
            await core.conversation.turn(ALICE, f"第{turn}轮：云南旅行")
            if calls["compact"] > before:
                flushed_at.append(turn)
            clock.advance(timedelta(minutes=1))
        assert flushed_at, "the session never flushed"
        first = flushed_at[0]
        # After a compaction, several turns pass before the next one.
        assert all(b - a >= 3 for a, b in itertools.pairwise(flushed_at)), flushed_at
        assert first + 1 not in flushed_at
        assert calls["flush"] == calls["compact"] == len(flushed_at)


async def test_compaction_with_nothing_kept(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    config = model_config(fake, workspace, keep_after_compaction=0)
    fake.set_responder(
        lambda body: "- 摘要" if body["messages"][0]["content"] == COMPACT_INSTRUCTIONS else "ok"
    )
    async with MemoryCore.open(config, clock=clock) as core:
        result = await core.conversation.turn(ALICE, "第一句")
        await core.conversation.turn(ALICE, "第二句")
        assert await core.conversation.chat.flush(ALICE, result.session_id)
        stored = await session_messages(core, result.session_id)
        assert all(m.compacted for m in stored if m.role != "summary")
        assert [m.content for m in stored if not m.compacted] == ["- 摘要"]


async def test_forced_search_finds_yesterdays_messages_with_context(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    fake.reply_text("我们把发布日期定在四月十八日，周五上线")
    await mcore.conversation.turn(ALICE, "发布日期怎么定？")
    await mcore.conversation.turn(ALICE, "好的，就这么定")
    await mcore.conversation.new_session(ALICE)
    clock.advance(timedelta(days=1))
    fake.reply_tool_calls([("memory_search", {"query": "发布日期"})])
    fake.reply_text("四月十八日")
    result = await mcore.conversation.turn(ALICE, "昨天我们定的发布日期是哪天？")
    assert result.tool_calls == ["memory_search"]
    found = json.loads(turn_requests(fake)[-1]["messages"][-1]["content"])
    assert "四月十八日" in json.dumps(found, ensure_ascii=False)


async def test_recall_intent_injects_messages_of_the_named_day(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    fake.reply_text("我们把发布日期定在四月十八日，周五上线")
    await mcore.conversation.turn(ALICE, "发布日期怎么定？")
    await mcore.conversation.turn(ALICE, "好的，就这么定")
    await mcore.conversation.new_session(ALICE)
    clock.advance(timedelta(days=1))
    await mcore.conversation.turn(ALICE, "昨天我们定的发布日期是哪天？")
    assert "四月十八日" in system_of(turn_requests(fake)[-1])
