"""DingTalk robot front end: HTTP callback mode (aiohttp), or Stream mode through the
official `dingtalk-stream` package.

Callbacks are verified before anything is read: `sign` must equal
base64(HMAC-SHA256(appSecret, timestamp + "\\n" + appSecret)) and `timestamp` (ms) must be
within `signature_max_age_seconds` of now (5 minutes; DingTalk's protocol allows an hour),
else 403 and nothing is stored. That signature covers no byte of the body, so a captured
header pair could carry any body: each (timestamp, sign) pair is therefore accepted once
(`SignedHeaders`, kept for the window), and a replay is refused (403) whatever its body.
Two genuine callbacks signed in the same millisecond share a pair: the second is refused
too, the price of a protocol that signs only the time. The body is then read only up to
`max_body_bytes` (413 above), parsed as a whole by one typed model and refused (400,
nothing stored) when any field chatmem reads is malformed, and replies go only to a
`sessionWebhook` on `webhook_hosts` (DingTalk's own, https), never to a URL a request
names. DingTalk retries a callback it thinks failed; the router answers a `msgId` once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import heapq
import hmac
import json
import logging
import threading
import weakref
from collections.abc import Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, Self

import aiohttp
from aiohttp import web
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from yarl import URL

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter
from adapters.settings import DingTalkSettings
from memory_core.base.clock import Clock, system_clock
from memory_core.base.errors import ChatmemError, ConfigError, InboundRejected, install_hint
from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)

MAX_SKEW_MS = 60 * 60 * 1000
MAX_ID_CHARS = 256
"""DingTalk's ids are tens of characters; a longer one is not DingTalk's."""
MAX_WEBHOOK_CHARS = 4096
INLINE_PARSE_BYTES = 64 * 1024
"""Bodies up to this size are parsed on the event loop (well under a millisecond); larger
ones in a worker thread."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CREATE_AT_MS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)
"""The last millisecond a `datetime` can hold: `createAt` beyond it cannot be a time."""

Origins = Set[tuple[str, str, int]]


def expected_sign(timestamp: str, app_secret: str) -> str:
    digest = hmac.new(
        app_secret.encode("utf-8"), f"{timestamp}\n{app_secret}".encode(), hashlib.sha256
    ).digest()
    return base64.b64encode(digest).decode("ascii")


def verify_signature(
    timestamp: str | None,
    sign: str | None,
    app_secret: str,
    now_ms: int,
    max_age_ms: int = MAX_SKEW_MS,
) -> bool:
    if not timestamp or not sign or not timestamp.isdigit() or not app_secret:
        return False
    if abs(now_ms - int(timestamp)) > max_age_ms:
        return False
    # As bytes: compare_digest raises TypeError for a str with non-ASCII characters, and a
    # forged header must be refused (403), not crash the handler (500).
    return hmac.compare_digest(
        expected_sign(timestamp, app_secret).encode("ascii"),
        sign.encode("utf-8", "surrogateescape"),
    )


class SignedHeaders:
    """The callback headers accepted so far: each valid (timestamp, sign) pair once, within
    the window. The signature covers only the timestamp, so this is what keeps a captured
    header from carrying a second, different body. A pair is remembered until its
    timestamp leaves the window, after which the signature check refuses it anyway: only
    genuinely signed headers are kept, so their number is bounded by real traffic."""

    def __init__(self, app_secret: str, max_age_seconds: int, clock: Clock = system_clock):
        self._app_secret = app_secret
        self._max_age_ms = max_age_seconds * 1000
        self._clock = clock
        self._seen: set[tuple[str, str]] = set()
        self._by_age: list[tuple[int, str, str]] = []

    def accept(self, timestamp: str | None, sign: str | None) -> bool:
        """True once for a valid pair; False when forged, outside the window, or seen."""
        now_ms = int(self._clock().timestamp() * 1000)
        if not verify_signature(timestamp, sign, self._app_secret, now_ms, self._max_age_ms):
            return False
        assert timestamp is not None and sign is not None
        self._forget_before(now_ms - self._max_age_ms)
        if (timestamp, sign) in self._seen:
            return False
        self._seen.add((timestamp, sign))
        heapq.heappush(self._by_age, (int(timestamp), timestamp, sign))
        return True

    def _forget_before(self, oldest_ms: int) -> None:
        while self._by_age and self._by_age[0][0] < oldest_ms:
            _, timestamp, sign = heapq.heappop(self._by_age)
            self._seen.discard((timestamp, sign))

    def __len__(self) -> int:
        return len(self._seen)


