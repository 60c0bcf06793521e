"""The shared command router: command parsing, every command's output, dedupe, scopes."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

import adapters.router as router_module
from adapters.inbound import InboundMessage
from adapters.router import COMMANDS, HELP_TEXT, MessageRouter, parse_command
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tests.functional.conftest import make_config

_ids = itertools.count(1)


def msg(
    text: str,
    *,
    channel: str = "telegram",
    account: str = "bot1",
    sender: str = "u1",
    chat_type: str = "direct",
    chat: str | None = None,
    thread: str | None = None,
    message_id: str | None = None,
) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        account_id=account,
        sender_id=sender,
        sender_name=sender.title(),
        chat_type=chat_type,  # type: ignore[arg-type]
        chat_id=chat or sender,
        text=text,
        message_id=str(next(_ids)) if message_id is None else message_id,
        timestamp=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        thread_id=thread,
        mentioned=True,
    )


async def say(router: MessageRouter, text: str, **kw: Any) -> str:
    reply = await router.handle(msg(text, **kw))
    assert reply is not None, text
    return reply.text


@pytest.fixture
def router(core: MemoryCore) -> MessageRouter:
    return MessageRouter(core, bot_username="chatmem_bot")


# --- parse_command ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bot", "expected"),
    [
        ("/new", "chatmem_bot", ("new", "")),
        ("  /new  ", "chatmem_bot", ("new", "")),
        ("/new@chatmem_bot", "chatmem_bot", ("new", "")),
        ("/NEW@ChatMem_Bot", "chatmem_bot", ("new", "")),
        ("/new@otherbot", "chatmem_bot", None),
        ("/remember@otherbot I like tea", "chatmem_bot", None),
        ("/new@otherbot", None, ("new", "")),  # our name unknown: cannot tell, take it
        ("/remember I like tea", None, ("remember", "I like tea")),
        ("/search@chatmem_bot   two words  ", "chatmem_bot", ("search", "two words")),
        ("/记住 中文", None, ("记住", "中文")),
        ("/remember\nI like tea", None, ("remember", "I like tea")),
        ("hello /new", "chatmem_bot", None),
        # A slash that starts plain text: a command's name has no slash and no space.
        ("/usr/local/bin is on my PATH", "chatmem_bot", None),
        ("/ hi", "chatmem_bot", None),
        ("//", "chatmem_bot", None),
        ("/", "chatmem_bot", None),
        ("new", "chatmem_bot", None),
        ("", "chatmem_bot", None),
    ],
)
def test_parse_command(text: str, bot: str | None, expected: tuple[str, str] | None) -> None:
    assert parse_command(text, bot) == expected


# --- each command -------------------------------------------------------------------------


async def test_help_and_start_list_every_command(router: MessageRouter) -> None:
    assert await say(router, "/help") == HELP_TEXT
    assert await say(router, "/start") == HELP_TEXT
    assert await say(router, "/help@chatmem_bot") == HELP_TEXT
    for name, text in COMMANDS:
        assert f"/{name} — {text}" in HELP_TEXT


async def test_remember(router: MessageRouter, core: MemoryCore) -> None:
    assert await say(router, "/remember") == "Usage: /remember TEXT"
    assert await say(router, "/remember I like oolong tea") == (
        "Got it, I'll remember: I like oolong tea"
    )
    assert await say(router, "/remember I like oolong tea") == (
        "I already knew that; reinforced: I like oolong tea"
    )
    assert await say(router, "/remember 我喜欢乌龙茶") == "好的，我记住了：我喜欢乌龙茶"
    assert (
        await say(router, "/remember 我不喜欢乌龙茶") == "已更新，替换了之前的那条：我不喜欢乌龙茶"
    )
    contents = sorted(e.content for e in await core.memories.entries(MAIN))
    assert contents == ["I like oolong tea", "我不喜欢乌龙茶", "我喜欢乌龙茶"]


async def test_forget_asks_then_forgets(router: MessageRouter, core: MemoryCore) -> None:
    assert await say(router, "/forget") == "Usage: /forget WHAT"
    assert await say(router, "/forget unicorns") == "I found no memory about “unicorns”."
    await say(router, "/remember the wifi password is hunter2")
    [entry] = await core.memories.entries(MAIN)
    question = await say(router, "/forget wifi password")
    assert question == (
        f"Forget this memory? [{entry.id}] the wifi password is hunter2\nReply “yes” to forget it."
    )
    assert await say(router, "yes") == "Forgotten: the wifi password is hunter2"
    assert (await say(router, "/memory")).startswith("I don't remember anything")
    # Forgotten, as the question said: not archived (archived memories are still recalled).
    status = await core.memories.status(MAIN)
    assert status.active == [] and status.archived == []
    assert await core.finder.search(MAIN, "wifi password hunter2") == []
    assert await say(router, "/forget 不存在的东西") == "没有找到关于「不存在的东西」的记忆。"


async def test_forget_takes_every_match_and_its_duplicates(
    router: MessageRouter, core: MemoryCore
) -> None:
    office, _ = await core.memories.capture(MAIN, "the office wifi password is hunter2")
    home, _ = await core.memories.capture(MAIN, "the home wifi password is swordfish")
    kept, _ = await core.memories.capture(MAIN, "the office printer is on floor two")
    # A copy with a typo (a hand edit): a merge takes it for the same memory, and so must
    # forget, although it lacks the word "password".
    copy, _ = await core.memories.capture(MAIN, "placeholder to be edited")
    await core.memories.edit(MAIN, copy.id, "the office wifi pasword is hunter2")
    question = await say(router, "/forget wifi password")
    lines = question.splitlines()
    assert lines[0] == "Forget these 3 memories?"
    listed = {line.split(". ", 1)[1] for line in lines[1:4]}
    assert [line.split(". ", 1)[0] for line in lines[1:4]] == ["1", "2", "3"]
    assert listed == {
        f"[{office.id}] the office wifi password is hunter2",
        f"[{home.id}] the home wifi password is swordfish",
        f"[{copy.id}] the office wifi pasword is hunter2",
    }
    assert lines[4].startswith("Reply “yes” to forget them all, or the numbers")
    reply = await say(router, "yes")
    assert reply.startswith("Forgot 3 memories:")
    assert [e.id for e in await core.memories.entries(MAIN)] == [kept.id]


async def test_forget_by_numbers_and_cancel(router: MessageRouter, core: MemoryCore) -> None:
    await core.memories.capture(MAIN, "Alice drinks green tea every morning")
    await core.memories.capture(MAIN, "Bob drinks green tea after lunch")
    question = await say(router, "/forget drinks green tea")
    numbered = {
        line.split("] ", 1)[1]: line.split(".", 1)[0] for line in question.splitlines()[1:3]
    }
    assert await say(router, numbered["Bob drinks green tea after lunch"]) == (
        "Forgotten: Bob drinks green tea after lunch"
    )
    assert [e.content for e in await core.memories.entries(MAIN)] == [
        "Alice drinks green tea every morning"
    ]
    # Any other answer drops the question: it is an ordinary message, nothing is forgotten.
    await say(router, "/forget green tea")
    assert (await say(router, "no, keep it")).startswith("(offline)")
    assert (await say(router, "yes")).startswith("(offline)")
    assert len(await core.memories.entries(MAIN)) == 1


async def test_commands_and_forget_requests_are_not_stored(
    router: MessageRouter, core: MemoryCore
) -> None:
    """Commands, forget requests and their answers are not messages: stored, they were
    indexed, and a forgotten text stayed findable in the question that named it."""
    for text in [
        "/remember the door code is 4711",
        "/search door code",
        "/memory",
        "/scope",
        "/help",
        "/frobnicate",
        "/forget door code",
        "yes",
        "forget the door code",
        "/new",
    ]:
        await say(router, text)
    assert (await core.history.counts_by_scope()).get("main", {}) in ({}, {"false": 0})
    assert not [h for h in await core.finder.search(MAIN, "door code 4711") if "4711" in h.text]
    # A request said in the chat is a message like any other (what people say is kept).
    await say(router, "remember that the safe code is 0815")
    assert (await core.history.counts_by_scope())["main"]["false"] == 2


async def test_memory_lists_best_first(router: MessageRouter, core: MemoryCore) -> None:
    assert await say(router, "/memory") == (
        "I don't remember anything in this chat yet. 这个对话里我还没有记住任何事。"
    )
    await core.memories.capture(MAIN, "low note  with\nspaces", importance="low")
    await core.memories.capture(MAIN, "high note", importance="high")
    assert await say(router, "/memory") == (
        "2 memories, best first:\n1. [fact] high note (0.80)\n2. [fact] low note with spaces (0.40)"
    )


async def test_memory_shows_at_most_ten(router: MessageRouter, core: MemoryCore) -> None:
    topics = [
        "apples", "boats", "clouds", "dogs", "engines", "ferns",
        "guitars", "harbours", "islands", "jackets", "kites", "lamps",
    ]  # fmt: skip
    for topic in topics:
        await core.memories.capture(MAIN, f"Alice collects {topic} {topic} {topic}")
    reply = await say(router, "/memory")
    lines = reply.splitlines()
    assert lines[0] == "12 memories, best first:"
    assert len(lines) == 11


async def test_search(router: MessageRouter, core: MemoryCore) -> None:
    assert await say(router, "/search") == "Usage: /search WORDS"
    assert await say(router, "/search anything") == "Nothing found. 没有找到。"
    await core.memories.capture(MAIN, "Alice prefers pytest over unittest for testing")
    await core.memories.capture(MAIN, "the quarterly report is due in April")
    reply = await say(router, "/search pytest unittest")
    [line] = reply.splitlines()
    score, location, text = line.split(" ", 2)
    assert float(score) > 0
    assert location.startswith("MEMORY.md:")
    assert text == "Alice prefers pytest over unittest for testing"


async def test_search_lists_only_hits_that_hold_a_word_of_the_query(
    router: MessageRouter,
) -> None:
    """The ranking hands on a matching turn's neighbours (context for a recall): a
    person's /search lists only hits that hold one of the words asked for."""
    for text in (
        "I drink oolong tea every morning",
        "my cat is called Mochi",
        "I like green tea",
        "the weather is nice today",
        "we went hiking on the weekend",
    ):
        await say(router, text)
    lines = (await say(router, "/search oolong")).splitlines()
    assert len(lines) == 1 and "oolong" in lines[0]
    lines = (await say(router, "/search oolong tea")).splitlines()
    assert lines and all("oolong" in line or "tea" in line for line in lines)
    assert not any("hiking" in line and "tea" not in line for line in lines)
    assert all(float(line.split(" ", 1)[0]) > 0 for line in lines)


