"""The chat engine end to end through the fake OpenAI server:
what the model sees in a turn, recall intent, the tool loop, failures, offline mode,
explicit remember/forget, `/new` extraction and its retries, accumulation over sessions,
the full lifecycle, and flush before compaction."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.entries import Importance
from memory_core.base.merge_values import Candidate, ChangeKind
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.conversation.prompting import (
    COMPACT_INSTRUCTIONS,
    FLUSH_INSTRUCTIONS,
    RECALL_PREFLIGHT,
)
from memory_core.conversation.tools import MEMORY_SAVE, TOOL_SCHEMAS
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.storage.sessions import StoredMessage
from testkit.openai_server import FakeOpenAI, Reply, ToolCall
from tests.conftest import START
from tests.postgres import with_storage

pytestmark = pytest.mark.timeout(60)

ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")
FORCED = {"type": "function", "function": {"name": "memory_search"}}


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def model_config(fake: FakeOpenAI, workspace: Path, **llm: Any) -> Config:
    config = load_config(
        None,
        env=with_storage(
            {
                "CHATMEM_MODEL": "gpt-fake",
                "OPENAI_BASE_URL": fake.base_url,
                "OPENAI_API_KEY": "sk-test-123",
            }
        ),
        workspace=workspace,
    )
    llm.setdefault("max_retries", 0)
    llm.setdefault("timeout_seconds", 2.0)
    return config.model_copy(update={"llm": config.llm.model_copy(update=llm)})


@pytest.fixture
async def mcore(fake: FakeOpenAI, workspace: Path, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    """A core whose model is the fake server."""
    async with MemoryCore.open(model_config(fake, workspace), clock=clock) as opened:
        yield opened


def turn_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    """Requests of chat turns (they offer all three memory tools)."""
    return [b for b in fake.chat_requests() if b.get("tools") == TOOL_SCHEMAS]


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def history_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The history window: everything between the system prompt and the new user message."""
    return list(body["messages"][1:-1])