# --- the callback body ------------------------------------------------------------------


def _encodable(value: str) -> str:
    """JSON's "\\ud800" escapes decode to lone surrogates, which no file or SQLite text can
    hold: refused here, before the message is accepted, not when it is stored."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode") from None
    return value


_Str = Annotated[str, AfterValidator(_encodable)]
_Id = Annotated[str, StringConstraints(max_length=MAX_ID_CHARS), AfterValidator(_encodable)]


class _Body(BaseModel):
    # strict: DingTalk's types exactly (a list is not text, "1" is not a number); other
    # fields DingTalk adds are ignored, never read.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class CallbackText(_Body):
    content: _Str


class CallbackBody(_Body):
    """The fields of a robot message chatmem reads, typed as DingTalk sends them."""

    conversation_type: Literal["1", "2"] = Field(alias="conversationType")
    conversation_id: Annotated[_Id, StringConstraints(min_length=1)] = Field(alias="conversationId")
    msgtype: _Id
    text: CallbackText | None = None
    msg_id: _Id = Field("", alias="msgId")
    create_at: int | None = Field(None, alias="createAt", ge=0, le=MAX_CREATE_AT_MS)
    sender_staff_id: _Id | None = Field(None, alias="senderStaffId")
    sender_id: _Id | None = Field(None, alias="senderId")
    sender_nick: _Id = Field("", alias="senderNick")
    is_in_at_list: bool = Field(False, alias="isInAtList")
    robot_code: _Id | None = Field(None, alias="robotCode")
    chatbot_user_id: _Id | None = Field(None, alias="chatbotUserId")
    session_webhook: Annotated[_Str, StringConstraints(max_length=MAX_WEBHOOK_CHARS)] | None = (
        Field(None, alias="sessionWebhook")
    )
    session_webhook_expired_time: int | None = Field(None, alias="sessionWebhookExpiredTime", ge=0)

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if not (self.sender_staff_id or self.sender_id):
            raise ValueError("senderStaffId or senderId is required")
        if self.msgtype == "text" and self.text is None:
            raise ValueError("a text message needs text.content")
        return self


@dataclass(frozen=True, slots=True)
class Callback:
    """A callback body that passed every check: the message, where its reply may go (None:
    nowhere) and until when (ms)."""

    message: InboundMessage
    webhook: URL | None
    webhook_expires_ms: int | None


def decode_body(raw: bytes) -> object:
    """The body's JSON value. Python's decoder recurses once per nesting level, so a deeply
    nested body raises RecursionError: bad input like any other, not a server error."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # also UnicodeDecodeError, a 5000-digit number
        raise InboundRejected("body is not JSON (or is nested too deeply)") from None


def _first_problem(exc: ValidationError) -> str:
    """Pydantic's first error as one line naming the field, without the value (a body may
    be large, and the value is the sender's, not something a log should keep)."""
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"]) or "body"
    return f"{where}: {error['msg'].removeprefix('Value error, ')}"


def parse_payload(payload: object, app_key: str, origins: Origins) -> Callback:
    """The whole body checked at once, or InboundRejected naming the first bad field."""
    if not isinstance(payload, dict):
        raise InboundRejected("body is not a JSON object")
    try:
        body = CallbackBody.model_validate(payload)
    except ValidationError as exc:
        raise InboundRejected(f"bad field {_first_problem(exc)}") from None
    group = body.conversation_type == "2"
    sender = body.sender_staff_id or body.sender_id or ""
    when = (
        _EPOCH + timedelta(milliseconds=body.create_at)
        if body.create_at is not None
        else datetime.now(UTC)
    )
    message = InboundMessage(
        channel="dingtalk",
        account_id=body.robot_code or body.chatbot_user_id or app_key or "robot",
        sender_id=sender,
        sender_name=body.sender_nick,
        chat_type="group" if group else "direct",
        chat_id=body.conversation_id,
        text=body.text.content.strip() if body.text is not None else "",
        message_id=body.msg_id,
        timestamp=when,
        mentioned=body.is_in_at_list if group else True,
    )
    webhook = None if body.session_webhook is None else webhook_url(body.session_webhook, origins)
    return Callback(message, webhook, body.session_webhook_expired_time)