def test_a_hit_scoring_zero_or_holding_no_term_is_not_listed() -> None:
    from memory_core.base.chunks import ChunkKind
    from memory_core.base.records import Hit
    from memory_core.recall.finder import _holding_terms
    from memory_core.recall.query import Query

    def hit(text: str, score: float) -> Hit:
        return Hit("MEMORY.md", 1, 1, score, text, ChunkKind.LONG_TERM, None)

    query = Query(text="oolong", terms={"oolong": 1.0})
    hits = [hit("oolong at breakfast", 1.2), hit("green tea", 0.9), hit("oolong again", 0.001)]
    assert [h.text for h in _holding_terms(hits, query)] == ["oolong at breakfast"]
    # A query of a time and no words keeps every hit that scores.
    assert len(_holding_terms(hits[:2], Query(text="yesterday"))) == 2


async def test_scope(router: MessageRouter) -> None:
    assert await say(router, "/scope") == "scope: main (dm_scope = main)"
    assert await say(router, "/scope", chat_type="group", chat="-5") == (
        "scope: group:telegram:-5 (dm_scope = main)"
    )


async def test_new(router: MessageRouter, core: MemoryCore) -> None:
    assert await say(router, "/new") == "Started a new session."
    await say(router, "I prefer tabs over spaces")
    assert await say(router, "/new") == "New session started. Learned: 1 new, 0 reinforced."
    await say(router, "I prefer tabs over spaces")
    assert await say(router, "/new 好") == "新会话已开始。记住了 0 条新记忆，强化了 1 条。"
    [entry] = await core.memories.entries(MAIN)
    assert (entry.content, entry.category) == ("I prefer tabs over spaces", "preference")


