"""The chat engine end to end through the fake OpenAI server:
what the model sees in a turn, recall intent, the tool loop, failures, offline mode,
explicit remember/forget, `/new` extraction and its retries, accumulation over sessions,
the full lifecycle, and flush before compaction."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.entries import Importance
from memory_core.base.merge_values import Proposal
from memory_core.conversation.prompting import (
    RECALL_PREFLIGHT,
)
from memory_core.engine import MemoryCore
from testkit.openai_server import FakeOpenAI, Reply, ToolCall
from tests.conftest import START
from tests.unit.chat_support import (
    ALICE,
    BOB,
    FORCED,
    distinct,
    everything,
    fake_fixture,  # noqa: F401  (a fixture)
    history_of,
    mcore_fixture,  # noqa: F401  (a fixture)
    model_config,
    numbered_replies,
    session_messages,
    system_of,
    turn_requests,
)

pytestmark = pytest.mark.timeout(60)


# --- what the model sees ----------------------------------------------------------------------


async def test_prompt_memories_top_twenty_and_no_archived(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    # Decayed below the archive line by the time of the chat (0.8 * 0.99 ** 193 ≈ 0.11).
    await mcore.memories.merge_candidates(
        ALICE,
        [Proposal("decayed walrus fact", importance=Importance.HIGH)],
        session_id=None,
        source="test",
        now=START - timedelta(days=200),
    )
    high = [distinct(i, "high") for i in range(20)]
    medium = [distinct(i, "medium") for i in range(3)]
    low = [distinct(i, "low") for i in range(2)]
    for text in high:
        await mcore.memories.capture(ALICE, text, importance="high")
    for text in medium:
        await mcore.memories.capture(ALICE, text, importance="medium")
    for text in low:
        await mcore.memories.capture(ALICE, text, importance="low")
    hidden, _ = await mcore.memories.capture(ALICE, "archived zebra fact", importance="high")
    await mcore.memories.archive(ALICE, hidden.id)

    await mcore.conversation.turn(ALICE, "你好呀")
    system = system_of(turn_requests(fake)[0])
    assert "# 历史记忆" in system
    for text in high:
        assert text in system
    for text in medium + low:  # medium: past the top 20; low: 0.4 < 0.5
        assert text not in system
    assert "zebra" not in everything(fake.chat_requests()[0])
    assert "walrus" not in everything(fake.chat_requests()[0])
    status = await mcore.memories.status(ALICE)
    assert {e.content for e in status.archived} == {"archived zebra fact", "decayed walrus fact"}
    # One shape for every line: "- [category] content", nothing else.
    block = system[system.index("# 历史记忆") :].split("\n\n", 2)[1]
    lines = block.splitlines()[1:]
    assert len(lines) == 20
    assert all(re.fullmatch(r"- \[fact\] (high|medium) [0-9a-f]{20}", line) for line in lines)


async def test_recall_block_leaves_out_what_the_memory_block_states(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    """An entry in "What I know about the user" is not stated again under "## Memory"."""
    await mcore.memories.capture(ALICE, "alice deploys with kubernetes on fridays")
    await mcore.memories.capture(
        ALICE, "alice keeps kubernetes manifests in a monorepo", importance="low"
    )
    result = await mcore.conversation.turn(
        ALICE, "kubernetes manifests in the monorepo, deploys on fridays?"
    )
    system = system_of(turn_requests(fake)[0])
    head, _, block = system.partition("## Memory")
    assert "- [fact] alice deploys with kubernetes on fridays" in head
    assert "monorepo" in block  # below the prompt line: only recall brings it in
    assert system.count("alice deploys with kubernetes on fridays") == 1
    # both were recalled for the turn (and count as used), though one is stated once
    assert len(result.injected) == 2


async def test_daily_notes_on_first_turn_only(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    await mcore.notes.append(ALICE, "前天的笔记 alpha", now=START - timedelta(days=2))
    await mcore.notes.append(ALICE, "昨天的笔记 bravo", now=START - timedelta(days=1))
    await mcore.notes.append(ALICE, "今天的笔记 charlie")
    await mcore.notes.append(BOB, "鲍勃的笔记 delta")

    await mcore.conversation.turn(ALICE, "早上好")
    clock.advance(timedelta(minutes=1))
    await mcore.conversation.turn(ALICE, "再来一句")
    first, second = (system_of(b) for b in turn_requests(fake))
    assert "近两日笔记" in first
    assert "昨天的笔记 bravo" in first and "今天的笔记 charlie" in first
    assert first.index("bravo") < first.index("charlie")
    assert "alpha" not in first and "delta" not in first
    assert "近两日笔记" not in second and "charlie" not in second

    await mcore.conversation.new_session(ALICE)
    await mcore.conversation.turn(ALICE, "新会话开始")
    assert "今天的笔记 charlie" in system_of(turn_requests(fake)[-1])


async def test_recall_injection_comes_from_the_right_scope(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    # Low importance: below the prompt line, so only recall can bring them in.
    await mcore.memories.capture(
        ALICE, "alice deploys with kubernetes on fridays", importance="low"
    )
    await mcore.memories.capture(BOB, "bob deploys with nomad on mondays", importance="low")
    await mcore.notes.append(BOB, "bob deploys again, kubernetes is banned")

    result = await mcore.conversation.turn(ALICE, "how should I deploy kubernetes this week?")
    system = system_of(turn_requests(fake)[0])
    assert "## Memory" in system
    block = system[system.index("## Memory") :]
    assert "alice deploys with kubernetes on fridays" in block
    assert "nomad" not in everything(turn_requests(fake)[0])
    assert "banned" not in everything(turn_requests(fake)[0])
    assert result.injected and all(
        loc.startswith(mcore.workspace.relative(mcore.memories.path(ALICE)))
        for loc in result.injected
    )


async def test_history_window_is_capped_at_twenty(mcore: MemoryCore, fake: FakeOpenAI) -> None:
    numbered_replies(fake)
    for i in range(15):
        await mcore.conversation.turn(ALICE, f"message number {i}")
    await mcore.conversation.turn(ALICE, "the last one")
    body = turn_requests(fake)[-1]
    history = history_of(body)
    assert len(history) == 20
    assert history[0] == {"role": "user", "content": "message number 5"}
    assert history[-1] == {"role": "assistant", "content": "reply 15"}
    assert body["messages"][-1] == {"role": "user", "content": "the last one"}


async def test_history_window_cuts_long_messages_and_dedupes(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    numbered_replies(fake)
    long_text = "长" * 1200
    await mcore.conversation.turn(ALICE, long_text)
    clock.advance(timedelta(seconds=30))
    await mcore.conversation.turn(ALICE, "重复的问题")
    await mcore.conversation.turn(ALICE, "重复的问题")  # same instant, same text: one history line
    clock.advance(timedelta(seconds=30))
    await mcore.conversation.turn(ALICE, "最后一句")
    history = history_of(turn_requests(fake)[-1])
    contents = [m["content"] for m in history]
    assert contents[0] == "长" * 500 + "…[truncated]"
    assert contents.count("重复的问题") == 1
    assert contents == ["长" * 500 + "…[truncated]", "reply 1", "重复的问题", "reply 2", "reply 3"]
    assert all(len(c) <= 500 + len("…[truncated]") for c in contents)


# --- recall intent and the tool loop ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("我们之前聊过什么？", True),
        ("上次那个方案叫什么来着", True),
        ("昨天我说了什么", True),
        ("你还记得吗", True),
        ("do you remember my editor?", True),
        ("what did we decide last time?", True),
        ("what did I say yesterday", True),
        ("帮我写一首诗", False),
        ("what is the capital of France", False),
    ],
)
async def test_recall_intent_forces_memory_search(
    mcore: MemoryCore, fake: FakeOpenAI, text: str, intent: bool
) -> None:
    await mcore.conversation.turn(ALICE, text)
    [body] = turn_requests(fake)
    if intent:
        assert body["tool_choice"] == FORCED
        assert RECALL_PREFLIGHT in system_of(body)
    else:
        assert "tool_choice" not in body
        assert RECALL_PREFLIGHT not in system_of(body)


async def test_forced_search_runs_in_the_scope_then_answers(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    await mcore.memories.capture(ALICE, "alice edits code with neovim", category="preference")
    await mcore.memories.capture(BOB, "bob edits code with emacs", category="preference")
    fake.reply_tool_calls([("memory_search", {"query": "edits code neovim emacs"})])
    fake.reply_text("You use neovim.")
    result = await mcore.conversation.turn(ALICE, "do you remember which editor I use?")
    assert result.reply == "You use neovim."
    assert result.tool_calls == ["memory_search"]
    first, second = turn_requests(fake)
    assert first["tool_choice"] == FORCED
    assert "tool_choice" not in second  # only the first round is forced
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    found = json.loads(tool_message["content"])
    texts = [r["text"] for r in found["results"]]
    assert "alice edits code with neovim" in texts
    assert not any("emacs" in t for t in texts)
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "memory_search"


async def test_tool_loop_get_and_save_stay_in_scope(
    mcore: MemoryCore, fake: FakeOpenAI, clock: ManualClock
) -> None:
    await mcore.memories.capture(ALICE, "alice's locker code is 4711")
    await mcore.memories.capture(BOB, "bob's locker code is 9999")
    await mcore.memories.flush()
    alice_file = mcore.workspace.relative(mcore.memories.path(ALICE))
    bob_file = mcore.workspace.relative(mcore.memories.path(BOB))
    bob_before = mcore.memories.path(BOB).read_text(encoding="utf-8")
    fake.reply_tool_calls(
        [("memory_get", {"path": alice_file}), ("memory_get", {"path": bob_file})]
    )
    fake.reply_tool_calls(
        [
            ("memory_save", {"content": "alice prefers dark themes", "target": "long-term"}),
            ("memory_save", {"content": "alice asked about lockers", "target": "daily"}),
        ]
    )
    fake.reply_text("Your code is 4711.")
    result = await mcore.conversation.turn(ALICE, "what's my locker code")
    assert result.reply == "Your code is 4711."
    assert result.tool_calls == ["memory_get", "memory_get", "memory_save", "memory_save"]

    second = turn_requests(fake)[1]
    own, other = (json.loads(m["content"]) for m in second["messages"][-2:])
    assert "4711" in own["text"]
    assert "error" in other and "9999" not in json.dumps(other)

    contents = {e.content for e in await mcore.memories.entries(ALICE)}
    assert "alice prefers dark themes" in contents
    assert "alice prefers dark themes" not in {e.content for e in await mcore.memories.entries(BOB)}
    assert mcore.memories.path(BOB).read_text(encoding="utf-8") == bob_before
    daily = mcore.workspace.daily_path(ALICE, START.date()).read_text(encoding="utf-8")
    assert "alice asked about lockers" in daily
    assert not mcore.workspace.daily_path(BOB, START.date()).exists()
    records = await mcore.audit.recent(ALICE)
    assert any(r.source == "memory_save" and r.action == "add" for r in records)
    # Tool results are kept in the session, with the call's arguments.
    stored = await session_messages(mcore, result.session_id)
    tools = [m for m in stored if m.role == "tool"]
    assert [m.speaker for m in tools] == ["memory_get", "memory_get", "memory_save", "memory_save"]
    assert json.loads(tools[0].meta["arguments"]) == {"path": alice_file}


async def test_tool_loop_stops_after_max_tool_steps(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> None:
    config = model_config(fake, workspace, max_tool_steps=2)

    def responder(body: dict[str, Any]) -> Reply:
        if body.get("tools"):
            return Reply(tool_calls=(ToolCall("memory_search", {"query": "loop"}),))
        return Reply(text="giving up on tools")

    fake.set_responder(responder)
    async with MemoryCore.open(config, clock=clock) as core:
        result = await core.conversation.turn(ALICE, "search forever please")
    bodies = fake.chat_requests()
    assert len(bodies) == 3
    assert [bool(b.get("tools")) for b in bodies] == [True, True, False]
    assert result.reply == "giving up on tools"
    assert result.tool_calls == ["memory_search", "memory_search"]
    assert sum(1 for m in bodies[-1]["messages"] if m["role"] == "tool") == 2


async def test_unknown_tool_and_bad_arguments_do_not_end_the_turn(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    fake.reply_tool_calls([("launch_rockets", {}), ("memory_search", '{"query": ')])
    fake.reply_text("sorry")
    result = await mcore.conversation.turn(ALICE, "hmm")
    assert result.reply == "sorry"
    results = [json.loads(m["content"]) for m in turn_requests(fake)[1]["messages"][-2:]]
    assert all("error" in r for r in results)
