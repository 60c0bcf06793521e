"""Telegram front end (python-telegram-bot 22): updates in, replies out, nothing else.

Long polling by default, webhook by config. Private chats, groups, supergroups and forum
topics (replies stay in their topic). Only allowlisted users and chats are served: anyone
else gets one polite line and nothing of theirs is stored. Text, photos and files are
served: a photo or file becomes one text message saying what it was (adapters/media.py),
with a model's description of a photo when `llm.vision_model` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import weakref
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

# python-telegram-bot 22 warns on every RetryAfter unless durations are timedeltas.
os.environ.setdefault("PTB_TIMEDELTA", "1")

from telegram import Bot, BotCommand, Document, Message, MessageEntity, PhotoSize, Update
from telegram.constants import ChatAction, ChatType
from telegram.error import Forbidden, InvalidToken, NetworkError, TelegramError
from telegram.ext import AIORateLimiter, Application, ContextTypes, MessageHandler, filters

from adapters.inbound import InboundMessage
from adapters.media import Attachment, MediaKind, describe_image, media_text
from adapters.router import COMMANDS, MessageRouter, parse_command
from adapters.settings import TelegramSettings
from memory_core.base.clock import Sleep, system_sleep
from memory_core.base.errors import ChatmemError, ConfigError, LLMError
from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)

MAX_MESSAGE = 4096
FLOOD_RETRIES = 4
"""How often PTB's rate limiter retries a request Telegram answered with 429 (waiting
retry_after each time) before the RetryAfter reaches `_send`, which logs it."""
TYPING_EVERY = 4.0
REFUSAL = "Sorry, this bot is private. 抱歉，这是一个私人机器人。"


def split_message(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """Pieces ≤ limit, cut at paragraph breaks, then lines, then spaces, then anywhere."""
    text = text.strip() or "…"
    pieces: list[str] = []
    while len(text) > limit:
        window = text[:limit]
        cut = max(window.rfind("\n\n"), 0)
        for separator in ("\n\n", "\n", " "):
            position = window.rfind(separator)
            if position > limit // 2:
                cut = position
                break
        else:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    pieces.append(text)
    return [p for p in pieces if p]


def attachment_of(message: Message) -> Attachment | None:
    """A photo or a file (with its caption, if any); None for anything else."""
    caption = message.caption or ""
    if message.photo:
        return Attachment("photo", caption)
    document = message.document
    if document is None:
        return None
    mime = (document.mime_type or "").lower()
    kind: MediaKind = "image" if mime.startswith("image/") else "file"
    return Attachment(kind, caption, document.file_name or "", mime)


def pick_photo(sizes: tuple[PhotoSize, ...], max_bytes: int) -> PhotoSize | None:
    """The largest size Telegram offers that fits the cap (sizes come smallest first); a
    size of unknown weight is taken, the download itself is checked again."""
    for size in reversed(sizes):
        if size.file_size is None or size.file_size <= max_bytes:
            return size
    return None


class TelegramFrontEnd:
    """Holds the router and the settings; PTB calls `on_message` for every text, photo and
    file update."""

    def __init__(
        self, core: MemoryCore, settings: TelegramSettings, *, sleep: Sleep = system_sleep
    ) -> None:
        """`sleep` waits `TYPING_EVERY` between two typing signals."""
        self.core = core
        self._sleep = sleep
        self.settings = settings
        self.router = MessageRouter(core)
        # PTB runs updates concurrently: one chat's messages are handled (and answered)
        # one at a time, in arrival order, so "/remember X" then "/memory" sees X.
        self._chat_locks: weakref.WeakValueDictionary[tuple[int, int | None], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        # The bot's own id and @username (mentions, commands), set once by `post_init`.
        self.bot_id: int | None = None
        self.bot_username: str | None = None

    def learn_identity(self, bot: Bot) -> tuple[int, str]:
        """The bot's id and username: read once from the getMe that `Application.initialize`
        made, then kept (`post_init` calls this at start; later calls reuse the result)."""
        if self.bot_id is None or self.bot_username is None:
            self.bot_id, self.bot_username = bot.id, bot.username
            self.router.bot_username = bot.username
        return self.bot_id, self.bot_username

    def allowed(self, user_id: int | None, chat_id: int) -> bool:
        if user_id is not None and user_id in self.settings.allowed_users:
            return True
        return chat_id in self.settings.allowed_chats

    def addressed(self, message: Message, bot_id: int, bot_username: str) -> bool:
        """In groups: a command, an @mention of the bot (in a text or a caption), or a
        reply to one of its messages."""
        text = message.text or ""
        if text.startswith("/"):
            # "/new@otherbot" is addressed to another bot in the group, not to us.
            return parse_command(text, bot_username) is not None
        mentions = (
            message.parse_entities([MessageEntity.MENTION])
            if message.text is not None
            else message.parse_caption_entities([MessageEntity.MENTION])
        )
        if any(value.lower() == f"@{bot_username}".lower() for value in mentions.values()):
            return True
        for entity in (*message.entities, *message.caption_entities):
            if (
                entity.type == MessageEntity.TEXT_MENTION
                and entity.user
                and entity.user.id == bot_id
            ):
                return True
        reply = message.reply_to_message
        # A topic message's reply_to points at the topic's first message, not a real reply.
        is_topic_root = message.is_topic_message and reply is not None and reply.forum_topic_created
        return bool(
            reply and not is_topic_root and reply.from_user and reply.from_user.id == bot_id
        )

    async def on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        user = update.effective_user
        chat = update.effective_chat
        if message is None or chat is None:
            return
        attachment = attachment_of(message)
        if not message.text and attachment is None:
            return
        if not self.allowed(user.id if user else None, chat.id):
            log.warning(
                "refused telegram message from user %s in chat %s (not on the allowlist)",
                user.id if user else "?",
                chat.id,
            )
            if chat.type == ChatType.PRIVATE:
                await self._send(context, chat.id, REFUSAL, None)
            return
        # Normally set by post_init; an application driven without run_polling()/run_webhook()
        # (no post_init) learns it here, on its first message.
        bot_id, bot_username = self.learn_identity(context.bot)
        group = chat.type != ChatType.PRIVATE
        mentioned = True if not group else self.addressed(message, bot_id, bot_username)
        if group and self.settings.group_requires_mention and not mentioned:
            return
        thread = message.message_thread_id if message.is_topic_message else None
        lock = self._chat_locks.setdefault((chat.id, thread), asyncio.Lock())
        async with lock:
            async with self._typing(context, chat.id, thread):
                if attachment is None:
                    text = _without_mention(message.text or "", bot_username)
                else:
                    # Inside the chat's lock: a photo being described keeps its place
                    # before the messages sent after it.
                    text = await self._attachment_text(message, attachment, bot_username)
                inbound = InboundMessage(
                    channel="telegram",
                    account_id=str(bot_id),
                    sender_id=str(user.id) if user else str(chat.id),
                    sender_name=(user.full_name if user else chat.title) or "",
                    chat_type="group" if group else "direct",
                    chat_id=str(chat.id),
                    text=text,
                    message_id=str(message.message_id),
                    timestamp=message.date,
                    thread_id=str(thread) if thread is not None else None,
                    mentioned=mentioned,
                )
                reply = await self.router.handle(inbound)
            if reply is None:
                return
            for piece in split_message(reply.text):
                await self._send(context, chat.id, piece, thread)

    async def _attachment_text(
        self, message: Message, attachment: Attachment, bot_username: str
    ) -> str:
        attachment = replace(attachment, caption=_without_mention(attachment.caption, bot_username))
        description = await self._describe(message, attachment)
        return media_text(attachment, description)

    async def _describe(self, message: Message, attachment: Attachment) -> str:
        """The vision model's sentence about a photo, or '' (off, too big, failed, slow):
        a description only adds to the message, so nothing here may lose it."""
        vision_model = self.core.config.llm.vision_model
        if not (self.settings.describe_photos and vision_model and attachment.describable):
            return ""
        limit = self.settings.max_photo_bytes
        source: PhotoSize | Document | None = (
            pick_photo(message.photo, limit) if message.photo else message.document
        )
        if source is None or (source.file_size or 0) > limit:
            log.info(
                "not describing a photo in chat %s: larger than %d bytes", message.chat_id, limit
            )
            return ""
        timeout = self.settings.describe_timeout_seconds
        try:
            async with asyncio.timeout(timeout):
                file = await source.get_file()
                if (file.file_size or 0) > limit:
                    return ""
                image = await file.download_as_bytearray()
                if len(image) > limit:
                    return ""
                return await describe_image(
                    self.core.config.llm,
                    vision_model,
                    image,
                    attachment.image_type,
                    attachment.caption,
                    request_timeout=timeout,
                )
        except TimeoutError:
            log.warning(
                "photo description in chat %s took over %gs; stored without it",
                message.chat_id,
                timeout,
            )
        except (TelegramError, LLMError, OSError, RuntimeError) as exc:
            # The download URL holds the bot token and error texts may quote it.
            detail = (
                str(exc).replace(self.settings.bot_token, "<token>")
                if self.settings.bot_token
                else str(exc)
            )
            log.warning(
                "could not describe a photo in chat %s (%s: %s); stored without a description",
                message.chat_id,
                type(exc).__name__,
                detail,
            )
        return ""

    @contextlib.asynccontextmanager
    async def _typing(
        self, context: ContextTypes.DEFAULT_TYPE, chat_id: int, thread: int | None
    ) -> AsyncIterator[None]:
        async def keep_typing() -> None:
            while True:
                with contextlib.suppress(TelegramError):
                    await context.bot.send_chat_action(
                        chat_id, ChatAction.TYPING, message_thread_id=thread
                    )
                await self._sleep(TYPING_EVERY)

        task = asyncio.ensure_future(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _send(
        self, context: ContextTypes.DEFAULT_TYPE, chat_id: int, text: str, thread: int | None
    ) -> None:
        """One message. Flood control (429) is waited out and retried by PTB's AIORateLimiter
        (see `build_telegram_app`); what still fails is logged, never raised: the user's
        message is already stored whatever happens here."""
        try:
            await context.bot.send_message(chat_id, text, message_thread_id=thread)
        except Forbidden as exc:
            log.warning("telegram refused a message to chat %s: %s", chat_id, exc)
        except TelegramError as exc:
            log.error("could not send a reply to chat %s: %s", chat_id, exc)


def _without_mention(text: str, username: str | None) -> str:
    if username:
        # Usernames are case-insensitive; "@chatmem_botty" is someone else.
        text = re.sub(rf"@{re.escape(username)}(?!\w)", " ", text, flags=re.IGNORECASE)
    return " ".join(text.split()) if text.strip() else text


async def _error_handler(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    log.error("telegram update failed", exc_info=context.error)


async def set_commands(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    """The command menu."""
    await app.bot.set_my_commands([BotCommand(name, text) for name, text in COMMANDS])


async def post_init(app: Application[Any, Any, Any, Any, Any, Any]) -> None:
    """Once at start, after `initialize` (which fetched getMe): the bot's identity for the
    front end, then the command menu. PTB runs `post_init` only inside run_polling()/
    run_webhook(), so `run_telegram`, which drives the application itself, calls this too."""
    front: TelegramFrontEnd = app.bot_data["front"]
    front.learn_identity(app.bot)
    try:
        await set_commands(app)
    except TelegramError as exc:
        log.warning("could not set the bot's command menu: %s", exc)


def build_telegram_app(
    core: MemoryCore, settings: TelegramSettings
) -> Application[Any, Any, Any, Any, Any, Any]:
    """The one factory the CLI and the tests use."""
    if not settings.bot_token:
        raise ConfigError("telegram.bot_token is not set (use TELEGRAM_BOT_TOKEN)")
    front = TelegramFrontEnd(core, settings)
    # Every request goes through PTB's rate limiter: Telegram's flood limits are kept
    # (overall and per group), and a 429 is waited out (retry_after) and retried.
    limiter = AIORateLimiter(
        overall_max_rate=settings.max_requests_per_second,
        overall_time_period=1,
        group_max_rate=settings.max_messages_per_minute_per_group,
        group_time_period=60,
        max_retries=FLOOD_RETRIES,
    )
    builder = (
        Application.builder()
        .token(settings.bot_token)
        .concurrent_updates(8)
        .rate_limiter(limiter)
        .post_init(post_init)
    )
    if settings.api_base_url:
        base = settings.api_base_url.rstrip("/")
        builder = builder.base_url(base if base.endswith("/bot") else base + "/bot")
        builder = builder.base_file_url(base.removesuffix("/bot") + "/file/bot")
    app = builder.build()
    app.add_handler(
        MessageHandler(filters.TEXT | filters.PHOTO | filters.Document.ALL, front.on_message)
    )
    app.add_error_handler(_error_handler)
    app.bot_data["front"] = front
    if not settings.allowed_users and not settings.allowed_chats:
        log.warning("telegram allowlist is empty: every message will be refused")
    return app


DEFAULT_API = "https://api.telegram.org"


@contextlib.asynccontextmanager
async def connected(
    app: Application[Any, Any, Any, Any, Any, Any], settings: TelegramSettings
) -> AsyncIterator[None]:
    """The application initialized (its getMe answered) until the block ends; or, when
    Telegram refuses the token or cannot be reached, one line a person can act on. PTB's
    own errors name the token (`The token `123:…` was rejected`): none of their text is
    shown without the token cut out, and none is chained for a traceback to print."""
    try:
        await app.initialize()
    except TelegramError as exc:
        with contextlib.suppress(TelegramError):
            await app.shutdown()
        raise startup_error(exc, settings) from None
    try:
        yield
    finally:
        await app.shutdown()


def startup_error(exc: TelegramError, settings: TelegramSettings) -> ChatmemError:
    """What a failed start tells a person: which setting to fix, never the token."""
    api = settings.api_base_url or DEFAULT_API
    if isinstance(exc, InvalidToken):
        return ConfigError(
            f"the Telegram Bot API at {api} refused the bot token (telegram.bot_token, "
            "TELEGRAM_BOT_TOKEN): check it with @BotFather"
        )
    reason = str(exc).replace(settings.bot_token, "<bot token>")
    if isinstance(exc, NetworkError):
        return ChatmemError(f"cannot reach the Telegram Bot API at {api}: {reason}")
    return ChatmemError(f"the Telegram Bot API at {api} refused to start the bot: {reason}")


async def run_telegram(core: MemoryCore, settings: TelegramSettings, stop: asyncio.Event) -> None:
    """Serve until `stop` is set, then stop cleanly (the caller closes the core, which
    flushes active sessions)."""
    app = build_telegram_app(core, settings)
    core.conversation.start()
    async with connected(app, settings):
        await post_init(app)
        await app.start()
        assert app.updater is not None
        if settings.mode == "webhook":
            await app.updater.start_webhook(
                listen=settings.webhook_listen,
                port=settings.webhook_port,
                url_path="telegram",
                webhook_url=settings.webhook_url,
                secret_token=settings.webhook_secret or None,
            )
        else:
            await app.updater.start_polling()
        log.info("telegram bot @%s is running (%s)", app.bot.username, settings.mode)
        await stop.wait()
        with contextlib.suppress(TelegramError):
            await app.updater.stop()
        await app.stop()