def webhook_url(url: str, origins: Origins) -> URL:
    """The sessionWebhook as the URL to post to, if it lies on an allowed origin. Parsed
    once, by the parser aiohttp itself uses, and that object is what gets posted to: the
    host checked is the host connected to (no user@host, no parser disagreement)."""
    try:
        target = URL(url)
    except (ValueError, TypeError):
        raise InboundRejected("sessionWebhook is not a URL") from None
    origin = (target.scheme, target.host or "", target.port or 0)
    if not target.absolute or target.user is not None or origin not in origins:
        # The origin only: the URL's query carries the conversation's session token.
        shown = f"{target.scheme}://{target.host}:{target.port}" if target.host else "?"
        raise InboundRejected(f"sessionWebhook {shown} is not in dingtalk.webhook_hosts")
    return target


def reply_body(text: str, reply_format: str) -> dict[str, Any]:
    if reply_format == "markdown":
        title = " ".join(text.split())[:20] or "chatmem"
        return {"msgtype": "markdown", "markdown": {"title": title, "text": text}}
    return {"msgtype": "text", "text": {"content": text}}


class DingTalkCallbackServer:
    """aiohttp app for the robot's HTTP callback; one instance per process."""

    def __init__(
        self, core: MemoryCore, settings: DingTalkSettings, clock: Clock = system_clock
    ) -> None:
        if not settings.app_secret:
            raise ConfigError("dingtalk.app_secret is not set (use DINGTALK_APP_SECRET)")
        self.core = core
        self.settings = settings
        self._clock = clock
        self.signed = SignedHeaders(settings.app_secret, settings.signature_max_age_seconds, clock)
        self.origins = settings.webhook_origins()
        self.router = MessageRouter(core)
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        # Callbacks run as concurrent tasks: one conversation's messages are handled and
        # answered one at a time, in arrival order.
        self._conversation_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def app(self) -> web.Application:
        # aiohttp stops reading a body past client_max_size (chunked ones too), with 413.
        app = web.Application(client_max_size=self.settings.max_body_bytes)
        app.router.add_post(self.settings.callback_path, self.callback)
        app.on_cleanup.append(self._cleanup)
        return app

    async def callback(self, request: web.Request) -> web.Response:
        if not self.signed.accept(request.headers.get("timestamp"), request.headers.get("sign")):
            log.warning(
                "dingtalk callback with a bad, expired or replayed signature from %s",
                request.remote,
            )
            return web.json_response({"error": "bad signature"}, status=403)
        limit = self.settings.max_body_bytes
        too_large = f"body larger than dingtalk.max_body_bytes ({limit})"
        if (request.content_length or 0) > limit:
            log.warning("dingtalk callback refused: %s", too_large)
            return web.json_response({"error": too_large}, status=413)
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            log.warning("dingtalk callback refused: %s", too_large)
            return web.json_response({"error": too_large}, status=413)
        try:
            if len(raw) <= INLINE_PARSE_BYTES:
                callback = self.parse(raw)
            else:
                callback = await asyncio.to_thread(self.parse, raw)
        except InboundRejected as exc:
            log.warning("dingtalk callback refused: %s", exc)
            return web.json_response({"error": str(exc)}, status=400)
        message = callback.message
        if (
            message.chat_type == "group"
            and self.settings.group_requires_mention
            and not message.mentioned
        ):
            return web.json_response({"ignored": "not mentioned"})
        # Answer the callback at once; the reply goes through the sessionWebhook.
        task = asyncio.ensure_future(self._process(callback))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({})

    def _now_ms(self) -> int:
        return int(self._clock().timestamp() * 1000)

    def parse(self, raw: bytes) -> Callback:
        return parse_payload(decode_body(raw), self.settings.app_key, self.origins)

    async def _process(self, callback: Callback) -> None:
        lock = self._conversation_locks.setdefault(callback.message.chat_id, asyncio.Lock())
        async with lock:
            await self._process_in_order(callback)

    async def _process_in_order(self, callback: Callback) -> None:
        message, webhook, expires = callback.message, callback.webhook, callback.webhook_expires_ms
        try:
            reply = await self.router.handle(message)
        except Exception:
            log.exception("dingtalk message %s failed", message.message_id)
            return
        if reply is None:
            return
        if webhook is None or (expires is not None and expires < self._now_ms()):
            log.warning(
                "dingtalk sessionWebhook missing or expired; reply for %s dropped", message.chat_id
            )
            return
        await self.send(webhook, reply.text)

    async def send(self, webhook: URL, text: str) -> None:
        """Post to a webhook `webhook_url` accepted. Redirects are not followed: the origin
        that was checked is the only one that receives a scope's text."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15))
        body = reply_body(text, self.settings.reply_format)
        for attempt in range(1, 4):
            try:
                async with self._session.post(
                    webhook, json=body, allow_redirects=False
                ) as response:
                    data = await response.json(content_type=None)
                    if (
                        response.status == 200
                        and isinstance(data, dict)
                        and data.get("errcode", 0) == 0
                    ):
                        return
                    log.warning("dingtalk webhook answered %s %s", response.status, data)
            except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
                log.warning("dingtalk webhook failed (attempt %d): %s", attempt, exc)
            await asyncio.sleep(0.5 * attempt)

    async def drain(self) -> None:
        """Wait for replies still being produced (graceful shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _cleanup(self, app: web.Application) -> None:
        await self.drain()
        if self._session is not None:
            await self._session.close()
            self._session = None


async def run_dingtalk_callback(
    core: MemoryCore, settings: DingTalkSettings, stop: asyncio.Event
) -> None:
    server = DingTalkCallbackServer(core, settings)
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, settings.listen_host, settings.listen_port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        where = f"{settings.listen_host}:{settings.listen_port}"
        raise ChatmemError(
            f"cannot listen on {where} (dingtalk.listen_host, listen_port): {exc.strerror or exc}"
        ) from None
    core.conversation.start()
    log.info(
        "dingtalk callback listening on http://%s:%d%s",
        settings.listen_host,
        settings.listen_port,
        settings.callback_path,
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


async def run_dingtalk_stream(
    core: MemoryCore, settings: DingTalkSettings, stop: asyncio.Event
) -> None:
    """Stream mode: the official client runs in its own thread (its calls block); each
    message is handed to this loop and answered through the client's reply helper."""
    try:
        import dingtalk_stream
    except ImportError as exc:
        raise ConfigError(
            f"stream mode needs the dingtalk extra: {install_hint('dingtalk')}"
        ) from exc
    if not settings.app_key or not settings.app_secret:
        raise ConfigError("dingtalk.app_key and dingtalk.app_secret are required for stream mode")
    loop = asyncio.get_running_loop()
    router = MessageRouter(core)
    origins = settings.webhook_origins()

    class Handler(dingtalk_stream.ChatbotHandler):  # type: ignore[misc]
        async def process(self, callback: Any) -> tuple[int, str]:
            # Runs on the client's own loop and thread, so parsing here blocks nothing of ours.
            try:
                parsed = parse_payload(callback.data, settings.app_key, origins)
            except InboundRejected as exc:
                log.warning("dingtalk stream message refused: %s", exc)
                return dingtalk_stream.AckMessage.STATUS_BAD_REQUEST, str(exc)
            message = parsed.message
            if (
                message.chat_type == "group"
                and settings.group_requires_mention
                and not message.mentioned
            ):
                return dingtalk_stream.AckMessage.STATUS_OK, "ignored"
            incoming = dingtalk_stream.ChatbotMessage.from_dict(callback.data)
            future = asyncio.run_coroutine_threadsafe(router.handle(message), loop)
            reply = await asyncio.wrap_future(future)
            # reply_text posts to the message's sessionWebhook, which parse_payload checked.
            if reply is not None and parsed.webhook is not None:
                await asyncio.to_thread(self.reply_text, reply.text, incoming)
            return dingtalk_stream.AckMessage.STATUS_OK, "ok"

    credential = dingtalk_stream.Credential(settings.app_key, settings.app_secret)
    client = dingtalk_stream.DingTalkStreamClient(credential)
    client.register_callback_handler(dingtalk_stream.ChatbotMessage.TOPIC, Handler())
    core.conversation.start()
    # The client loops forever on its own event loop and has no stop(); a daemon thread
    # lets the process exit once our loop is done.
    threading.Thread(target=client.start_forever, name="dingtalk-stream", daemon=True).start()
    await stop.wait()
