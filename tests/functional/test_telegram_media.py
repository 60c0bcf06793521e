"""Photos and files sent to the Telegram bot reach memory as text.

The real python-telegram-bot client polls the fake Bot API (getFile and the file download
included); photo descriptions come from the fake OpenAI server through the real openai
client. Each test checks what was stored, that `core.finder.search` finds it, and that the turn
was answered.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.media import Attachment, media_text, one_sentence
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.engine import MemoryCore
from testkit.bot import (
    REPLY_TIMEOUT,
    TOKEN,
    TelegramBot,
    last_user_text,
    llm_env,
    running_app,
    wait_until,
)
from testkit.openai_server import FakeOpenAI, Reply
from testkit.telegram_api import FakeTelegramAPI, SentMessage
from tests.functional.conftest import (
    ALICE,
    BOB,
    GROUP,
    make_config,
    message_rows,
    telegram_bot,
)

VISION_MODEL = "gpt-fake-vision"
SUNSET = b"\xff\xd8\xff\xe0 a jpeg of a sunset over Qingdao beach \xff\xd9" * 40
DESCRIPTION = "A red sun sets over the sea behind a sandy beach with a pier."


def is_vision_request(body: Mapping[str, Any]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(part.get("type") == "image_url" for part in m["content"])
        for m in body.get("messages", [])
    )


def vision_requests(llm: FakeOpenAI) -> list[dict[str, Any]]:
    return [body for body in llm.chat_requests() if is_vision_request(body)]


def image_urls(body: Mapping[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]


def answer_with(vision: Reply | str, turn: str = "Lovely photo!") -> Any:
    """A responder: `vision` for description requests, `turn` for chat turns."""

    def respond(body: dict[str, Any]) -> Reply | str:
        return vision if is_vision_request(body) else turn

    return respond


@asynccontextmanager
async def vision_bot(
    tmp_path: Path,
    fake: FakeTelegramAPI,
    llm: FakeOpenAI,
    *,
    telegram: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[TelegramBot]:
    """The bot with a chat model and `llm.vision_model` set, both on the fake server."""
    settings: dict[str, Any] = {
        "bot_token": fake.token,
        "api_base_url": fake.base_url,
        "allowed_users": [ALICE, BOB],
        **(telegram or {}),
    }
    config = make_config(tmp_path / "ws", env={**llm_env(llm), **(env or {})}, telegram=settings)
    config = config.model_copy(
        update={"llm": config.llm.model_copy(update={"vision_model": VISION_MODEL})}
    )
    async with MemoryCore.open(config) as core, running_app(core, config) as app:
        yield TelegramBot(fake, core, config, app, llm)


async def photo(bot: TelegramBot, user: int = ALICE, **kw: Any) -> SentMessage:
    """A private photo (SUNSET unless `image` is given) and the one reply to it."""
    before = len(bot.fake.sent_to(user))
    bot.fake.add_private_photo(user, kw.pop("image", SUNSET), **kw)
    sent = await bot.fake.wait_for_sent(before + 1, timeout=REPLY_TIMEOUT, chat_id=user)
    assert len(sent) == before + 1
    return sent[-1]


async def user_texts(core: MemoryCore) -> list[str]:
    return [row[3] for row in await message_rows(core, "role = 'user'")]


async def found(core: MemoryCore, scope: ScopeKey, query: str) -> list[str]:
    return [" ".join(hit.text.split()) for hit in await core.finder.search(scope, query)]


# --- without a vision model ------------------------------------------------------------


async def test_photo_with_caption_is_stored_and_found(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    async with telegram_bot(tmp_path, fake_tg) as bot:
        reply = await photo(bot, caption="sunset at Qingdao beach")
        assert "No language model is configured" in reply.text
        assert await user_texts(bot.core) == ["[photo] sunset at Qingdao beach"]
        hits = await found(bot.core, MAIN, "the photo of the sunset I sent")
        assert any("[photo] sunset at Qingdao beach" in hit for hit in hits)
    # No vision model: nothing was downloaded.
    assert fake_tg.calls_to("getFile") == [] and fake_tg.downloads == []


async def test_chinese_caption_gets_a_chinese_label(
    tmp_path: Path, fake_tg: FakeTelegramAPI
) -> None:
    async with telegram_bot(tmp_path, fake_tg) as bot:
        await photo(bot, caption="青岛海边的日落")
        assert await user_texts(bot.core) == ["[照片] 青岛海边的日落"]
        assert any("青岛海边的日落" in hit for hit in await found(bot.core, MAIN, "日落的照片"))


async def test_photo_without_caption_still_makes_a_turn(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with telegram_bot(tmp_path, fake_tg, llm=fake_llm) as bot:
        fake_llm.reply_text("Nice picture. What is it?")
        reply = await photo(bot)
        assert reply.text == "Nice picture. What is it?"
        assert await user_texts(bot.core) == ["[photo]"]
        # The model answered the same line that was stored.
        [turn] = fake_llm.chat_requests()
        assert last_user_text(turn).endswith("[photo]")
        # Recall stays sensible: a bare photo is not what unrelated questions find.
        assert await found(bot.core, MAIN, "dentist appointment") == []


async def test_document_with_caption_is_named_not_downloaded(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with vision_bot(tmp_path, fake_tg, fake_llm) as bot:
        fake_llm.set_responder(answer_with(DESCRIPTION))
        fake_tg.add_private_document(
            ALICE,
            b"%PDF-1.7 quarterly numbers",
            file_name="report-q3.pdf",
            mime_type="application/pdf",
            caption="Q3 numbers for the board",
        )
        [reply] = await fake_tg.wait_for_sent(1, chat_id=ALICE, timeout=REPLY_TIMEOUT)
        assert reply.text == "Lovely photo!"
        assert await user_texts(bot.core) == ["[file: report-q3.pdf] Q3 numbers for the board"]
        assert any("report-q3.pdf" in hit for hit in await found(bot.core, MAIN, "Q3 report"))
        assert vision_requests(fake_llm) == []
    assert fake_tg.calls_to("getFile") == [] and fake_tg.downloads == []


# --- with a vision model ---------------------------------------------------------------


async def test_photo_description_is_stored_and_the_request_carried_the_image(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with vision_bot(tmp_path, fake_tg, fake_llm) as bot:
        fake_llm.set_responder(answer_with(f'"{DESCRIPTION}"\n\nAnything else?'))
        reply = await photo(bot, caption="sunset at Qingdao beach")
        assert reply.text == "Lovely photo!"
        stored = f"[photo] sunset at Qingdao beach — description: {DESCRIPTION}"
        assert await user_texts(bot.core) == [stored]
        hits = await found(bot.core, MAIN, "pier on the beach")
        assert any(stored in hit for hit in hits)

        [vision] = vision_requests(fake_llm)
        assert vision["model"] == VISION_MODEL
        expected = "data:image/jpeg;base64," + base64.b64encode(SUNSET).decode()
        assert image_urls(vision) == [expected]
        assert "sunset at Qingdao beach" in str(vision["messages"])  # the caption as context
        # The turn itself went to the chat model, with the same text.
        [turn] = [b for b in fake_llm.chat_requests() if not is_vision_request(b)]
        assert turn["model"] == "gpt-fake"
        assert stored in last_user_text(turn)
    # The largest size was downloaded, once, through getFile.
    assert fake_tg.downloads == ["photos/file_1.jpg"]
    assert len(fake_tg.calls_to("getFile")) == 1


async def test_photo_without_caption_gets_its_description(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with vision_bot(tmp_path, fake_tg, fake_llm) as bot:
        fake_llm.set_responder(answer_with(DESCRIPTION))
        await photo(bot)
        assert await user_texts(bot.core) == [f"[photo] description: {DESCRIPTION}"]
        assert any(DESCRIPTION in hit for hit in await found(bot.core, MAIN, "red sun sea"))


async def test_image_file_is_described_as_png(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    png = b"\x89PNG\r\n\x1a\n a whiteboard with the sprint plan"
    async with vision_bot(tmp_path, fake_tg, fake_llm) as bot:
        fake_llm.set_responder(answer_with("A whiteboard listing the sprint plan."))
        fake_tg.add_private_document(
            ALICE, png, file_name="board.png", mime_type="image/png", caption="today's plan"
        )
        await fake_tg.wait_for_sent(1, chat_id=ALICE, timeout=REPLY_TIMEOUT)
        assert await user_texts(bot.core) == [
            "[image: board.png] today's plan — description: A whiteboard listing the sprint plan."
        ]
        [vision] = vision_requests(fake_llm)
        assert image_urls(vision) == ["data:image/png;base64," + base64.b64encode(png).decode()]


@pytest.mark.parametrize("failure", ["model error", "slow model", "getFile error", "download"])
async def test_failed_description_keeps_the_caption_and_answers(
    tmp_path: Path,
    fake_tg: FakeTelegramAPI,
    fake_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    failure: str,
) -> None:
    vision: Reply | str = DESCRIPTION
    if failure == "model error":
        vision = Reply(status=500, error_message="vision backend exploded")
    elif failure == "slow model":
        vision = Reply(text=DESCRIPTION, delay=5.0)
    elif failure == "getFile error":
        fake_tg.fail_next("getFile", error_code=400, description="Bad Request: file is too big")
    else:
        fake_tg.fail_next("download", mode="network")
    caplog.set_level(logging.DEBUG)
    telegram = {"describe_timeout_seconds": 1.0}
    async with vision_bot(tmp_path, fake_tg, fake_llm, telegram=telegram) as bot:
        fake_llm.set_responder(answer_with(vision))
        loop = asyncio.get_running_loop()
        started = loop.time()
        reply = await photo(bot, caption="sunset at Qingdao beach")
        assert loop.time() - started < 4.0  # a slow description is given up, not waited out
        assert reply.text == "Lovely photo!"
        assert await user_texts(bot.core) == ["[photo] sunset at Qingdao beach"]
        assert any("sunset" in hit for hit in await found(bot.core, MAIN, "sunset photo"))
    ours = [r for r in caplog.records if r.name.startswith("adapters")]
    assert [r for r in ours if r.levelno == logging.WARNING and "photo" in r.getMessage()]
    assert not any(TOKEN in r.getMessage() for r in ours)  # the download URL holds it


async def test_photo_over_the_size_cap_takes_a_smaller_size_or_none(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    cap = len(SUNSET) - 1  # the full size is too big, the thumbnail fits
    async with vision_bot(tmp_path, fake_tg, fake_llm, telegram={"max_photo_bytes": cap}) as bot:
        fake_llm.set_responder(answer_with(DESCRIPTION))
        await photo(bot, caption="first")
        assert fake_tg.downloads == ["photos/file_1_s.jpg"]
        # A size claiming to be small but arriving larger is dropped after the download.
        liar = {**fake_tg.add_file(SUNSET, file_path="photos/liar.jpg"), "width": 800}
        await photo(bot, caption="second", sizes=[{**liar, "file_size": 10, "height": 600}])
        # One size, too big: not even asked for.
        big = {**fake_tg.add_file(SUNSET, file_path="photos/big.jpg"), "width": 800}
        await photo(bot, caption="third", sizes=[{**big, "height": 600}])
        assert await user_texts(bot.core) == [
            f"[photo] first — description: {DESCRIPTION}",
            "[photo] second",
            "[photo] third",
        ]
    assert fake_tg.downloads == ["photos/file_1_s.jpg"]
    assert len(vision_requests(fake_llm)) == 1


async def test_describe_photos_off_downloads_nothing(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    telegram = {"describe_photos": False}
    async with vision_bot(tmp_path, fake_tg, fake_llm, telegram=telegram) as bot:
        await photo(bot, caption="sunset")
        assert await user_texts(bot.core) == ["[photo] sunset"]
    assert fake_tg.downloads == [] and vision_requests(fake_llm) == []


# --- scopes and groups -----------------------------------------------------------------


async def test_photo_lands_in_the_senders_scope_only(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    env = {"CHATMEM_DM_SCOPE": "per-peer"}
    async with vision_bot(tmp_path, fake_tg, fake_llm, env=env) as bot:
        fake_llm.set_responder(answer_with(DESCRIPTION))
        await photo(bot, ALICE, caption="my bike, the green one")
        await photo(bot, BOB, caption="lunch today", first_name="Bob")
        rows = await message_rows(bot.core, "role = 'user'")
        assert [(r[0], r[3].split(" —")[0]) for r in rows] == [
            (f"peer:{ALICE}", "[photo] my bike, the green one"),
            (f"peer:{BOB}", "[photo] lunch today"),
        ]
        alice, bob = ScopeKey(f"peer:{ALICE}"), ScopeKey(f"peer:{BOB}")
        assert any("green" in hit for hit in await found(bot.core, alice, "green bike"))
        assert not any("green" in hit for hit in await found(bot.core, bob, "green bike"))
        assert not any("green" in hit for hit in await found(bot.core, MAIN, "green bike"))
        [bob_search] = await bot.dm(BOB, "/search green bike", first_name="Bob")
        assert "green" not in bob_search.text


async def test_group_photo_needs_a_mention_in_its_caption(
    tmp_path: Path, fake_tg: FakeTelegramAPI, fake_llm: FakeOpenAI
) -> None:
    async with vision_bot(tmp_path, fake_tg, fake_llm) as bot:
        fake_llm.set_responder(answer_with(DESCRIPTION))
        fake_tg.add_group_photo(GROUP, ALICE, SUNSET, caption="holiday pic, not for the bot")
        fake_tg.add_group_photo(GROUP, ALICE, SUNSET, caption="@chatmem_bot the team offsite")
        await wait_until(lambda: len(fake_tg.sent_to(GROUP)) >= 1, "a group reply", REPLY_TIMEOUT)
        [row] = await message_rows(bot.core, "role = 'user'")
        assert row[0] == f"group:telegram:{GROUP}"
        assert row[3] == f"[photo] the team offsite — description: {DESCRIPTION}"
        # A reply to the bot with a photo is addressed too.
        fake_tg.add_group_photo(GROUP, ALICE, SUNSET, reply_to_bot=True)
        await wait_until(lambda: len(fake_tg.sent_to(GROUP)) >= 2, "a second reply", REPLY_TIMEOUT)
    # The unaddressed photo was neither downloaded nor described.
    assert len(fake_tg.downloads) == 2 and len(vision_requests(fake_llm)) == 2


# --- the text itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attachment", "description", "expected"),
    [
        (Attachment("photo"), "", "[photo]"),
        (Attachment("photo", " 日落 "), "", "[照片] 日落"),
        (Attachment("photo", "", ""), "海边的日落。", "[照片] 描述：海边的日落。"),
        (Attachment("photo", "日落"), "红色的太阳", "[照片] 日落 — 描述：红色的太阳"),
        (Attachment("file", "", "a [b]\nc.txt"), "", "[file: a (b) c.txt]"),
        (Attachment("file", "x", ""), "", "[file] x"),
        (Attachment("image", "合同", "scan.jpg", "image/jpeg"), "", "[图片: scan.jpg] 合同"),
    ],
)
def test_media_text(attachment: Attachment, description: str, expected: str) -> None:
    assert media_text(attachment, description) == expected


def test_one_sentence_keeps_the_first_line_within_bounds() -> None:
    assert one_sentence('  "A cat on a sofa."\n\nSecond paragraph.') == "A cat on a sofa."
    assert one_sentence("\n \n") == ""
    assert len(one_sentence("word " * 500)) == 400
