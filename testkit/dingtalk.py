"""Fakes for the DingTalk robot in HTTP-callback mode.

DingTalk POSTs each message the robot receives to our callback URL, signed with the app
secret, and the payload carries a short-lived `sessionWebhook` URL that the reply must be
POSTed to. Tests therefore need three things, all here:

* `sign` / `signed_headers` - the exact signature DingTalk sends, so the
  adapter's verification is tested against the real algorithm, not a mirror of itself;
* `private_message` / `group_message` - realistic callback payloads;
* `WebhookSink` - a local stand-in for the `sessionWebhook` endpoint, one distinct
  URL per conversation so a test can prove a reply landed in the right conversation.
  It is plain HTTP on 127.0.0.1, which the robot's default `webhook_hosts` (DingTalk's
  own hosts, https only) refuses: a test allows it with `webhook_hosts=[sink.base_url]`.

`post_raw` sends exact bytes, for bodies no JSON encoder would write.

Example::

    async with WebhookSink() as sink:
        payload = group_message("记住我喜欢乌龙茶", conversation_id="cidG1",
                                sender_staff_id="u1", at_bot=True,
                                session_webhook=sink.webhook_url("G1"))
        status, body = await post_callback(adapter_url, payload, signed_headers(SECRET))
        [reply] = await sink.wait_for(1, name="G1")
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import quote

import aiohttp
from aiohttp import web

JSONDict = dict[str, Any]
DEFAULT_CHATBOT_USER_ID = "$:LWCP_v1:$chatmem-robot"
DEFAULT_CORP_ID = "dingcorp0001"
SESSION_WEBHOOK_TTL_MS = 90 * 60 * 1000  # DingTalk session webhooks live about 1.5 hours
_msg_ids = itertools.count(1)


def sign(timestamp_ms: str, app_secret: str) -> str:
    """base64(HMAC-SHA256(key=app_secret, msg=f"{timestamp}\\n{app_secret}"))."""
    message = f"{timestamp_ms}\n{app_secret}".encode()
    digest = hmac.new(app_secret.encode(), message, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


_last_signed_ms = 0


def signed_headers(app_secret: str, now_ms: int | None = None) -> dict[str, str]:
    """The `timestamp` and `sign` headers DingTalk puts on every callback. Without
    `now_ms`, each call's timestamp is later than the last one's (by a millisecond when
    the clock has not moved): every callback its own signed pair, as the robot accepts
    each pair only once."""
    global _last_signed_ms
    if now_ms is None:
        now_ms = _last_signed_ms = max(int(time.time() * 1000), _last_signed_ms + 1)
    timestamp = str(now_ms)
    return {"timestamp": timestamp, "sign": sign(timestamp, app_secret)}


def _base_payload(
    text: str,
    *,
    conversation_type: str,
    conversation_id: str,
    sender_staff_id: str,
    sender_id: str | None,
    sender_nick: str,
    msg_id: str | None,
    session_webhook: str,
    webhook_expires_ms: int | None,
    robot_code: str,
    chatbot_user_id: str,
    create_at_ms: int | None,
    is_admin: bool,
) -> JSONDict:
    create_at = int(time.time() * 1000) if create_at_ms is None else create_at_ms
    return {
        "conversationId": conversation_id,
        "conversationType": conversation_type,
        "msgId": msg_id or f"msg{next(_msg_ids):08d}==",
        "msgtype": "text",
        "text": {"content": text},
        "createAt": create_at,
        "senderStaffId": sender_staff_id,
        "senderId": sender_id or f"$:LWCP_v1:${sender_staff_id}",
        "senderNick": sender_nick,
        "senderCorpId": DEFAULT_CORP_ID,
        "isAdmin": is_admin,
        "chatbotUserId": chatbot_user_id,
        "chatbotCorpId": DEFAULT_CORP_ID,
        "robotCode": robot_code,
        "sessionWebhook": session_webhook,
        "sessionWebhookExpiredTime": (
            create_at + SESSION_WEBHOOK_TTL_MS if webhook_expires_ms is None else webhook_expires_ms
        ),
    }


def private_message(
    text: str,
    *,
    sender_staff_id: str,
    session_webhook: str,
    sender_id: str | None = None,
    sender_nick: str = "张三",
    msg_id: str | None = None,
    webhook_expires_ms: int | None = None,
    robot_code: str = "robot",
    conversation_id: str | None = None,
    chatbot_user_id: str = DEFAULT_CHATBOT_USER_ID,
    create_at_ms: int | None = None,
    is_admin: bool = False,
) -> JSONDict:
    """A 1:1 chat message (`conversationType` "1"). Its `conversationId` is stable per
    (robot, sender) like DingTalk's, and `isInAtList` is False: code deciding whether to
    answer must look at `conversationType`, not at the @-list."""
    if conversation_id is None:
        digest = hashlib.sha256(f"{robot_code}:{sender_staff_id}".encode()).digest()
        conversation_id = "cid" + base64.b64encode(digest[:18]).decode()
    payload = _base_payload(
        text,
        conversation_type="1",
        conversation_id=conversation_id,
        sender_staff_id=sender_staff_id,
        sender_id=sender_id,
        sender_nick=sender_nick,
        msg_id=msg_id,
        session_webhook=session_webhook,
        webhook_expires_ms=webhook_expires_ms,
        robot_code=robot_code,
        chatbot_user_id=chatbot_user_id,
        create_at_ms=create_at_ms,
        is_admin=is_admin,
    )
    payload.update({"isInAtList": False, "atUsers": []})
    return payload


def group_message(
    text: str,
    *,
    conversation_id: str,
    sender_staff_id: str,
    at_bot: bool,
    session_webhook: str,
    conversation_title: str = "项目群",
    sender_id: str | None = None,
    sender_nick: str = "张三",
    msg_id: str | None = None,
    webhook_expires_ms: int | None = None,
    robot_code: str = "robot",
    at_users: Iterable[str] = (),
    chatbot_user_id: str = DEFAULT_CHATBOT_USER_ID,
    create_at_ms: int | None = None,
    is_admin: bool = False,
) -> JSONDict:
    """A group message (`conversationType` "2").

    `text` is used verbatim as `text.content`. Real DingTalk removes the "@robot" part
    from the content and often leaves the surrounding whitespace, so pass e.g. " 你好" to
    exercise that. DingTalk only calls back for messages that @ the robot; `at_bot=False`
    builds the payload anyway so adapters' filters can be tested. `at_users` are extra
    staff ids @-ed in the same message."""
    payload = _base_payload(
        text,
        conversation_type="2",
        conversation_id=conversation_id,
        sender_staff_id=sender_staff_id,
        sender_id=sender_id,
        sender_nick=sender_nick,
        msg_id=msg_id,
        session_webhook=session_webhook,
        webhook_expires_ms=webhook_expires_ms,
        robot_code=robot_code,
        chatbot_user_id=chatbot_user_id,
        create_at_ms=create_at_ms,
        is_admin=is_admin,
    )
    mentioned = [{"dingtalkId": chatbot_user_id}] if at_bot else []
    mentioned += [{"dingtalkId": f"$:LWCP_v1:${sid}", "staffId": sid} for sid in at_users]
    payload.update(
        {
            "conversationTitle": conversation_title,
            "isInAtList": at_bot,
            "atUsers": mentioned,
        }
    )
    return payload


async def post_callback(
    url: str, payload: JSONDict, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """POST a callback like DingTalk does; returns (status, parsed JSON or raw text)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=payload, headers=headers or {}) as response,
    ):
        text = await response.text()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text


