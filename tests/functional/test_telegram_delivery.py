"""Telegram end to end, delivery: retries, flood control, typing, long replies, duplicate
updates, order under concurrency, and a start that fails in one line.

Same setup as test_telegram.py: the real python-telegram-bot client against the fake Bot API
on a fresh workspace.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest
from telegram.ext import AIORateLimiter

import adapters.telegram_bot as telegram_adapter
from adapters.telegram_bot import MAX_MESSAGE
from memory_core.base.scope import MAIN
from testkit.bot import wait_until
from testkit.openai_server import FakeOpenAI
from testkit.telegram_api import FakeTelegramAPI
from tests.functional.conftest import ALICE, BOB, GROUP, message_rows, telegram_bot
from tests.functional.test_console import chatmem_executable, clean_env

# --- delivery -------------------------------------------------------------------------------


async def test_retry_after_is_retried_and_delivered_once(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    async with telegram_bot(tmp_path, fake_tg) as bot:
        fake_tg.fail_next("sendMessage", error_code=429, retry_after=1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        [reply] = await bot.dm(ALICE, "/remember retries are fine")
        waited = loop.time() - started
        assert reply.text == "Got it, I'll remember: retries are fine"
    # The bot has stopped: no request is left in flight, so a second copy would be here.
    assert len(fake_tg.sent_to(ALICE)) == 1
    attempts = fake_tg.calls_to("sendMessage")
    assert [c.error_code for c in attempts] == [429, None]
    assert attempts[0].params["text"] == attempts[1].params["text"]
    assert waited >= 0.9  # the retry_after was honoured


async def test_flood_control_is_waited_out_by_ptb_rate_limiter(
    tmp_path: Path, fake_tg: FakeTelegramAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """429s are retried after their retry_after by python-telegram-bot's AIORateLimiter,
    for a reply as for any other request of the application's bot; each lands once."""
    caplog.set_level(logging.INFO, logger="telegram.ext")
    async with telegram_bot(tmp_path, fake_tg) as bot:
        assert isinstance(bot.app.bot.rate_limiter, AIORateLimiter)
        fake_tg.fail_next("sendMessage", error_code=429, retry_after=1, times=2)
        [reply] = await bot.group(GROUP, ALICE, "/remember@chatmem_bot floods pass")
        assert reply.text == "Got it, I'll remember: floods pass"
        # Not only the adapter's replies: every request of the bot goes through the limiter.
        fake_tg.fail_next("sendMessage", error_code=429, retry_after=1)
        direct = await bot.app.bot.send_message(ALICE, "sent directly")
        assert direct.text == "sent directly"
    # The bot has stopped: no request is left in flight, so a second copy would be here.
    assert [m.text for m in fake_tg.sent_to(GROUP)] == [reply.text]
    assert [m.text for m in fake_tg.sent_to(ALICE)] == ["sent directly"]
    attempts = fake_tg.calls_to("sendMessage")
    assert [c.error_code for c in attempts] == [429, 429, None, 429, None]
    retried = [
        r
        for r in caplog.records
        if r.name == "telegram.ext.AIORateLimiter" and "Retrying after" in r.getMessage()
    ]
    assert len(retried) == 3
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_flood_control_beyond_the_retries_is_logged_and_serving_goes_on(
    tmp_path: Path,
    fake_tg: FakeTelegramAPI,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(telegram_adapter, "FLOOD_RETRIES", 1)
    caplog.set_level(logging.WARNING)
    async with telegram_bot(tmp_path, fake_tg) as bot:
        fake_tg.fail_next("sendMessage", error_code=429, retry_after=1, times=2)
        fake_tg.add_private_message(ALICE, "/remember floods can win")
        await fake_tg.wait_for_calls("sendMessage", 2)
        # The message was stored all the same, and the next one is answered normally.
        [reply] = await bot.dm(ALICE, "/memory")
        assert "floods can win" in reply.text
    assert [c.error_code for c in fake_tg.calls_to("sendMessage")] == [429, 429, None]
    messages = [r.getMessage() for r in caplog.records]
    assert any("could not send a reply to chat 42: Flood control" in m for m in messages)
    assert not any("telegram update failed" in m for m in messages)


async def test_typing_is_sent_while_working(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm) as bot:
        fake_llm.reply_text("thought about it", delay=0.3)
        [reply] = await bot.dm(ALICE, "think hard about this")
        assert reply.text == "thought about it"
    typing = [
        i
        for i, c in enumerate(fake_tg.calls)
        if c.method.lower() == "sendchataction" and c.params["chat_id"] == ALICE
    ]
    send = next(i for i, c in enumerate(fake_tg.calls) if c.method.lower() == "sendmessage")
    assert typing and typing[0] < send
    assert all(a.action == "typing" for a in fake_tg.chat_actions)


async def test_long_reply_is_split_on_paragraphs_in_order(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    paragraphs = [f"Paragraph {i:02d}. " + ("lorem ipsum " * 90).strip() for i in range(12)]
    long_text = "\n\n".join(paragraphs)
    assert len(long_text) > 2 * MAX_MESSAGE
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm):
        fake_llm.reply_text(long_text)
        before = len(fake_tg.sent_to(ALICE))
        fake_tg.add_private_message(ALICE, "tell me a long story")
        await wait_until(
            lambda: "Paragraph 11." in "".join(m.text for m in fake_tg.sent_to(ALICE)),
            "the last piece",
        )
        pieces = [m.text for m in fake_tg.sent_to(ALICE)[before:]]
    assert len(pieces) >= 3
    assert all(len(p) <= MAX_MESSAGE for p in pieces)
    # Cut only between paragraphs: every piece is whole paragraphs, and nothing is lost.
    assert [p.split("\n\n") for p in pieces] == [[q for q in paragraphs if q in p] for p in pieces]
    assert "\n\n".join(pieces) == long_text
    assert all(m.error_code is None for m in fake_tg.calls_to("sendMessage"))


async def test_duplicate_update_is_answered_once(tmp_path: Path, fake_tg: FakeTelegramAPI) -> None:
    async with telegram_bot(tmp_path, fake_tg) as bot:
        fake_tg.add_private_message(ALICE, "remember that duplicates are dropped", message_id=500)
        fake_tg.add_private_message(ALICE, "remember that duplicates are dropped", message_id=500)
        await fake_tg.wait_for_sent(1, chat_id=ALICE, timeout=10)
        # The same message id in another chat is another message.
        [other] = await bot.dm(BOB, "/remember bob has a message 500 too", message_id=500)
        assert other.text.startswith("Got it")
        [sentinel] = await bot.dm(ALICE, "/scope")
        assert sentinel.text.startswith("scope: main")
        texts = [m.text for m in fake_tg.sent_to(ALICE)]
        assert texts == ["Got it, I'll remember: duplicates are dropped", sentinel.text]
        rows = await message_rows(bot.core, "content LIKE '%duplicates are dropped%'")
        assert [r[1] for r in rows] == ["user", "assistant"]


async def test_forbidden_on_send_is_logged_not_crashing(
    tmp_path: Path, fake_tg: FakeTelegramAPI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with telegram_bot(tmp_path, fake_tg) as bot:
        fake_tg.fail_next("sendMessage", error_code=403)
        # Plain text: a command is answered but never stored as a message.
        fake_tg.add_private_message(ALICE, "remember that blocked users still get remembered")
        await fake_tg.wait_for_calls("sendMessage")
        # The bot keeps serving: the next message is answered normally.
        [reply] = await bot.dm(ALICE, "/memory")
        assert "blocked users still get remembered" in reply.text
        assert await message_rows(bot.core, "content LIKE '%blocked users%' AND role = 'user'")
    assert [c.error_code for c in fake_tg.calls_to("sendMessage")] == [403, None]
    messages = [r.getMessage() for r in caplog.records]
    assert any("telegram refused a message to chat 42" in m for m in messages)
    assert not any("telegram update failed" in m for m in messages)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_private_chat_order_is_kept_under_concurrency(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    """PTB handles 8 updates at once; one chat's messages still run in order."""
    async with telegram_bot(tmp_path, fake_tg) as bot:
        facts = [
            "the boiler is serviced in March",
            "Alice's dentist is Dr Okafor",
            "the spare key hangs in the shed",
            "book club meets on Thursdays",
            "the car needs winter tyres",
            "rent is due on the first",
        ]
        for fact in facts:
            fake_tg.add_private_message(ALICE, f"/remember {fact}")
        fake_tg.add_private_message(ALICE, "/memory")
        sent = await fake_tg.wait_for_sent(7, chat_id=ALICE)
        assert [m.text for m in sent[:6]] == [f"Got it, I'll remember: {f}" for f in facts]
        assert sent[6].text.startswith("6 memories, best first:")
        assert len(await bot.core.memories.entries(MAIN)) == 6


# --- a start that fails: one line, never the token --------------------------------------


def _closed_port() -> int:
    """A 127.0.0.1 port nothing listens on: bound once, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("failure", ["wrong token", "getMe 404", "no network"])
async def test_a_failed_start_says_one_line_without_the_token(
    tmp_path: Path, fake_tg: FakeTelegramAPI, failure: str
) -> None:
    """`chatmem telegram` whose token Telegram rejects (401 or 404 on getMe) or whose API
    cannot be reached: exit 2 and one line naming what to fix; neither the output, nor any
    log line (at DEBUG), nor any file of the workspace holds the token."""
    token = "123:wrongtoken-" + "x" * 20
    base_url = fake_tg.base_url
    if failure == "getMe 404":
        token = fake_tg.token
        fake_tg.fail_next("getMe", error_code=404, description="Not Found")
    elif failure == "no network":
        base_url = f"http://127.0.0.1:{_closed_port()}/bot"
    workspace = tmp_path / "ws"
    config_file = tmp_path / "chatmem.toml"
    config_file.write_text('log_level = "DEBUG"\n', encoding="utf-8")
    common = ["--config", str(config_file), "--workspace", str(workspace)]
    initialised = await asyncio.create_subprocess_exec(chatmem_executable(), "init", *common)
    assert await initialised.wait() == 0
    process = await asyncio.create_subprocess_exec(
        chatmem_executable(),
        "telegram",
        *common,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(
            {
                "TELEGRAM_BOT_TOKEN": token,
                "TELEGRAM_API_BASE_URL": base_url,
                "CHATMEM_TELEGRAM_ALLOWED_USERS": "42",
            }
        ),
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2, err.decode()
    errors = [line for line in err.decode().splitlines() if line.startswith("chatmem: error:")]
    assert len(errors) == 1, err.decode()
    assert "Traceback" not in err.decode()
    expected = "cannot reach" if failure == "no network" else "refused the bot token"
    assert expected in errors[0]
    secret = token.encode()
    assert secret not in out and secret not in err
    assert token.split(":", 1)[1].encode() not in err
    for path in workspace.rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes(), path
