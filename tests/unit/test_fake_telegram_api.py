"""The Telegram fake is only useful if the *real* PTB client accepts it, so every test here
drives it through python-telegram-bot itself (Bot / Application), not through raw HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from telegram import BotCommand, Update
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    ExtBot,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from testkit.telegram_api import FakeTelegramAPI, build_entities, utf16_len

TOKEN = "123:ABC"


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    # Without this every RetryAfter emits PTBDeprecationWarning, an error under our filters.
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI(token=TOKEN, bot_username="chatmem_bot") as api:
        yield api


def build_app(fake: FakeTelegramAPI) -> Application:  # type: ignore[type-arg]
    return (
        Application.builder()
        .token(fake.token)
        .base_url(fake.base_url)
        .base_file_url(fake.base_file_url)
        .build()
    )


@contextlib.asynccontextmanager
async def polling(app: Application) -> AsyncIterator[Application]:  # type: ignore[type-arg]
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)  # type: ignore[union-attr]
        try:
            yield app
        finally:
            await app.updater.stop()  # type: ignore[union-attr]
            await app.stop()


@pytest.fixture
async def bot(fake: FakeTelegramAPI) -> AsyncIterator[ExtBot[None]]:
    async with ExtBot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url) as b:
        yield b


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.message is not None and update.message.text is not None
    await update.message.reply_text(f"echo: {update.message.text}", do_quote=False)


async def test_initialize_fetches_get_me(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    assert (bot.id, bot.username, bot.first_name) == (123, "chatmem_bot", "ChatMem")
    me = await bot.get_me()
    assert me.is_bot and me.username == "chatmem_bot"
    assert [c.method for c in fake.calls] == ["getMe", "getMe"]


async def test_wrong_token_is_unauthorized(fake: FakeTelegramAPI) -> None:
    request, updates_request = HTTPXRequest(), HTTPXRequest()
    other = ExtBot(
        "999:WRONG", base_url=fake.base_url, request=request, get_updates_request=updates_request
    )
    with pytest.raises(InvalidToken):
        await other.get_me()
    await request.shutdown()
    await updates_request.shutdown()
    assert fake.calls == []


async def test_handlers_reply_in_the_right_chat(fake: FakeTelegramAPI) -> None:
    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        await update.message.reply_text("welcome")

    app = build_app(fake)
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    async with polling(app):
        fake.add_private_message(42, "/start")
        fake.add_group_message(-100500, 7, "/start@chatmem_bot")
        fake.add_group_message(-100600, 8, "/start@other_bot")  # not for us: ignored
        fake.add_private_message(43, "hello")
        await fake.wait_for_sent(3)

    assert [(m.chat_id, m.text) for m in fake.sent_messages] == [
        (42, "welcome"),
        (-100500, "welcome"),
        (43, "echo: hello"),
    ]
    # PTB quotes by default in groups (reply_parameters) but not in private chats.
    assert fake.sent_to(-100500)[0].reply_to_message_id == 1
    assert fake.sent_to(42)[0].reply_to_message_id is None
    methods = [c.method for c in fake.calls]
    assert methods[:3] == ["getMe", "deleteWebhook", "getUpdates"]
    # On stop PTB confirms what it fetched with one last, non-blocking getUpdates.
    assert fake.calls_to("getUpdates")[-1].params["timeout"] == 0
    assert fake.pending_updates() == []


async def test_topic_reply_keeps_thread_id(fake: FakeTelegramAPI) -> None:
    app = build_app(fake)
    app.add_handler(MessageHandler(filters.TEXT, echo))
    async with polling(app):
        update = fake.add_group_message(-100777, 7, "in a topic", thread_id=55)
        [sent] = await fake.wait_for_sent(1)
    message = update["message"]
    assert message["is_topic_message"] is True and message["message_thread_id"] == 55
    assert message["reply_to_message"]["forum_topic_created"]  # Telegram's topic root
    assert message["message_id"] > 55
    assert (sent.chat_id, sent.message_thread_id, sent.reply_to_message_id) == (-100777, 55, None)
    assert sent.message["is_topic_message"] is True


async def test_reply_to_bot_is_seen_by_ptb(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    data = fake.add_group_message(-1001, 7, "and also", reply_to_bot=True)
    update = Update.de_json(data, bot)
    assert update.message is not None and update.message.reply_to_message is not None
    assert update.message.reply_to_message.from_user.id == bot.id  # type: ignore[union-attr]


async def test_commands_and_chat_actions_are_recorded(
    fake: FakeTelegramAPI, bot: ExtBot[None]
) -> None:
    assert await bot.set_my_commands([BotCommand("start", "开始"), BotCommand("forget", "忘记")])
    assert fake.commands == [
        {"command": "start", "description": "开始"},
        {"command": "forget", "description": "忘记"},
    ]
    assert [c.command for c in await bot.get_my_commands()] == ["start", "forget"]
    assert await bot.send_chat_action(-1001, ChatAction.TYPING, message_thread_id=9)
    [action] = fake.chat_actions
    assert (action.chat_id, action.action, action.message_thread_id) == (-1001, "typing", 9)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"error_code": 403}, Forbidden),
        ({"error_code": 400, "description": "Bad Request: chat not found"}, BadRequest),
        ({"mode": "network"}, NetworkError),
        ({"mode": "disconnect"}, NetworkError),
    ],
)
async def test_injected_failures_map_to_ptb_errors(
    fake: FakeTelegramAPI, bot: ExtBot[None], kwargs: dict[str, object], error: type[Exception]
) -> None:
    fake.fail_next("sendMessage", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(error):
        await bot.send_message(1, "lost")
    assert (await bot.send_message(1, "delivered")).text == "delivered"
    assert [m.text for m in fake.sent_messages] == ["delivered"]


async def test_retry_after(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    fake.fail_next("sendMessage", error_code=429, retry_after=3, times=2)
    for _ in range(2):
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(1, "too fast")
        assert caught.value.retry_after == timedelta(seconds=3)
    await bot.send_message(1, "now ok")
    assert [c.error_code for c in fake.calls_to("sendMessage")] == [429, 429, None]


async def test_hang_times_out(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    fake.fail_next("sendMessage", mode="hang")
    with pytest.raises(TimedOut):
        await bot.send_message(1, "slow", read_timeout=0.3)


async def test_unknown_method_is_404(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    with pytest.raises(EndPointNotFound):
        await bot.do_api_request("sendTelepathy", api_kwargs={"chat_id": 1})
    assert [(c.method, c.params) for c in fake.unknown_calls] == [("sendTelepathy", {"chat_id": 1})]


async def test_edit_and_delete(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    sent = await bot.send_message(5, "draft")
    edited = await bot.edit_message_text("final", chat_id=5, message_id=sent.message_id)
    assert not isinstance(edited, bool) and edited.text == "final"
    with pytest.raises(BadRequest, match="not modified"):
        await bot.edit_message_text("final", chat_id=5, message_id=sent.message_id)
    assert await bot.delete_message(5, sent.message_id)
    with pytest.raises(BadRequest, match="not found"):
        await bot.delete_message(5, sent.message_id)


async def test_message_ids_increase_per_chat(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    fake.add_private_message(1, "hi")
    ids = [(await bot.send_message(chat, "x")).message_id for chat in (1, 1, 2)]
    assert ids == [2, 3, 1]


async def test_offset_confirms_updates(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    for text in ("a", "b", "c"):
        fake.add_private_message(42, text)
    first = await bot.get_updates(limit=2)
    assert [u.message.text for u in first] == ["a", "b"]  # type: ignore[union-attr]
    again = await bot.get_updates()  # nothing confirmed yet: redelivered
    assert [u.update_id for u in again] == [1, 2, 3]
    rest = await bot.get_updates(offset=again[1].update_id + 1)
    assert [u.message.text for u in rest] == ["c"]  # type: ignore[union-attr]
    assert await bot.get_updates(offset=rest[-1].update_id + 1) == ()
    assert fake.pending_updates() == [] and fake.confirmed_offset == 4


async def test_long_poll_waits_and_wakes(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    started = time.monotonic()
    assert await bot.get_updates(timeout=1) == ()
    assert 0.9 <= time.monotonic() - started < 3

    poll = asyncio.create_task(bot.get_updates(timeout=10))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    fake.add_private_message(42, "wake up")
    updates = await asyncio.wait_for(poll, 2)
    assert time.monotonic() - started < 1
    assert [u.message.text for u in updates] == ["wake up"]  # type: ignore[union-attr]


async def test_stop_releases_long_polls() -> None:
    api = await FakeTelegramAPI(TOKEN).start()
    async with ExtBot(api.token, base_url=api.base_url) as bot:
        poll = asyncio.create_task(bot.get_updates(timeout=30))
        await api.wait_for_calls("getMe")
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await api.stop()
        with contextlib.suppress(TelegramError):
            await asyncio.wait_for(poll, 2)
        assert time.monotonic() - started < 2


async def test_clean_stop_is_fast(fake: FakeTelegramAPI) -> None:
    app = build_app(fake)
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=10)  # type: ignore[union-attr]
        await asyncio.sleep(0.3)  # a long poll is now held open by the fake
        started = time.monotonic()
        await app.updater.stop()  # type: ignore[union-attr]
        await app.stop()
    assert time.monotonic() - started < 2


async def test_updater_backs_off_after_network_error(fake: FakeTelegramAPI) -> None:
    errors: list[TelegramError] = []
    fake.fail_next("getUpdates", mode="network")
    app = build_app(fake)
    app.add_handler(MessageHandler(filters.TEXT, echo))
    async with app:
        await app.start()
        await app.updater.start_polling(  # type: ignore[union-attr]
            poll_interval=0, timeout=1, error_callback=errors.append
        )
        fake.add_private_message(42, "still there?")
        await fake.wait_for_sent(1, timeout=5)  # after PTB's 1 s back-off
        await app.updater.stop()  # type: ignore[union-attr]
        await app.stop()
    assert [type(e) for e in errors] == [NetworkError]
    assert fake.calls_to("getUpdates")[0].error_code == 502


async def test_invalid_token_kills_polling(fake: FakeTelegramAPI) -> None:
    """PTB aborts its polling loop on 401/404 and re-raises it from ``updater.stop()``."""
    fake.fail_next("getUpdates", error_code=401)
    app = build_app(fake)
    async with app:
        await app.start()
        await app.updater.start_polling(poll_interval=0, timeout=1)  # type: ignore[union-attr]
        await fake.wait_for_calls("getUpdates")
        fake.add_private_message(42, "anyone?")
        await asyncio.sleep(0.3)
        assert app.updater.running  # type: ignore[union-attr]  # ...yet nobody polls
        assert len(fake.calls_to("getUpdates")) == 1
        with pytest.raises(InvalidToken):
            await app.updater.stop()  # type: ignore[union-attr]
        await app.stop()


async def test_entities_use_utf16_offsets(fake: FakeTelegramAPI, bot: ExtBot[None]) -> None:
    text = "你好😀 @chatmem_bot 记住我喜欢乌龙茶"
    data = fake.add_group_message(-1001, 7, text)
    [entity] = data["message"]["entities"]
    assert entity == {"type": "mention", "offset": 5, "length": 12}  # 😀 is 2 UTF-16 units
    message = Update.de_json(data, bot).message
    assert message is not None
    assert list(message.parse_entities().values()) == ["@chatmem_bot"]

    command = build_entities("/remember@chatmem_bot 🍵 tea")
    assert command == [{"type": "bot_command", "offset": 0, "length": 21}]
    assert build_entities("/start你好") == [{"type": "bot_command", "offset": 0, "length": 6}]
    assert build_entities("mail me@example.com") == []
    assert utf16_len("😀a") == 3


async def test_callback_query(fake: FakeTelegramAPI) -> None:
    async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.callback_query is not None
        await update.callback_query.answer("ok")
        await update.callback_query.edit_message_text(f"chose {update.callback_query.data}")

    app = build_app(fake)
    app.add_handler(CallbackQueryHandler(on_button))
    async with polling(app):
        sent = await app.bot.send_message(42, "pick one")
        fake.add_callback_query(42, "tea", message=fake.sent_messages[-1].message)
        [edit] = await fake.wait_for_calls("editMessageText")
    assert edit.params["text"] == "chose tea" and edit.params["message_id"] == sent.message_id
    assert fake.calls_to("answerCallbackQuery")[0].params["text"] == "ok"


async def test_wait_for_sent_timeout_says_what_was_sent(
    fake: FakeTelegramAPI, bot: ExtBot[None]
) -> None:
    await bot.send_message(1, "only one")
    with pytest.raises(TimeoutError, match="only one"):
        await fake.wait_for_sent(2, timeout=0.2)


async def test_many_chats_round_trip(fake: FakeTelegramAPI) -> None:
    """A scaled-down load test: replies keep per-chat order and nothing is lost."""
    app = build_app(fake)
    app.add_handler(MessageHandler(filters.TEXT, echo))
    chats, per_chat = 20, 10
    async with polling(app):
        for i in range(per_chat):
            for chat in range(chats):
                fake.add_private_message(1000 + chat, f"m{i}")
        await fake.wait_for_sent(chats * per_chat, timeout=30)
    for chat in range(chats):
        assert [m.text for m in fake.sent_to(1000 + chat)] == [
            f"echo: m{i}" for i in range(per_chat)
        ]
    assert fake.pending_updates() == []
