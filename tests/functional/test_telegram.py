"""Telegram end to end: the real python-telegram-bot client against the fake Bot API.

Every test runs the application `build_telegram_app` makes (or `run_telegram` itself) on
a fresh workspace; offline unless a test needs the fake model's recorded prompts.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from adapters.router import COMMANDS
from adapters.telegram_bot import (
    REFUSAL,
    TelegramFrontEnd,
    build_telegram_app,
    post_init,
    run_telegram,
)
from memory_core.engine import MemoryCore
from testkit.bot import BOT_USERNAME, last_user_text
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from tests.functional.conftest import (
    ALICE,
    BOB,
    FORUM,
    GROUP,
    STRANGER,
    make_config,
    message_rows,
    telegram_bot,
    turn_prompts,
    workspace_files,
)

MENTION = "@chatmem_bot"


def chat_requests_for(llm: FakeOpenAI, user_text: str) -> list[str]:
    """Flattened prompts of the turn requests whose newest user message contains `user_text`."""
    return [
        "\n".join(str(m.get("content") or "") for m in body["messages"])
        for body in llm.chat_requests()
        if user_text in last_user_text(body)
    ]


# --- start-up --------------------------------------------------------------------------


async def test_run_telegram_sets_commands_at_start_and_answers(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    """The production entry point: commands menu at start, a DM answered, a clean stop."""
    config = make_config(
        tmp_path / "ws",
        telegram={
            "bot_token": fake_tg.token,
            "api_base_url": fake_tg.base_url,
            "allowed_users": [ALICE],
        },
    )
    stop = asyncio.Event()
    async with MemoryCore.open(config) as core:
        task = asyncio.create_task(run_telegram(core, config.telegram, stop))
        try:
            await fake_tg.wait_for_calls("setMyCommands", timeout=10)
            assert [(c["command"], c["description"]) for c in fake_tg.commands] == COMMANDS
            fake_tg.add_private_message(ALICE, "/scope")
            [reply] = await fake_tg.wait_for_sent(1, chat_id=ALICE, timeout=10)
            assert reply.text == "scope: main (dm_scope = main)"
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
    assert task.exception() is None
    # setMyCommands came before the first getUpdates: the menu is there from the start.
    methods = [c.method.lower() for c in fake_tg.calls]
    assert methods.index("setmycommands") < methods.index("getupdates")


async def test_get_me_is_called_once_at_start_not_per_message(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    """The production entry point learns the bot's @username once at start; group messages
    that @mention it are recognised with it, without asking Telegram again."""
    config = make_config(
        tmp_path / "ws",
        telegram={
            "bot_token": fake_tg.token,
            "api_base_url": fake_tg.base_url,
            "allowed_users": [ALICE],
        },
    )
    notes = [
        f"the {thing} is kept in the shed" for thing in ("kayak", "tent", "bike", "ladder", "grill")
    ]
    stop = asyncio.Event()
    async with MemoryCore.open(config) as core:
        task = asyncio.create_task(run_telegram(core, config.telegram, stop))
        try:
            await fake_tg.wait_for_calls("setMyCommands", timeout=10)
            assert len(fake_tg.calls_to("getMe")) == 1
            for note in notes:
                fake_tg.add_group_message(GROUP, ALICE, f"{MENTION} remember that {note}")
            sent = await fake_tg.wait_for_sent(len(notes), chat_id=GROUP, timeout=10)
        finally:
            stop.set()
            await asyncio.wait_for(task, 15)
    assert task.exception() is None
    assert [m.text for m in sent] == [f"Got it, I'll remember: {note}" for note in notes]
    assert len(fake_tg.calls_to("getMe")) == 1


async def test_post_init_learns_the_bot_identity_once(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    """`post_init` (run by run_polling()/run_webhook(), and by `run_telegram`) takes the
    bot's id and username from the getMe of `initialize` and sets the command menu."""
    config = make_config(
        tmp_path / "ws",
        telegram={"bot_token": fake_tg.token, "api_base_url": fake_tg.base_url},
    )
    async with MemoryCore.open(config) as core:
        app = build_telegram_app(core, config.telegram)
        assert app.post_init is post_init
        front: TelegramFrontEnd = app.bot_data["front"]
        async with app:
            assert (front.bot_id, front.bot_username) == (None, None)
            await post_init(app)
            assert (front.bot_id, front.bot_username) == (fake_tg.bot_id, BOT_USERNAME)
            assert front.router.bot_username == BOT_USERNAME
    assert len(fake_tg.calls_to("getMe")) == 1
    assert [(c["command"], c["description"]) for c in fake_tg.commands] == COMMANDS