async def test_plain_text_is_a_chat_turn(router: MessageRouter) -> None:
    reply = await say(router, "hello there")
    assert reply.startswith("(offline) No language model is configured")
    assert (await say(router, "你好")).startswith("（离线模式）")
    assert (await say(router, "/usr/local/bin is on my PATH")).startswith("(offline)")


async def test_unknown_commands_get_the_list(router: MessageRouter, core: MemoryCore) -> None:
    reply = await say(router, "/frobnicate now")
    assert reply.startswith("Unknown command /frobnicate. 未知命令。")
    for name, text in COMMANDS:
        assert f"/{name} — {text}" in reply
    assert (await say(router, "/记住 中文")).startswith("Unknown command /记住.")
    assert (await say(router, "/Frobnicate@chatmem_bot")).startswith("Unknown command /frobnicate.")
    # In a Telegram group every bot sees a bare "/cmd": one we do not know may be another
    # bot's, so it gets no answer; addressed to us by name, it does.
    group = {"chat_type": "group", "chat": "-100"}
    assert await router.handle(msg("/frobnicate", **group)) is None  # type: ignore[arg-type]
    assert (await say(router, "/frobnicate@chatmem_bot", **group)).startswith("Unknown command")
    assert (await core.history.counts_by_scope()).get("main", {}) in ({}, {"false": 0})


