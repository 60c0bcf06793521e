"""DingTalk robot front end: HTTP callback mode (aiohttp), or Stream mode through the
official `dingtalk-stream` package.

Callbacks are verified before anything is read: `sign` must equal
base64(HMAC-SHA256(appSecret, timestamp + "\\n" + appSecret)) and `timestamp` (ms) must be
within `signature_max_age_seconds` of now (5 minutes; DingTalk's protocol allows an hour),
else 403 and nothing is stored. That signature covers no byte of the body, so a captured
header pair could carry any body: each (timestamp, sign) pair is therefore accepted once
(the toolkit's `ReplayWindow`), and a replay is refused (403) whatever its body.
Two genuine callbacks signed in the same millisecond share a pair: the second is refused
too, the price of a protocol that signs only the time. The body is then read only up to
`max_body_bytes` (413 above), parsed as a whole by one typed model and refused (400,
nothing stored) when any field chatmem reads is malformed, and replies go only to a
`sessionWebhook` on `webhook_hosts` (DingTalk's own, https), never to a URL a request
names. DingTalk retries a callback it thinks failed; the router answers a `msgId` once.
Everything but DingTalk's own formats is adapters/webhook's (`WebhookServer`): this
module is its `DingTalkPlatform`, and the Stream mode.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, Self

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
from adapters.listening import start_listening
from adapters.router import MessageRouter
from adapters.settings import DingTalkSettings
from adapters.webhook.origins import Origins
from adapters.webhook.server import WebhookServer
from adapters.webhook.signing import ReplayWindow, SignedPair, hmac_sha256_b64, same_sign
from memory_core.base.clock import Clock, Sleep, system_clock, system_sleep
from memory_core.base.errors import ChatmemError, ConfigError, InboundRejected, install_hint
from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)

MAX_SKEW_MS = 60 * 60 * 1000
MAX_ID_CHARS = 256
"""DingTalk's ids are tens of characters; a longer one is not DingTalk's."""
MAX_WEBHOOK_CHARS = 4096

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CREATE_AT_MS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)
"""The last millisecond a `datetime` can hold: `createAt` beyond it cannot be a time."""


def expected_sign(timestamp: str, app_secret: str) -> str:
    return hmac_sha256_b64(app_secret, f"{timestamp}\n{app_secret}".encode())


def verify_signature(
    timestamp: str | None,
    sign: str | None,
    app_secret: str,
    now_ms: int,
    max_age_ms: int = MAX_SKEW_MS,
) -> bool:
    """Whether `sign` is DingTalk's for `timestamp`, within `max_age_ms` of `now_ms` (the
    server checks the same through its `ReplayWindow`, which also refuses a replay)."""
    pair = SignedPair.of(timestamp, sign)
    if pair is None or not app_secret or abs(now_ms - pair.timestamp_ms) > max_age_ms:
        return False
    return same_sign(expected_sign(pair.timestamp, app_secret), pair.sign)


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


def parse_payload(
    payload: object, app_key: str, origins: Origins, clock: Clock = system_clock
) -> Callback:
    """The whole body checked at once, or InboundRejected naming the first bad field;
    a message without its own time is stamped with `clock`'s."""
    if not isinstance(payload, dict):
        raise InboundRejected("body is not a JSON object")
    try:
        body = CallbackBody.model_validate(payload)
    except ValidationError as exc:
        raise InboundRejected(f"bad field {_first_problem(exc)}") from None
    group = body.conversation_type == "2"
    sender = body.sender_staff_id or body.sender_id or ""
    when = (
        _EPOCH + timedelta(milliseconds=body.create_at) if body.create_at is not None else clock()
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


class DingTalkPlatform:
    """DingTalk's robot callback for `WebhookServer`: the signature covers only the
    timestamp, the body is one `CallbackBody`, the reply goes to the message's
    sessionWebhook while it lasts."""

    name = "dingtalk"
    signs_body = False
    bad_signature_status = 403

    def __init__(self, settings: DingTalkSettings, now_ms: Callable[[], int]) -> None:
        self.settings = settings
        self.origins = settings.webhook_origins()
        self._now_ms = now_ms

    def signed_pair(self, headers: Mapping[str, str]) -> SignedPair | None:
        return SignedPair.of(headers.get("timestamp"), headers.get("sign"))

    def verify(self, pair: SignedPair, body: bytes) -> bool:
        return same_sign(expected_sign(pair.timestamp, self.settings.app_secret), pair.sign)

    def parse(self, body: bytes) -> Callback:
        return parse_payload(decode_body(body), self.settings.app_key, self.origins)

    def ignored(self, request: Callback) -> str | None:
        message = request.message
        if (
            message.chat_type == "group"
            and self.settings.group_requires_mention
            and not message.mentioned
        ):
            return "not mentioned"
        return None

    def destination(self, request: Callback) -> URL | None:
        expires = request.webhook_expires_ms
        if request.webhook is None or (expires is not None and expires < self._now_ms()):
            log.warning(
                "dingtalk sessionWebhook missing or expired; reply for %s dropped",
                request.message.chat_id,
            )
            return None
        return request.webhook

    def reply_body(self, request: Callback, text: str) -> dict[str, Any]:
        return reply_body(text, self.settings.reply_format)

    def delivered(self, status: int, answer: object) -> bool:
        """DingTalk reports some failures (130101: sending too fast) in a 200 body."""
        return status == 200 and isinstance(answer, dict) and answer.get("errcode", 0) == 0


class DingTalkCallbackServer(WebhookServer[Callback]):
    """aiohttp app for the robot's HTTP callback (adapters/webhook); one per process."""

    def __init__(
        self,
        core: MemoryCore,
        settings: DingTalkSettings,
        clock: Clock = system_clock,
        sleep: Sleep = system_sleep,
    ) -> None:
        if not settings.app_secret:
            raise ConfigError("dingtalk.app_secret is not set (use DINGTALK_APP_SECRET)")
        window = ReplayWindow(settings.signature_max_age_seconds, clock)
        super().__init__(
            core,
            DingTalkPlatform(settings, window.now_ms),
            window,
            path=settings.callback_path,
            max_body_bytes=settings.max_body_bytes,
            sleep=sleep,
        )


async def run_dingtalk_callback(
    core: MemoryCore, settings: DingTalkSettings, stop: asyncio.Event
) -> None:
    server = DingTalkCallbackServer(core, settings)
    try:
        runner = await start_listening(server.app(), settings.listen_host, settings.listen_port)
    except OSError as exc:
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