async def post_raw(
    url: str, body: bytes, headers: dict[str, str] | None = None, *, chunked: bool = False
) -> tuple[int, Any]:
    """POST exact bytes (a body no JSON encoder would write); `chunked` sends them with
    `Transfer-Encoding: chunked` and no `Content-Length`, so a size limit cannot be
    checked before reading. Returns (status, parsed JSON or raw text)."""

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 16 * 1024):
            yield body[start : start + 16 * 1024]

    all_headers = {"Content-Type": "application/json", **(headers or {})}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=pieces() if chunked else body, headers=all_headers) as response,
    ):
        text = await response.text()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text


@dataclass(frozen=True)
class WebhookPost:
    """One POST that reached the sink; `session` is the name given to `webhook_url`."""

    session: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]

    @property
    def msgtype(self) -> str | None:
        return self.body.get("msgtype") if isinstance(self.body, dict) else None

    @property
    def content(self) -> str | None:
        """The visible text: `text.content` or `markdown.text`."""
        if not isinstance(self.body, dict):
            return None
        section = self.body.get(self.msgtype or "") or {}
        return section.get("content") if self.msgtype == "text" else section.get("text")


@dataclass
class _SinkFailure:
    status: int
    errcode: int | None
    errmsg: str
    remaining: int
    location: str | None = None