async def test_other_bots_commands_and_empty_text_get_no_reply(router: MessageRouter) -> None:
    assert await router.handle(msg("/new@some_other_bot")) is None
    assert await router.handle(msg("/memory@some_other_bot extra")) is None
    assert await router.handle(msg("   ")) is None
    assert await router.handle(msg("")) is None


# --- dedupe -------------------------------------------------------------------------------


async def test_dedupe(router: MessageRouter) -> None:
    first = msg("/scope", message_id="7", chat="c1")
    assert await router.handle(first) is not None
    assert await router.handle(first) is None
    assert await router.handle(replace(first, text="/help")) is None  # same id, edited text
    assert await router.handle(replace(first, chat_id="c2")) is not None
    assert await router.handle(replace(first, channel="dingtalk")) is not None
    # Without an id a message cannot be recognised again: never dropped as a duplicate.
    no_id = msg("/scope", message_id="", chat="c1")
    assert await router.handle(no_id) is not None
    assert await router.handle(no_id) is not None


async def test_dedupe_window_is_bounded(
    router: MessageRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router_module, "DEDUPE_WINDOW", 3)
    old = msg("/scope", message_id="old")
    assert await router.handle(old) is not None
    for i in range(3):
        assert await router.handle(msg("/scope", message_id=f"new{i}")) is not None
    assert len(router._seen) == 3
    # Out of this process's window, but the workspace's database still knows it.
    assert await router.handle(old) is None


async def test_a_delivery_to_two_processes_is_answered_once(core: MemoryCore) -> None:
    """Two routers over two cores of one workspace (two bot processes): a platform that
    delivers one message to both gets one answer. The database decides, not a memory of
    its own per process."""
    async with MemoryCore.open(core.config) as other:
        first, second = MessageRouter(core), MessageRouter(other)
        message = msg("hello there", message_id="m-1")
        replies = await asyncio.gather(first.handle(message), second.handle(message))
        assert sum(reply is not None for reply in replies) == 1
        # Answered: a later delivery is dropped by both.
        assert await first.handle(message) is None and await second.handle(message) is None
        # Another bot account's message with the same id is another message.
        again = await second.handle(replace(message, account_id="bot-2"))
        assert again is not None


# --- scope resolution ----------------------------------------------------------------------


def stub_router(dm_scope: str, topic_scope: bool = False) -> MessageRouter:
    config = Config().model_copy(update={"dm_scope": dm_scope, "topic_scope": topic_scope})
    return MessageRouter(cast(MemoryCore, SimpleNamespace(config=config)))