# --- remembering and recalling in one DM ------------------------------------------------


async def test_remember_in_dm_is_recalled_in_that_dm(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    async with telegram_bot(tmp_path, fake_tg) as bot:
        [saved] = await bot.dm(ALICE, "/remember my cat is called Tofu")
        assert saved.text == "Got it, I'll remember: my cat is called Tofu"
        [memory] = await bot.dm(ALICE, "/memory")
        assert "1 memory, best first:" in memory.text
        assert "[fact] my cat is called Tofu" in memory.text
        [found] = await bot.dm(ALICE, "/search cat Tofu")
        assert "MEMORY.md" in found.text and "my cat is called Tofu" in found.text
        # The same through plain words (the explicit-request path of a normal turn).
        [again] = await bot.dm(ALICE, "remember that I live in Lisbon")
        assert again.text == "Got it, I'll remember: I live in Lisbon"
        # An offline turn still shows what it recalled for this chat.
        [turn] = await bot.dm(ALICE, "what is Tofu up to?")
        assert "No language model is configured" in turn.text
        assert "my cat is called Tofu" in turn.text
    assert "my cat is called Tofu" in (tmp_path / "ws" / "MEMORY.md").read_text("utf-8")


async def test_remembered_fact_rides_in_a_later_prompt(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm) as bot:
        await bot.dm(ALICE, "/remember my favourite tea is oolong-jade-77")
        assert fake_llm.chat_requests() == []  # explicit saves need no model
        fake_llm.reply_text("You like oolong.")
        [reply] = await bot.dm(ALICE, "which tea should I brew tonight?")
        assert reply.text == "You like oolong."
        [prompt] = chat_requests_for(fake_llm, "which tea should I brew tonight?")
        system = fake_llm.chat_requests()[0]["messages"][0]
        assert system["role"] == "system"
        assert "oolong-jade-77" in system["content"]  # the long-term memory block
        assert "oolong-jade-77" in prompt


# --- scopes -----------------------------------------------------------------------------


@pytest.mark.parametrize("dm_scope", ["main", "per-peer"])
async def test_group_and_dm_never_see_each_other(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI, dm_scope: str
) -> None:
    async with telegram_bot(
        tmp_path, fake_tg, llm=fake_llm, env={"CHATMEM_DM_SCOPE": dm_scope}
    ) as bot:
        await bot.dm(ALICE, "/remember the DM secret is kiwi-4711")
        await bot.group(GROUP, ALICE, "/remember the group secret is mango-0815")

        [dm_scope_reply] = await bot.dm(ALICE, "/scope")
        expected = "main" if dm_scope == "main" else f"peer:{ALICE}"
        assert dm_scope_reply.text == f"scope: {expected} (dm_scope = {dm_scope})"
        [group_scope_reply] = await bot.group(GROUP, ALICE, "/scope")
        assert group_scope_reply.text.startswith(f"scope: group:telegram:{GROUP} ")

        [dm_memory] = await bot.dm(ALICE, "/memory")
        assert "kiwi-4711" in dm_memory.text and "mango" not in dm_memory.text
        [group_memory] = await bot.group(GROUP, ALICE, "/memory")
        assert "mango-0815" in group_memory.text and "kiwi" not in group_memory.text

        [dm_search] = await bot.dm(ALICE, "/search mango-0815")
        assert dm_search.text == "Nothing found. 没有找到。"
        [group_search] = await bot.group(GROUP, ALICE, "/search kiwi-4711")
        assert group_search.text == "Nothing found. 没有找到。"
        [hit] = await bot.group(GROUP, ALICE, "/search mango-0815")
        assert "mango-0815" in hit.text

        await bot.dm(ALICE, "tell me the secret from DM land")
        await bot.group(GROUP, ALICE, f"{MENTION} tell me the secret from group land")
        [dm_prompt] = chat_requests_for(fake_llm, "secret from DM land")
        [group_prompt] = chat_requests_for(fake_llm, "secret from group land")
        assert "kiwi-4711" in dm_prompt and "mango" not in dm_prompt
        assert "mango-0815" in group_prompt and "kiwi" not in group_prompt


async def test_two_users_per_peer_never_see_each_other(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(
        tmp_path, fake_tg, llm=fake_llm, env={"CHATMEM_DM_SCOPE": "per-peer"}
    ) as bot:
        await bot.dm(ALICE, "/remember alice's locker code is 1357-alpha")
        await bot.dm(BOB, "/remember bob's locker code is 2468-bravo", first_name="Bob")

        [alice_memory] = await bot.dm(ALICE, "/memory")
        [bob_memory] = await bot.dm(BOB, "/memory", first_name="Bob")
        assert "1357-alpha" in alice_memory.text and "2468" not in alice_memory.text
        assert "2468-bravo" in bob_memory.text and "1357" not in bob_memory.text
        [alice_search] = await bot.dm(ALICE, "/search locker code")
        [bob_search] = await bot.dm(BOB, "/search locker code", first_name="Bob")
        assert "1357-alpha" in alice_search.text and "2468" not in alice_search.text
        assert "2468-bravo" in bob_search.text and "1357" not in bob_search.text

        await bot.dm(ALICE, "what is my locker code, alice asking")
        await bot.dm(BOB, "what is my locker code, bob asking", first_name="Bob")
        [alice_prompt] = chat_requests_for(fake_llm, "alice asking")
        [bob_prompt] = chat_requests_for(fake_llm, "bob asking")
        assert "1357-alpha" in alice_prompt and "2468" not in alice_prompt
        assert "2468-bravo" in bob_prompt and "1357" not in bob_prompt

    root = tmp_path / "ws"
    alice_file = root / "memory" / "scopes" / f"peer_{ALICE}" / "LONG_TERM.md"
    bob_file = root / "memory" / "scopes" / f"peer_{BOB}" / "LONG_TERM.md"
    assert "1357-alpha" in alice_file.read_text("utf-8")
    assert "2468-bravo" in bob_file.read_text("utf-8")
    # Nothing went to the shared main scope.
    assert not (root / "MEMORY.md").exists()


async def test_new_extracts_memories_visible_to_memory(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    """Offline: `/new` runs the heuristic extractor over the closed session."""
    async with telegram_bot(tmp_path, fake_tg) as bot:
        [empty] = await bot.dm(ALICE, "/memory")
        assert empty.text.startswith("I don't remember anything in this chat yet.")
        await bot.dm(ALICE, "I prefer green tea over coffee")
        await bot.dm(ALICE, "My name is Alice Liddell")
        [learned] = await bot.dm(ALICE, "/new")
        assert learned.text == "New session started. Learned: 2 new, 0 reinforced."
        [memory] = await bot.dm(ALICE, "/memory")
        assert "2 memories, best first:" in memory.text
        assert "[preference] I prefer green tea over coffee" in memory.text
        assert "[fact] My name is Alice Liddell" in memory.text
        # A second /new with nothing said in between learns nothing new.
        [again] = await bot.dm(ALICE, "/new")
        assert again.text == "New session started. Learned: 0 new, 0 reinforced."


# --- forum topics ------------------------------------------------------------------------


async def test_forum_topic_replies_stay_in_their_thread(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    async with telegram_bot(tmp_path, fake_tg) as bot:
        [in_seven] = await bot.group(FORUM, ALICE, "/remember topics share memory", thread_id=7)
        assert in_seven.message_thread_id == 7
        [in_nine] = await bot.group(FORUM, ALICE, "/memory", thread_id=9)
        assert in_nine.message_thread_id == 9
        # Without topic_scope the whole forum is one scope.
        assert "topics share memory" in in_nine.text
        [scope] = await bot.group(FORUM, ALICE, "/scope", thread_id=9)
        assert scope.text == f"scope: group:telegram:{FORUM} (dm_scope = main)"
        # A message in the General topic (no thread) is answered without a thread id.
        [general] = await bot.group(FORUM, ALICE, "/scope")
        assert general.message_thread_id is None
    # Typing goes to the topic being answered (an instant reply may need none at all).
    typing_threads = {a.message_thread_id for a in fake_tg.chat_actions if a.chat_id == FORUM}
    assert {7, 9} <= typing_threads <= {7, 9, None}
    sends = fake_tg.calls_to("sendMessage")
    assert [c.params.get("message_thread_id") for c in sends] == [7, 9, 9, None]


async def test_topic_scope_makes_each_topic_its_own_scope(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm, topic_scope=True) as bot:
        await bot.group(FORUM, ALICE, "/remember topic seven likes pears-77", thread_id=7)
        await bot.group(FORUM, ALICE, "/remember topic nine likes plums-99", thread_id=9)
        [scope7] = await bot.group(FORUM, ALICE, "/scope", thread_id=7)
        assert scope7.text.startswith(f"scope: group:telegram:{FORUM}:topic:7 ")
        [memory7] = await bot.group(FORUM, ALICE, "/memory", thread_id=7)
        [memory9] = await bot.group(FORUM, ALICE, "/memory", thread_id=9)
        assert "pears-77" in memory7.text and "plums" not in memory7.text
        assert "plums-99" in memory9.text and "pears" not in memory9.text
        assert memory7.message_thread_id == 7 and memory9.message_thread_id == 9
        [search9] = await bot.group(FORUM, ALICE, "/search pears-77", thread_id=9)
        assert search9.text == "Nothing found. 没有找到。"

        fake_llm.reply_text("pears, I think")
        [answer] = await bot.group(
            FORUM, ALICE, f"{MENTION} which fruit does topic seven like?", thread_id=7
        )
        assert (answer.text, answer.message_thread_id) == ("pears, I think", 7)
        [prompt] = chat_requests_for(fake_llm, "which fruit does topic seven like?")
        assert "pears-77" in prompt and "plums" not in prompt


# --- who may talk --------------------------------------------------------------------------


async def test_stranger_is_refused_and_nothing_of_theirs_is_stored(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.telegram_bot")
    async with telegram_bot(
        tmp_path, fake_tg, llm=fake_llm, env={"CHATMEM_DM_SCOPE": "per-peer"}
    ) as bot:
        files_before = workspace_files(tmp_path / "ws")
        # In a group: silence, even when mentioned or commanding.
        fake_tg.add_group_message(GROUP, STRANGER, f"{MENTION} remember that stranger-group-x")
        fake_tg.add_group_message(GROUP, STRANGER, "/remember stranger-group-y")
        # In a DM: one polite line.
        [refusal] = await bot.dm(STRANGER, "remember that stranger-dm-z", first_name="Mallory")
        [refusal2] = await bot.dm(STRANGER, "hello?", first_name="Mallory")
        assert refusal.text == refusal2.text == REFUSAL
        assert fake_tg.sent_to(GROUP) == []
        assert await message_rows(bot.core) == []
        assert workspace_files(tmp_path / "ws") == files_before
        assert fake_llm.requests == []
        assert not (tmp_path / "ws" / "memory" / "scopes" / f"peer_{STRANGER}").exists()
        # Refusals are not typing-announced work.
        assert [a for a in fake_tg.chat_actions if a.chat_id in (STRANGER, GROUP)] == []

        # The allowlisted user in the same group is served (the group is not blocked).
        [answer] = await bot.group(GROUP, ALICE, "/scope")
        assert answer.text.startswith("scope: group:telegram:")
    refused = [r for r in caplog.records if "not on the allowlist" in r.getMessage()]
    assert len(refused) == 4
    assert not any("stranger" in r.getMessage() for r in caplog.records)


async def test_allowed_chat_serves_everyone_in_it(tmp_path: Path, fake_tg: FakeTelegramAPI) -> None:
    async with telegram_bot(
        tmp_path, fake_tg, telegram={"allowed_users": [], "allowed_chats": [GROUP]}
    ) as bot:
        [reply] = await bot.group(GROUP, STRANGER, "/remember the group meets on fridays")
        assert reply.text == "Got it, I'll remember: the group meets on fridays"
        # ...but the same person in a DM is still a stranger.
        [refusal] = await bot.dm(STRANGER, "/memory")
        assert refusal.text == REFUSAL


# --- groups: mention rules ----------------------------------------------------------------


async def test_group_answers_only_when_addressed(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm) as bot:
        ignored = [
            "we should order pizza-ignored-1",
            "/memory@some_other_bot",
            "remember that pizza-ignored-2",
            "ask @chatmem_botty about pizza-ignored-4",  # another bot, our name as prefix
        ]
        for text in ignored:
            fake_tg.add_group_message(GROUP, ALICE, text)
        # A topic message's reply_to is the topic root, not a reply to the bot.
        fake_tg.add_group_message(FORUM, ALICE, "pizza-ignored-3 in a topic", thread_id=5)
        # Addressed: a command, an @mention, a reply to the bot.
        [command] = await bot.group(GROUP, ALICE, "/remember@chatmem_bot lunch is at noon")
        assert command.text == "Got it, I'll remember: lunch is at noon"
        fake_llm.reply_text("mentioned answer")
        # After an emoji: Telegram counts entity offsets in UTF-16 units, 2 for 🍱.
        [mentioned] = await bot.group(GROUP, ALICE, "🍱 @ChatMem_Bot what is for lunch?")
        assert mentioned.text == "mentioned answer"
        fake_llm.reply_text("reply answer")
        [replied] = await bot.group(GROUP, ALICE, "and dessert?", reply_to_bot=True)
        assert replied.text == "reply answer"
        fake_llm.reply_text("topic reply answer")
        [in_topic] = await bot.group(
            FORUM, ALICE, "and in the topic?", thread_id=5, reply_to_bot=True
        )
        assert (in_topic.text, in_topic.message_thread_id) == ("topic reply answer", 5)

        assert [m.text for m in fake_tg.sent_to(GROUP)] == [
            "Got it, I'll remember: lunch is at noon",
            "mentioned answer",
            "reply answer",
        ]
        rows = await message_rows(bot.core, "content LIKE '%pizza%'")
        assert rows == []
        assert not any("pizza" in p for p in turn_prompts(fake_llm))
        # The mention itself (any letter case) is not part of what was stored.
        stored = await message_rows(bot.core, "role = 'user' AND content LIKE '%lunch?%'")
        assert [r[3] for r in stored] == ["🍱 what is for lunch?"]


async def test_group_without_mention_requirement_answers_plain_messages(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, telegram={"group_requires_mention": False}) as bot:
        [reply] = await bot.group(GROUP, ALICE, "remember that the office wifi is fast")
        assert reply.text == "Got it, I'll remember: the office wifi is fast"
        # Another bot's command is still not for us.
        fake_tg.add_group_message(GROUP, ALICE, "/new@some_other_bot")
        [scope] = await bot.group(GROUP, ALICE, "/scope")
        assert scope.text.startswith("scope: group:telegram:")
        assert len(fake_tg.sent_to(GROUP)) == 2