class WebhookSink:
    """A local `sessionWebhook` endpoint: accepts POSTs on any path, keys them by the
    `session` query parameter and answers `{"errcode": 0, "errmsg": "ok"}`.

    Like DingTalk it answers HTTP 200 with errcode 40035 when the body is not a JSON
    message with the fields its `msgtype` requires (a markdown without `title` is
    rejected); such posts appear in `attempts` but not in `received`."""

    def __init__(self) -> None:
        self.received: list[WebhookPost] = []
        self.attempts: list[WebhookPost] = []
        self._failures: list[_SinkFailure] = []
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port = 0

    async def start(self) -> Self:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def webhook_url(self, name: str) -> str:
        """A distinct sessionWebhook URL for conversation `name` (DingTalk's path shape)."""
        return f"{self.base_url}/robot/sendBySession?session={quote(name, safe='')}"

    def received_for(self, name: str) -> list[WebhookPost]:
        return [post for post in self.received if post.session == name]

    def fail_next(
        self,
        status: int = 500,
        *,
        errcode: int | None = None,
        errmsg: str = "system error",
        times: int = 1,
    ) -> None:
        """Fail the next `times` posts: with HTTP `status`, or (`status=200` plus an
        `errcode`) the way DingTalk reports e.g. rate limiting (130101) in a 200 body."""
        self._failures.append(_SinkFailure(status, errcode, errmsg, times))

    def redirect_next(self, location: str, status: int = 307) -> None:
        """Answer the next post with a redirect to `location` (307 and 308 keep the POST
        and its body), as a hostile or misconfigured endpoint could."""
        self._failures.append(_SinkFailure(status, None, "redirect", 1, location))

    async def wait_for(
        self,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - a deadline, mirrors FakeTelegramAPI
        *,
        name: str | None = None,
    ) -> list[WebhookPost]:
        """Wait until `count` posts were accepted (for conversation `name` if given)."""

        def posts() -> list[WebhookPost]:
            return self.received if name is None else self.received_for(name)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(posts()) < count:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"expected {count} webhook posts, got {[(p.session, p.body) for p in posts()]!r}"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return list(posts())

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.text()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        post = WebhookPost(
            session=request.query.get("session", ""),
            path=request.path,
            query=dict(request.query),
            body=body,
            headers=dict(request.headers),
        )
        self.attempts.append(post)
        try:
            if self._failures:
                failure = self._failures[0]
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.pop(0)
                errcode = -1 if failure.errcode is None else failure.errcode
                return web.json_response(
                    {"errcode": errcode, "errmsg": failure.errmsg},
                    status=failure.status,
                    headers={"Location": failure.location} if failure.location else None,
                )
            if not _valid_message(body):
                return web.json_response({"errcode": 40035, "errmsg": "缺少参数 json"})
            self.received.append(post)
            return web.json_response({"errcode": 0, "errmsg": "ok"})
        finally:
            self._changed.set()
            self._changed = asyncio.Event()


def _valid_message(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    msgtype = body.get("msgtype")
    section = body.get(msgtype) if isinstance(msgtype, str) else None
    if not isinstance(section, dict):
        return False
    if msgtype == "text":
        return bool(section.get("content"))
    if msgtype == "markdown":
        return bool(section.get("title")) and bool(section.get("text"))
    return True