def everything(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


def distinct(i: int, prefix: str = "note") -> str:
    """Texts no similarity rule confuses with one another."""
    return f"{prefix} {hashlib.sha256(str(i).encode()).hexdigest()[:20]}"


async def session_messages(core: MemoryCore, session_id: str) -> list[StoredMessage]:
    return await core.history.session_messages(session_id, include_compacted=True)


def numbered_replies(fake: FakeOpenAI) -> None:
    counter = iter(range(1, 10_000))
    fake.set_responder(lambda body: f"reply {next(counter)}")


# --- what the model sees ----------------------------------------------------------------------


async def test_prompt_memories_top_twenty_and_no_archived(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    # Decayed below the archive line by the time of the chat (0.8 * 0.99 ** 193 ≈ 0.11).
    await mcore.memories.merge_candidates(
        ALICE,
        [Candidate("decayed walrus fact", importance=Importance.HIGH)],
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


# --- failures and offline mode -----------------------------------------------------------------


async def test_interrupt_cancels_a_turn_waiting_for_the_model(
    mcore: MemoryCore, fake: FakeOpenAI
) -> None:
    """Ctrl-C in `chatmem chat` mid-answer: the turn stops instead of running on into a
    core being closed. The message stays stored; no reply was stored (none was shown)."""
    asked = asyncio.Event()

    async def slow(body: dict[str, Any]) -> Reply:
        asked.set()
        return Reply(text="far too late", delay=3600)

    fake.set_responder(slow)
    turn = asyncio.ensure_future(mcore.conversation.turn(ALICE, "tell me a long story"))
    await asked.wait()
    fake.set_responder(None)
    assert mcore.conversation.chat.interrupt(BOB) == 0  # another scope's work is not touched
    assert mcore.conversation.chat.interrupt(ALICE) == 1
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert mcore.conversation.chat.interrupt(ALICE) == 0
    fake.reply_text("Once upon a time.")
    again = await mcore.conversation.turn(ALICE, "briefly, then")
    assert again.reply == "Once upon a time."
    stored = await session_messages(mcore, again.session_id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "tell me a long story"),
        ("user", "briefly, then"),
        ("assistant", "Once upon a time."),
    ]


@pytest.mark.parametrize(
    ("text", "polite"), [("今天天气怎么样", "抱歉"), ("how is the weather", "Sorry")]
)
async def test_model_failure_keeps_the_message_and_replies_politely(
    mcore: MemoryCore, fake: FakeOpenAI, text: str, polite: str
) -> None:
    fake.fail(500, times=1, retry_after=0)
    result = await mcore.conversation.turn(ALICE, text)
    assert result.reply.startswith(polite)
    stored = await session_messages(mcore, result.session_id)
    assert (stored[0].role, stored[0].content) == ("user", text)
    assert stored[-1].role == "assistant" and "HTTP 500" in stored[-1].meta["error"]
    # The next turn works and still sees the message.
    fake.reply_text("sunny")
    again = await mcore.conversation.turn(ALICE, "再试一次 / try again")
    assert again.reply == "sunny"
    assert {"role": "user", "content": text} in history_of(turn_requests(fake)[-1])


async def test_offline_turn_says_no_model_and_stores_the_message(core: MemoryCore) -> None:
    assert not core.llm.configured
    result = await core.conversation.turn(ALICE, "hello, anyone there?")
    assert "No language model is configured" in result.reply
    zh = await core.conversation.turn(ALICE, "有人吗？")
    assert "还没有配置语言模型" in zh.reply
    # The person's messages are kept; the canned notice is no part of the conversation.
    stored = await session_messages(core, result.session_id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hello, anyone there?"),
        ("user", "有人吗？"),
    ]


async def test_offline_notice_is_not_indexed_or_echoed_as_a_memory(core: MemoryCore) -> None:
    """Stored and indexed, the notice came back under "Related memories" of the next turns
    whose words it shares (language, model, remember, session)."""
    await core.memories.capture(ALICE, "Alice runs a language model on her laptop")
    first = await core.conversation.turn(ALICE, "which language model should be configured")
    second = await core.conversation.turn(ALICE, "can a language model remember a session")
    third = await core.conversation.turn(
        ALICE, "is a language model configured for this session yet"
    )
    for result in (first, second, third):
        related = result.reply.partition("Related memories:")[2]
        assert "(offline)" not in related and "No language model" not in related
        # What the person said in this very session is no memory to show them either.
        assert "sessions/" not in related
    assert "LONG_TERM.md:8 Alice runs a language model" in first.reply  # a real memory
    hits = await core.finder.search(ALICE, "language model configured remember session")
    assert hits and not [h for h in hits if "offline" in h.text or "离线" in h.text]


@pytest.mark.parametrize(
    ("said", "reply"),
    [
        ("remember that my cat is called 小橘", "Got it, I'll remember: my cat is called 小橘"),
        ("remember that alice likes green tea", "Got it, I'll remember: alice likes green tea"),
        ("记住我在学 Python", "好的，我记住了：我在学 Python"),
    ],
)
async def test_offline_replies_in_the_language_of_the_message(
    core: MemoryCore, said: str, reply: str
) -> None:
    assert (await core.conversation.turn(ALICE, said)).reply == reply
    notice = (await core.conversation.turn(ALICE, "the weather is nice, isn't it 小橘")).reply
    assert notice.startswith("(offline) No language model is configured")


async def test_offline_related_memories_share_a_term_with_the_message(core: MemoryCore) -> None:
    await core.conversation.turn(ALICE, "remember that my cat is called Mochi and eats salmon")
    await core.memories.capture(ALICE, "我每周三晚上去游泳")
    # The turn before names the cat: recall takes it as context, which is no reason to
    # show the cat under a statement about the weather.
    unrelated = await core.conversation.turn(ALICE, "the weather is nice today")
    assert "Related memories" not in unrelated.reply and not unrelated.injected
    related = await core.conversation.turn(ALICE, "what does my cat like to eat")
    listed = related.reply.partition("Related memories:")[2]
    assert "Mochi" in listed and "游泳" not in listed
    zh = await core.conversation.turn(ALICE, "游泳的时间改了吗")
    assert "我每周三晚上去游泳" in zh.reply.partition("相关记忆：")[2]


async def test_offline_remember_and_forget_flow(core: MemoryCore, clock: ManualClock) -> None:
    saved = await core.conversation.turn(ALICE, "记住我对花生过敏")
    assert saved.reply == "好的，我记住了：我对花生过敏"
    [entry] = await core.memories.entries(ALICE)
    assert (entry.content, entry.score) == ("我对花生过敏", 0.8)
    [record] = await core.audit.history(ALICE, entry.id)
    assert (record.action, record.source) == ("add", "explicit")
    again = await core.conversation.turn(ALICE, "请记住：我对花生过敏")
    assert again.reply.startswith("这条我之前就记得")

    # A reply that is not a confirmation cancels the pending forget.
    asked = await core.conversation.turn(ALICE, "忘掉 花生")
    assert "要忘掉这条记忆吗" in asked.reply and entry.id in asked.reply
    await core.conversation.turn(ALICE, "算了，不用了")
    await core.conversation.turn(ALICE, "确认")
    assert (await core.memories.get_entry(ALICE, entry.id)).archived is None

    # A confirmation after the question expired does nothing either.
    await core.conversation.turn(ALICE, "忘掉 花生")
    clock.advance(timedelta(minutes=11))
    await core.conversation.turn(ALICE, "确认")
    assert (await core.memories.get_entry(ALICE, entry.id)).archived is None

    await core.conversation.turn(ALICE, "忘掉花生过敏")
    done = await core.conversation.turn(ALICE, "确认")
    # Forgotten as asked (archived entries are still recalled on demand).
    assert done.reply == "已忘掉：我对花生过敏"
    assert await core.memories.entries(ALICE) == []
    text = core.memories.path(ALICE).read_text(encoding="utf-8")
    assert "我对花生过敏" not in text
    assert [r.action for r in await core.audit.history(ALICE, entry.id)][-1] == "forget"
    # Gone from memory and from search's entries; the chat lines that asked to remember
    # it are turns like any other, indexed as what was said (issue 34).
    hits = await core.finder.search(ALICE, "花生过敏")
    assert hits and all(h.kind is not ChunkKind.LONG_TERM for h in hits)
    assert (
        await core.conversation.turn(ALICE, "忘掉 火星基地")
    ).reply == "没有找到关于「火星基地」的记忆。"
    # What the person said is kept, but forget requests, questions and answers are not
    # (the question named the very text to forget); a late "确认" was an ordinary message.
    stored = await session_messages(core, saved.session_id)
    assert [m.content for m in stored if m.role == "user"] == [
        "记住我对花生过敏",
        "请记住：我对花生过敏",
        "算了，不用了",
        "确认",
        "确认",
    ]
    assert not [m for m in stored if "忘掉" in m.content]


async def test_offline_english_remember_and_forget(core: MemoryCore) -> None:
    assert (await core.conversation.turn(MAIN, "remember that I use zsh")).reply == (
        "Got it, I'll remember: I use zsh"
    )
    asked = await core.conversation.turn(MAIN, "forget zsh")
    assert asked.reply.startswith("Forget this memory?")
    assert (await core.conversation.turn(MAIN, "yes")).reply == "Forgotten: I use zsh"
    assert await core.memories.entries(MAIN) == []


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        ("我喜欢乌龙茶，请记住", "好的，我记住了：我喜欢乌龙茶"),
        (
            "I prefer jasmine tea, please remember that",
            "Got it, I'll remember: I prefer jasmine tea",
        ),
        ("记住：我下周三要出差", "好的，我记住了：我下周三要出差"),
        (
            "please remember my badge number is 7788",
            "Got it, I'll remember: my badge number is 7788",
        ),
        ("Oh, and remember that standup is at nine.", "Got it, I'll remember: standup is at nine"),
    ],
)
async def test_offline_remember_anywhere_in_the_message(
    core: MemoryCore, text: str, reply: str
) -> None:
    assert (await core.conversation.turn(MAIN, text)).reply == reply
    [entry] = await core.memories.entries(MAIN)
    assert reply.endswith(entry.content)


