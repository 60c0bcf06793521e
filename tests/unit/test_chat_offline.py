"""Chat turns that fail or run without a model: interrupts, a failing model, and the
offline mode's replies, remember and forget, and heuristic extraction."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.merge_values import ChangeKind
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from testkit.openai_server import FakeOpenAI, Reply
from tests.conftest import START
from tests.unit.chat_support import (
    ALICE,
    BOB,
    fake_fixture,  # noqa: F401  (a fixture)
    history_of,
    mcore_fixture,  # noqa: F401  (a fixture)
    session_messages,
    turn_requests,
)

pytestmark = pytest.mark.timeout(60)


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
