"""DingTalk robot front end: HTTP callback mode (aiohttp), or Stream mode through the
official `dingtalk-stream` package.

Callbacks are verified before anything is read: `sign` must equal
base64(HMAC-SHA256(appSecret, timestamp + "\\n" + appSecret)) and `timestamp` (ms) must be
within an hour, else 403 and nothing is stored. Replies go to the conversation's
`sessionWebhook`. DingTalk retries a callback it thinks failed; the router answers a
`msgId` once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import threading
import time
import weakref
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from adapters.inbound import InboundMessage
from adapters.router import MessageRouter
from memory_core.config import DingTalkSettings
from memory_core.engine import MemoryCore
from memory_core.errors import ConfigError

log = logging.getLogger(__name__)

MAX_SKEW_MS = 60 * 60 * 1000


def expected_sign(timestamp: str, app_secret: str) -> str:
    digest = hmac.new(
        app_secret.encode("utf-8"), f"{timestamp}\n{app_secret}".encode(), hashlib.sha256
    ).digest()
    return base64.b64encode(digest).decode("ascii")


def verify_signature(timestamp: str | None, sign: str | None, app_secret: str, now_ms: int) -> bool:
    if not timestamp or not sign or not timestamp.isdigit() or not app_secret:
        return False
    if abs(now_ms - int(timestamp)) > MAX_SKEW_MS:
        return False
    # As bytes: compare_digest raises TypeError for a str with non-ASCII characters, and a
    # forged header must be refused (403), not crash the handler (500).
    return hmac.compare_digest(
        expected_sign(timestamp, app_secret).encode("ascii"),
        sign.encode("utf-8", "surrogateescape"),
    )


def parse_payload(
    payload: dict[str, Any], app_key: str
) -> tuple[InboundMessage, str | None, int | None]:
    """The inbound message, its sessionWebhook and that webhook's expiry (ms)."""
    group = str(payload.get("conversationType")) == "2"
    text = payload.get("text")
    content = text.get("content", "") if isinstance(text, dict) else ""
    sender = str(payload.get("senderStaffId") or payload.get("senderId") or "")
    created = payload.get("createAt")
    when = (
        datetime.fromtimestamp(int(created) / 1000, tz=UTC)
        if isinstance(created, int | str) and str(created).isdigit()
        else datetime.now(UTC)
    )
    message = InboundMessage(
        channel="dingtalk",
        account_id=str(
            payload.get("robotCode") or payload.get("chatbotUserId") or app_key or "robot"
        ),
        sender_id=sender,
        sender_name=str(payload.get("senderNick") or ""),
        chat_type="group" if group else "direct",
        chat_id=str(payload.get("conversationId") or sender),
        text=str(content).strip(),
        message_id=str(payload.get("msgId") or ""),
        timestamp=when,
        mentioned=bool(payload.get("isInAtList")) if group else True,
    )
    webhook = payload.get("sessionWebhook")
    expires = payload.get("sessionWebhookExpiredTime")
    return (
        message,
        webhook if isinstance(webhook, str) else None,
        int(expires) if isinstance(expires, int | str) and str(expires).isdigit() else None,
    )


def reply_body(text: str, reply_format: str) -> dict[str, Any]:
    if reply_format == "markdown":
        title = " ".join(text.split())[:20] or "chatmem"
        return {"msgtype": "markdown", "markdown": {"title": title, "text": text}}
    return {"msgtype": "text", "text": {"content": text}}


class DingTalkCallbackServer:
    """aiohttp app for the robot's HTTP callback; one instance per process."""

    def __init__(self, core: MemoryCore, settings: DingTalkSettings) -> None:
        if not settings.app_secret:
            raise ConfigError("dingtalk.app_secret is not set (use DINGTALK_APP_SECRET)")
        self.core = core
        self.settings = settings
        self.router = MessageRouter(core)
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        # Callbacks run as concurrent tasks: one conversation's messages are handled and
        # answered one at a time, in arrival order.
        self._conversation_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(self.settings.callback_path, self.callback)
        app.on_cleanup.append(self._cleanup)
        return app

    async def callback(self, request: web.Request) -> web.Response:
        now_ms = int(time.time() * 1000)
        if not verify_signature(
            request.headers.get("timestamp"),
            request.headers.get("sign"),
            self.settings.app_secret,
            now_ms,
        ):
            log.warning("dingtalk callback with a bad or expired signature from %s", request.remote)
            return web.json_response({"error": "bad signature"}, status=403)
        try:
            payload = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "not JSON"}, status=400)
        if not isinstance(payload, dict):
            return web.json_response({"error": "not an object"}, status=400)
        message, webhook, expires = parse_payload(payload, self.settings.app_key)
        if (
            message.chat_type == "group"
            and self.settings.group_requires_mention
            and not message.mentioned
        ):
            return web.json_response({"ignored": "not mentioned"})
        # Answer the callback at once; the reply goes through the sessionWebhook.
        task = asyncio.ensure_future(self._process(message, webhook, expires))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({})

    async def _process(
        self, message: InboundMessage, webhook: str | None, expires: int | None
    ) -> None:
        lock = self._conversation_locks.setdefault(message.chat_id, asyncio.Lock())
        async with lock:
            await self._process_in_order(message, webhook, expires)

    async def _process_in_order(
        self, message: InboundMessage, webhook: str | None, expires: int | None
    ) -> None:
        try:
            reply = await self.router.handle(message)
        except Exception:
            log.exception("dingtalk message %s failed", message.message_id)
            return
        if reply is None:
            return
        if not webhook or (expires is not None and expires < int(time.time() * 1000)):
            log.warning(
                "dingtalk sessionWebhook missing or expired; reply for %s dropped", message.chat_id
            )
            return
        await self.send(webhook, reply.text)

    async def send(self, webhook: str, text: str) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15))
        body = reply_body(text, self.settings.reply_format)
        for attempt in range(1, 4):
            try:
                async with self._session.post(webhook, json=body) as response:
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
    await site.start()
    core.start_schedules()
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
            "stream mode needs the dingtalk extra: pip install 'chatmem[dingtalk]'"
        ) from exc
    if not settings.app_key or not settings.app_secret:
        raise ConfigError("dingtalk.app_key and dingtalk.app_secret are required for stream mode")
    loop = asyncio.get_running_loop()
    router = MessageRouter(core)

    class Handler(dingtalk_stream.ChatbotHandler):  # type: ignore[misc]
        async def process(self, callback: Any) -> tuple[int, str]:
            incoming = dingtalk_stream.ChatbotMessage.from_dict(callback.data)
            message, _, _ = parse_payload(callback.data, settings.app_key)
            if (
                message.chat_type == "group"
                and settings.group_requires_mention
                and not message.mentioned
            ):
                return dingtalk_stream.AckMessage.STATUS_OK, "ignored"
            future = asyncio.run_coroutine_threadsafe(router.handle(message), loop)
            reply = await asyncio.wrap_future(future)
            if reply is not None:
                await asyncio.to_thread(self.reply_text, reply.text, incoming)
            return dingtalk_stream.AckMessage.STATUS_OK, "ok"

    credential = dingtalk_stream.Credential(settings.app_key, settings.app_secret)
    client = dingtalk_stream.DingTalkStreamClient(credential)
    client.register_callback_handler(dingtalk_stream.ChatbotMessage.TOPIC, Handler())
    core.start_schedules()
    # The client loops forever on its own event loop and has no stop(); a daemon thread
    # lets the process exit once our loop is done.
    threading.Thread(target=client.start_forever, name="dingtalk-stream", daemon=True).start()
    await stop.wait()