async def test_offline_new_learns_only_real_statements(core: MemoryCore) -> None:
    """The heuristic extractor gets the person's real statements, not the requests it has
    already captured (with "请记住" still in them) or commands."""
    for text in [
        "我喜欢乌龙茶，请记住",
        "I prefer jasmine tea, please remember that",
        "please remember I prefer tabs over spaces",
        "I like hiking in the Alps",
    ]:
        await core.conversation.turn(ALICE, text)
    done = await core.conversation.new_session(ALICE)
    assert done.result is not None and done.result.count(ChangeKind.ADDED) == 1
    assert sorted(e.content for e in await core.memories.entries(ALICE)) == [
        "I like hiking in the Alps",
        "I prefer jasmine tea",
        "I prefer tabs over spaces",
        "我喜欢乌龙茶",
    ]


async def test_extraction_skips_requests_and_notices_stored_by_older_versions(
    core: MemoryCore,
) -> None:
    """Sessions stored before requests and notices stopped being stored still hold them."""
    at = START
    notice = "(offline) No language model is configured, so I can't chat yet; ..."
    said = [
        ("user", "我喜欢乌龙茶，请记住"),
        ("assistant", "好的，我记住了：我喜欢乌龙茶"),
        ("user", "/frobnicate I prefer vim"),
        ("assistant", notice),
        ("user", "remember that I prefer tabs over spaces"),
        ("assistant", "Got it, I'll remember: I prefer tabs over spaces"),
        ("user", "I like hiking in the Alps"),
        ("assistant", notice),
    ]
    await core.record_session(
        ALICE,
        "legacy-session",
        at,
        [RecordedMessage(role, "alice", text, at) for role, text in said],
    )
    result = await core.conversation.chat.extract_session(ALICE, "legacy-session")
    assert result is not None
    assert [e.content for e in await core.memories.entries(ALICE)] == ["I like hiking in the Alps"]


async def test_offline_new_uses_the_heuristic(core: MemoryCore) -> None:
    await core.conversation.turn(ALICE, "我喜欢用 vim 写代码。我们决定用 FastAPI 而不是 Flask")
    await core.conversation.turn(ALICE, "你觉得今天会下雨吗？")
    done = await core.conversation.new_session(ALICE)
    assert done.reply == "New session started. Learned: 2 new, 0 reinforced."
    assert done.result is not None and done.result.count(ChangeKind.ADDED) == 2
    entries = {e.content: e for e in await core.memories.entries(ALICE)}
    assert entries["我喜欢用 vim 写代码"].category == "preference"
    assert entries["我们决定用 FastAPI 而不是 Flask"].category == "decision"
    assert entries["我们决定用 FastAPI 而不是 Flask"].score == 0.8
    assert {r.source for r in await core.audit.recent(ALICE)} == {"extract"}
    zh = await core.conversation.new_session(ALICE, chinese=True)
    assert zh.reply == "新会话已开始。记住了 0 条新记忆，强化了 0 条。"


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