@pytest.mark.parametrize(
    ("dm_scope", "direct"),
    [
        ("main", "main"),
        ("per-peer", "peer:u1"),
        ("per-channel-peer", "telegram:peer:u1"),
        ("per-account-channel-peer", "telegram:bot1:peer:u1"),
    ],
)
@pytest.mark.parametrize("topic_scope", [False, True])
def test_scope_resolution(dm_scope: str, direct: str, topic_scope: bool) -> None:
    router = stub_router(dm_scope, topic_scope)
    assert router.scope_of(msg("x")) == ScopeKey(direct)
    # A DM never has topics: a thread id changes nothing.
    assert router.scope_of(msg("x", thread="3")) == ScopeKey(direct)
    # The same person elsewhere.
    other_channel = router.scope_of(msg("x", channel="dingtalk"))
    other_account = router.scope_of(msg("x", account="bot2"))
    assert (other_channel == ScopeKey(direct)) == (dm_scope in ("main", "per-peer"))
    assert (other_account == ScopeKey(direct)) == (dm_scope != "per-account-channel-peer")
    # Groups are per group whatever dm_scope says; topics only with topic_scope.
    group = msg("x", chat_type="group", chat="-100")
    assert router.scope_of(group) == ScopeKey("group:telegram:-100")
    assert router.scope_of(replace(group, sender_id="u2")) == ScopeKey("group:telegram:-100")
    topic = replace(group, thread_id="7")
    expected_topic = "group:telegram:-100:topic:7" if topic_scope else "group:telegram:-100"
    assert router.scope_of(topic) == ScopeKey(expected_topic)
    assert router.scope_of(msg("x", channel="dingtalk", chat_type="group", chat="cidX")) == (
        ScopeKey("group:dingtalk:cidX")
    )


@pytest.mark.parametrize("dm_scope", ["main", "per-peer", "per-account-channel-peer"])
async def test_commands_act_on_the_resolved_scope(tmp_path: Path, dm_scope: str) -> None:
    config = make_config(tmp_path / "ws", env={"CHATMEM_DM_SCOPE": dm_scope})
    async with MemoryCore.open(config) as core:
        router = MessageRouter(core)
        await say(router, "/remember u1 plays the cello", sender="u1")
        await say(router, "/remember the group rehearses on mondays", chat_type="group", chat="g")
        u2_memory = await say(router, "/memory", sender="u2")
        group_memory = await say(router, "/memory", chat_type="group", chat="g")
        u1_scope = router.scope_of(msg("x", sender="u1"))
        u1_entries = [e.content for e in await core.memories.entries(u1_scope)]
    assert u1_entries == ["u1 plays the cello"]
    assert ("cello" in u2_memory) == (dm_scope == "main")
    assert "rehearses" not in u2_memory
    assert "rehearses on mondays" in group_memory and "cello" not in group_memory


async def test_a_message_whose_taker_died_is_taken_over(core: MemoryCore) -> None:
    """A process takes a delivery and dies before answering it (its owner lock goes
    with it): the platform's next delivery, to another process, is answered there. While
    the taker lives, it is not."""
    channel = "telegram:bot1"
    router = MessageRouter(core)
    message = msg("hello again", message_id="m-8", chat="c1")
    async with MemoryCore.open(core.config) as taker:
        assert await taker.claim_delivery(channel, "c1", "m-8")
        assert await router.handle(message) is None  # the taker lives and has it
        assert await taker.claim_delivery(channel, "c1", "m-9")
        assert not await core.claim_delivery(channel, "c1", "m-9")
        assert await taker.claim_delivery(channel, "c1", "m-10")
        await taker.delivery_answered(channel, "c1", "m-10")
    # The taker is gone: what it left unanswered is the next process's to answer, the
    # router's own memory of the first delivery notwithstanding.
    assert await router.handle(message) is not None
    assert await core.claim_delivery(channel, "c1", "m-9")
    assert not await core.claim_delivery(channel, "c1", "m-10")  # answered before it died
