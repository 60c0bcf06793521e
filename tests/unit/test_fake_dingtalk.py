"""The DingTalk fakes stand in for DingTalk itself, so their signature must match the
published algorithm byte for byte and the sink must keep conversations apart."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from testkit.dingtalk import (
    DEFAULT_CHATBOT_USER_ID,
    SESSION_WEBHOOK_TTL_MS,
    WebhookSink,
    group_message,
    post_callback,
    post_raw,
    private_message,
    sign,
    signed_headers,
)


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
async def sink() -> AsyncIterator[WebhookSink]:
    async with WebhookSink() as s:
        yield s


def test_sign_matches_hand_computed_hmac() -> None:
    timestamp, secret = "1700000000000", "this-is-a-secret"
    digest = hmac.new(b"this-is-a-secret", b"1700000000000\nthis-is-a-secret", hashlib.sha256)
    assert sign(timestamp, secret) == base64.b64encode(digest.digest()).decode()
    # Computed independently: printf '...' | openssl dgst -sha256 -hmac SECRET -binary | base64
    assert sign(timestamp, secret) == "H8gmwfqAksq2Urq/80Gzh67cDgc8GW1/TVh2YeVjvtU="
    assert sign("1700000000001", secret) != sign(timestamp, secret)


def test_signed_headers() -> None:
    headers = signed_headers("s3cret", now_ms=1700000000000)
    assert headers == {"timestamp": "1700000000000", "sign": sign("1700000000000", "s3cret")}
    assert signed_headers("s3cret")["timestamp"].isdigit()


def test_private_message_fields() -> None:
    payload = private_message(
        "记住我对花生过敏",
        sender_staff_id="staff1",
        session_webhook="http://x/s",
        create_at_ms=1_000,
        msg_id="msgA",
    )
    assert payload["conversationType"] == "1"
    assert payload["conversationId"].startswith("cid")
    assert payload["text"] == {"content": "记住我对花生过敏"} and payload["msgtype"] == "text"
    assert (payload["senderStaffId"], payload["senderNick"]) == ("staff1", "张三")
    assert payload["senderId"] and payload["msgId"] == "msgA"
    assert payload["createAt"] == 1_000
    assert payload["sessionWebhook"] == "http://x/s"
    assert payload["sessionWebhookExpiredTime"] == 1_000 + SESSION_WEBHOOK_TTL_MS
    assert payload["isInAtList"] is False and payload["atUsers"] == []
    assert payload["chatbotUserId"] == DEFAULT_CHATBOT_USER_ID
    assert payload["robotCode"] == "robot" and payload["isAdmin"] is False
    assert "conversationTitle" not in payload
    # Stable per sender (like DingTalk), distinct across senders.
    again = private_message("x", sender_staff_id="staff1", session_webhook="http://x/s")
    other = private_message("x", sender_staff_id="staff2", session_webhook="http://x/s")
    assert again["conversationId"] == payload["conversationId"] != other["conversationId"]
    assert again["msgId"] != other["msgId"]


def test_group_message_fields() -> None:
    at = group_message(
        " 你好",
        conversation_id="cidG1",
        sender_staff_id="s1",
        at_bot=True,
        session_webhook="http://x/g",
        at_users=["s9"],
        webhook_expires_ms=42,
    )
    assert (at["conversationType"], at["conversationId"]) == ("2", "cidG1")
    assert at["conversationTitle"] == "项目群" and at["text"]["content"] == " 你好"
    assert at["isInAtList"] is True
    assert at["atUsers"] == [
        {"dingtalkId": DEFAULT_CHATBOT_USER_ID},
        {"dingtalkId": "$:LWCP_v1:$s9", "staffId": "s9"},
    ]
    assert at["sessionWebhookExpiredTime"] == 42
    plain = group_message(
        "闲聊",
        conversation_id="cidG1",
        sender_staff_id="s1",
        at_bot=False,
        session_webhook="http://x/g",
    )
    assert plain["isInAtList"] is False and plain["atUsers"] == []


async def test_sink_keeps_conversations_apart(sink: WebhookSink) -> None:
    async with aiohttp.ClientSession() as session:
        for name, body in [
            ("G1", {"msgtype": "text", "text": {"content": "hi G1"}}),
            ("P/张三", {"msgtype": "markdown", "markdown": {"title": "记忆", "text": "**hi**"}}),
            ("G1", {"msgtype": "text", "text": {"content": "again G1"}}),
        ]:
            async with session.post(sink.webhook_url(name), json=body) as response:
                assert await response.json() == {"errcode": 0, "errmsg": "ok"}
    assert sink.webhook_url("G1") != sink.webhook_url("G2")
    assert [p.content for p in await sink.wait_for(2, name="G1")] == ["hi G1", "again G1"]
    [markdown] = sink.received_for("P/张三")
    assert (markdown.msgtype, markdown.content) == ("markdown", "**hi**")
    assert markdown.path == "/robot/sendBySession" and markdown.query == {"session": "P/张三"}
    assert len(sink.received) == 3


async def test_wait_for_blocks_until_posts_arrive(sink: WebhookSink) -> None:
    with pytest.raises(TimeoutError, match="expected 1"):
        await sink.wait_for(1, timeout=0.1)
    status, body = await post_callback(
        sink.webhook_url("G1"), {"msgtype": "text", "text": {"content": "late"}}
    )
    assert (status, body) == (200, {"errcode": 0, "errmsg": "ok"})
    assert [p.session for p in await sink.wait_for(1, timeout=1)] == ["G1"]


async def test_fail_next(sink: WebhookSink) -> None:
    text = {"msgtype": "text", "text": {"content": "x"}}
    sink.fail_next(status=500)
    sink.fail_next(status=200, errcode=130101, errmsg="send too fast")
    assert (await post_callback(sink.webhook_url("G"), text))[0] == 500
    assert await post_callback(sink.webhook_url("G"), text) == (
        200,
        {"errcode": 130101, "errmsg": "send too fast"},
    )
    assert await post_callback(sink.webhook_url("G"), text) == (200, {"errcode": 0, "errmsg": "ok"})
    assert len(sink.attempts) == 3 and len(sink.received) == 1


async def test_redirect_next(sink: WebhookSink) -> None:
    text = {"msgtype": "text", "text": {"content": "x"}}
    sink.redirect_next("http://127.0.0.1:9/elsewhere")
    async with (
        aiohttp.ClientSession() as session,
        session.post(sink.webhook_url("G"), json=text, allow_redirects=False) as response,
    ):
        assert (response.status, response.headers["Location"]) == (
            307,
            "http://127.0.0.1:9/elsewhere",
        )
    assert await post_callback(sink.webhook_url("G"), text) == (200, {"errcode": 0, "errmsg": "ok"})
    assert len(sink.attempts) == 2 and len(sink.received) == 1


async def test_post_raw_sends_exact_bytes_with_or_without_a_length() -> None:
    seen: list[tuple[bytes, str | None, str | None]] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append(
            (body, request.headers.get("Content-Length"), request.headers.get("Transfer-Encoding"))
        )
        return web.json_response({"n": len(body)})

    app = web.Application()
    app.router.add_post("/raw", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/raw"
    body = b'{"a": "\xff' + b" " * 40_000
    try:
        assert await post_raw(url, body, {"sign": "s"}) == (200, {"n": len(body)})
        assert await post_raw(url, body, chunked=True) == (200, {"n": len(body)})
    finally:
        await runner.cleanup()
    assert seen == [(body, str(len(body)), None), (body, None, "chunked")]


async def test_malformed_messages_are_rejected(sink: WebhookSink) -> None:
    no_title = {"msgtype": "markdown", "markdown": {"text": "**x**"}}
    assert (await post_callback(sink.webhook_url("G"), no_title))[1]["errcode"] == 40035
    assert sink.received == [] and len(sink.attempts) == 1


async def test_post_callback_reaches_a_verifying_endpoint() -> None:
    """A minimal adapter-like endpoint that checks the signature the way DingTalk expects."""
    seen: list[dict[str, object]] = []

    async def callback(request: web.Request) -> web.Response:
        expected = sign(request.headers.get("timestamp", ""), "secret")
        if not hmac.compare_digest(request.headers.get("sign", ""), expected):
            return web.Response(status=401, text="bad sign")
        seen.append(await request.json())
        return web.json_response({"msgtype": "empty"})

    app = web.Application()
    app.router.add_post("/dingtalk/callback", callback)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/dingtalk/callback"
    try:
        payload = private_message("hi", sender_staff_id="s1", session_webhook="http://x/s")
        assert await post_callback(url, payload, signed_headers("secret")) == (
            200,
            {"msgtype": "empty"},
        )
        assert await post_callback(url, payload, signed_headers("wrong")) == (401, "bad sign")
        assert seen == [payload]
    finally:
        await runner.cleanup()
