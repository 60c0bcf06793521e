"""DingTalk robot end to end: signed callbacks into the real aiohttp app, replies into a
local sessionWebhook sink, memories in a real workspace."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from yarl import URL

from adapters.dingtalk_bot import (
    DingTalkCallbackServer,
    parse_payload,
    run_dingtalk_callback,
    verify_signature,
)
from adapters.settings import DingTalkSettings
from adapters.settings import load_app_config as load_config
from memory_core.base.clock import Clock, ManualClock, system_clock
from memory_core.base.errors import ChatmemError, ConfigError
from memory_core.engine import MemoryCore
from testkit.bot import llm_env
from testkit.dingtalk import (
    WebhookSink,
    group_message,
    post_callback,
    post_raw,
    private_message,
    sign,
    signed_headers,
)
from testkit.openai_server import FakeOpenAI
from tests.functional.conftest import make_config, message_rows, workspace_files

SECRET = "dingtalk-app-secret-for-tests"
HOUR_MS = 60 * 60 * 1000
BAD_SIGNATURE = {"error": "bad signature"}


@dataclass
class Robot:
    server: DingTalkCallbackServer
    core: MemoryCore
    sink: WebhookSink
    url: str

    async def post(
        self, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        return await post_callback(
            self.url, payload, signed_headers(SECRET) if headers is None else headers
        )

    async def ask(self, payload: dict[str, Any], session: str) -> str:
        """Post a signed callback and return the reply that lands in `session`'s webhook."""
        before = len(self.sink.received_for(session))
        status, body = await self.post(payload)
        assert (status, body) == (200, {})
        posts = await self.sink.wait_for(before + 1, name=session)
        content = posts[-1].content
        assert content is not None
        return content


@pytest.fixture
async def sink() -> AsyncIterator[WebhookSink]:
    async with WebhookSink() as running:
        yield running


@asynccontextmanager
async def robot(
    tmp_path: Path,
    sink: WebhookSink,
    *,
    env: Mapping[str, str] | None = None,
    clock: Clock = system_clock,
    **dingtalk: Any,
) -> AsyncIterator[Robot]:
    # The sink is plain HTTP on loopback: allowed here explicitly, as an operator would.
    settings: dict[str, Any] = {
        "app_key": "dingappkey",
        "app_secret": SECRET,
        "webhook_hosts": [sink.base_url],
    }
    settings.update(dingtalk)
    config = make_config(tmp_path / "ws", env=env, dingtalk=settings)
    async with MemoryCore.open(config) as core:
        server = DingTalkCallbackServer(core, config.dingtalk, clock)
        test_server = TestServer(server.app(), host="127.0.0.1")
        await test_server.start_server()
        try:
            url = str(test_server.make_url(config.dingtalk.callback_path))
            yield Robot(server, core, sink, url)
        finally:
            await test_server.close()  # runs the app's cleanup: drains replies in flight


def dm(text: str, sink: WebhookSink, session: str = "D1", **kw: Any) -> dict[str, Any]:
    return private_message(
        text,
        sender_staff_id=kw.pop("sender", "staff-1"),
        session_webhook=sink.webhook_url(session),
        **kw,
    )


def grp(
    text: str, sink: WebhookSink, *, conversation: str = "cidGroup1", session: str = "G1", **kw: Any
) -> dict[str, Any]:
    return group_message(
        text,
        conversation_id=conversation,
        sender_staff_id=kw.pop("sender", "staff-1"),
        at_bot=kw.pop("at_bot", True),
        session_webhook=sink.webhook_url(session),
        **kw,
    )


async def test_signed_private_message_is_answered_in_its_webhook(
    tmp_path: Path, sink: WebhookSink
) -> None:
    async with robot(tmp_path, sink) as bot:
        reply = await bot.ask(dm("记住：我喜欢乌龙茶", sink), "D1")
        assert reply == "好的，我记住了：我喜欢乌龙茶"
        memory = await bot.ask(dm("/memory", sink), "D1")
        assert "我喜欢乌龙茶" in memory
        rows = await message_rows(bot.core, "role = 'user'")
        assert rows == [("main", "user", "张三", "记住：我喜欢乌龙茶")]
    [first, _] = sink.received
    assert first.session == "D1"
    assert first.msgtype == "markdown"  # the default reply format


def now_ms() -> int:
    return int(time.time() * 1000)


def test_the_signature_is_dingtalks_published_hmac() -> None:
    """Pinned to a value computed apart from chatmem and its fakes (printf
    '1700000000000\\nthis-is-a-secret' | openssl dgst -sha256 -hmac this-is-a-secret
    -binary | base64). The other tests sign with testkit's `sign`, which the robot
    accepts, so this pins the fake to DingTalk's algorithm too."""
    known = "H8gmwfqAksq2Urq/80Gzh67cDgc8GW1/TVh2YeVjvtU="
    now_ms = 1_700_000_000_000
    assert verify_signature("1700000000000", known, "this-is-a-secret", now_ms)
    assert not verify_signature("1700000000001", known, "this-is-a-secret", now_ms)
    assert not verify_signature("1700000000000", known, "another-secret", now_ms)


# Built when the test runs, not at collection: a suite can run for minutes before it.
BAD_HEADERS: dict[str, Callable[[], dict[str, str]]] = {
    "forged": lambda: {"timestamp": str(now_ms()), "sign": "Zm9yZ2Vk"},
    "other-secret": lambda: signed_headers("another-apps-secret"),
    "expired": lambda: signed_headers(SECRET, now_ms=now_ms() - HOUR_MS - 60_000),
    "future": lambda: signed_headers(SECRET, now_ms=now_ms() + HOUR_MS + 60_000),
    "no-timestamp": lambda: {"sign": sign(str(now_ms()), SECRET)},
    "no-sign": lambda: {"timestamp": str(now_ms())},
    "non-digit-timestamp": lambda: {"timestamp": "1e12", "sign": sign("1e12", SECRET)},
    "non-ascii": lambda: {"timestamp": str(now_ms()), "sign": "ünïcode"},
}


@pytest.mark.parametrize("case", list(BAD_HEADERS))
async def test_bad_signature_is_refused_and_nothing_stored(
    tmp_path: Path, sink: WebhookSink, case: str
) -> None:
    headers = BAD_HEADERS[case]()
    async with robot(tmp_path, sink) as bot:
        files_before = workspace_files(tmp_path / "ws")
        status, body = await bot.post(dm("记住：伪造的消息", sink), headers)
        assert status == 403
        assert body == {"error": "bad signature"}
        await bot.server.drain()
        assert await message_rows(bot.core) == []
        assert workspace_files(tmp_path / "ws") == files_before
    assert sink.attempts == []


async def test_a_replayed_header_pair_is_refused_whatever_its_body(
    tmp_path: Path, sink: WebhookSink
) -> None:
    """The signature covers only the timestamp: a captured (timestamp, sign) pair sent
    again with a new body is refused (403), its body never read, nothing of it stored."""
    headers = signed_headers(SECRET)
    async with robot(tmp_path, sink) as bot:
        assert await bot.post(dm("记住：我喜欢乌龙茶", sink), headers) == (200, {})
        await sink.wait_for(1, name="D1")
        await bot.server.drain()
        files_before = workspace_files(tmp_path / "ws")
        for replayed in (dm("记住：密码是1234", sink), dm("记住：我喜欢乌龙茶", sink)):
            status, body = await bot.post(replayed, dict(headers))
            assert (status, body) == (403, BAD_SIGNATURE)
        await bot.server.drain()
        assert await message_rows(bot.core, "content LIKE '%1234%'") == []
        assert workspace_files(tmp_path / "ws") == files_before
        # A fresh pair is served as before.
        assert await bot.ask(dm("/scope", sink), "D1") == "scope: main (dm_scope = main)"
    assert len(sink.attempts) == 2


async def test_the_signature_window_is_configured_and_its_pairs_are_forgotten(
    tmp_path: Path, sink: WebhookSink
) -> None:
    """`signature_max_age_seconds` bounds how old a signed timestamp may be (on the
    injected clock), and the pairs seen are kept only for as long: once a pair's timestamp
    leaves the window it is refused as expired and no longer held."""
    clock = ManualClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC))

    def at(seconds_ago: int) -> dict[str, str]:
        return signed_headers(SECRET, now_ms=int(clock().timestamp() * 1000) - seconds_ago * 1000)

    async with robot(tmp_path, sink, clock=clock, signature_max_age_seconds=60) as bot:
        assert (await bot.post(dm("/scope", sink), at(61)))[0] == 403
        assert (await bot.post(dm("/scope", sink), at(-61)))[0] == 403
        kept = at(59)
        assert await bot.post(dm("/scope", sink, msg_id="msgW1=="), kept) == (200, {})
        assert await bot.post(dm("/scope", sink, msg_id="msgW2=="), kept) == (403, BAD_SIGNATURE)
        assert len(bot.server.signed) == 1
        clock.advance(timedelta(seconds=2))
        assert await bot.post(dm("/scope", sink, msg_id="msgW3=="), kept) == (403, BAD_SIGNATURE)
        assert await bot.post(dm("/scope", sink, msg_id="msgW4=="), at(0)) == (200, {})
        assert len(bot.server.signed) == 1  # the expired pair is no longer held
        await sink.wait_for(2, name="D1")


@pytest.mark.parametrize("seconds", [0, 3601])
def test_the_signature_window_is_at_most_dingtalks_hour(tmp_path: Path, seconds: int) -> None:
    file = tmp_path / "chatmem.toml"
    file.write_text(f"[dingtalk]\nsignature_max_age_seconds = {seconds}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"signature_max_age_seconds.*from 1 to 3600"):
        load_config(file, env={})


async def test_group_needs_a_mention_by_config(tmp_path: Path, sink: WebhookSink) -> None:
    async with robot(tmp_path, sink) as bot:
        status, body = await bot.post(grp("记住：没有艾特机器人", sink, at_bot=False))
        assert (status, body) == (200, {"ignored": "not mentioned"})
        reply = await bot.ask(grp(" 记住：周五开周会", sink), "G1")
        assert reply == "好的，我记住了：周五开周会"
        await bot.server.drain()
        assert await message_rows(bot.core, "content LIKE '%没有艾特%'") == []
        scope = await bot.ask(grp("/scope", sink), "G1")
        assert scope.startswith("scope: group:dingtalk:cidGroup1 ")
    assert len(sink.received_for("G1")) == 2


async def test_group_without_mention_requirement_answers(tmp_path: Path, sink: WebhookSink) -> None:
    async with robot(tmp_path, sink, group_requires_mention=False) as bot:
        reply = await bot.ask(grp("记住：不用艾特也回答", sink, at_bot=False), "G1")
        assert reply == "好的，我记住了：不用艾特也回答"


async def test_duplicate_msgid_is_handled_once(tmp_path: Path, sink: WebhookSink) -> None:
    async with robot(tmp_path, sink) as bot:
        payload = dm("记住：重试只处理一次", sink, msg_id="msgRETRY01==")
        for _ in range(3):  # DingTalk retries a callback it thinks failed
            assert await bot.post(payload) == (200, {})
        await sink.wait_for(1, name="D1")
        await bot.server.drain()
        assert [p.content for p in sink.received] == ["好的，我记住了：重试只处理一次"]
        rows = await message_rows(bot.core, "content LIKE '%重试只处理一次%'")
        assert [r[1] for r in rows] == ["user", "assistant"]
        # A different msgId with the same text is a new message.
        again = await bot.ask(dm("记住：重试只处理一次", sink, msg_id="msgRETRY02=="), "D1")
        assert again.startswith("这条我之前就记得")


async def test_replies_land_in_their_own_conversation(tmp_path: Path, sink: WebhookSink) -> None:
    async with robot(tmp_path, sink) as bot:
        # Both callbacks first, then the replies: each must go to its own webhook.
        await bot.post(grp("记住：一号群的暗号是青龙", sink, conversation="cidA", session="A"))
        await bot.post(grp("记住：二号群的暗号是白虎", sink, conversation="cidB", session="B"))
        [a] = await sink.wait_for(1, name="A")
        [b] = await sink.wait_for(1, name="B")
        assert a.content == "好的，我记住了：一号群的暗号是青龙"
        assert b.content == "好的，我记住了：二号群的暗号是白虎"
        memory_a = await bot.ask(grp("/memory", sink, conversation="cidA", session="A"), "A")
        memory_b = await bot.ask(grp("/memory", sink, conversation="cidB", session="B"), "B")
        assert "青龙" in memory_a and "白虎" not in memory_a
        assert "白虎" in memory_b and "青龙" not in memory_b
        found = await bot.ask(grp("/search 白虎 暗号", sink, conversation="cidA", session="A"), "A")
        # Group A's own 暗号 matches; group B's 白虎 never does.
        assert "青龙" in found and "白虎" not in found
    assert {p.session for p in sink.received} == {"A", "B"}


@pytest.mark.parametrize("reply_format", ["text", "markdown"])
async def test_reply_format(tmp_path: Path, sink: WebhookSink, reply_format: str) -> None:
    async with robot(tmp_path, sink, reply_format=reply_format) as bot:
        await bot.ask(dm("记住：回复格式测试，内容比较长一些以便截断标题", sink), "D1")
    [post] = sink.received
    assert post.msgtype == reply_format
    body = post.body
    if reply_format == "text":
        assert body == {"msgtype": "text", "text": {"content": post.content}}
    else:
        assert set(body["markdown"]) == {"title", "text"}
        assert 0 < len(body["markdown"]["title"]) <= 20
        assert body["markdown"]["text"].startswith("好的，我记住了：")


async def test_expired_session_webhook_is_not_posted(tmp_path: Path, sink: WebhookSink) -> None:
    async with robot(tmp_path, sink) as bot:
        expired = int(time.time() * 1000) - 1000
        status, _ = await bot.post(dm("记住：过期的 webhook", sink, webhook_expires_ms=expired))
        assert status == 200
        await bot.server.drain()
        # The message itself is kept (it was a valid message); only the reply is dropped.
        assert await message_rows(bot.core, "role = 'user'") == [
            ("main", "user", "张三", "记住：过期的 webhook")
        ]
    assert sink.attempts == []


@pytest.mark.parametrize(
    ("status", "errcode"), [(500, None), (200, 130101)], ids=["http-500", "errcode-in-200"]
)
async def test_failed_webhook_post_is_retried(
    tmp_path: Path, sink: WebhookSink, status: int, errcode: int | None
) -> None:
    """DingTalk reports some failures (130101: sending too fast) in a 200 body."""
    async with robot(tmp_path, sink, reply_format="text") as bot:
        sink.fail_next(status, errcode=errcode)
        reply = await bot.ask(dm("记住：webhook 失败后重试", sink), "D1")
        assert reply == "好的，我记住了：webhook 失败后重试"
    assert len(sink.attempts) == 2 and len(sink.received) == 1


async def test_private_chats_follow_dm_scope_and_the_model_sees_only_its_scope(
    tmp_path: Path, sink: WebhookSink, fake_llm: FakeOpenAI
) -> None:
    async with robot(
        tmp_path, sink, env={**llm_env(fake_llm), "CHATMEM_DM_SCOPE": "per-peer"}
    ) as bot:
        await bot.ask(dm("记住：我的工号是 A-1001", sink, session="U1", sender="u1"), "U1")
        await bot.ask(dm("记住：我的工号是 B-2002", sink, session="U2", sender="u2"), "U2")
        fake_llm.reply_text("你的工号是 A-1001")
        reply = await bot.ask(dm("我的工号是多少，甲问", sink, session="U1", sender="u1"), "U1")
        assert reply == "你的工号是 A-1001"
        scope = await bot.ask(dm("/scope", sink, session="U2", sender="u2"), "U2")
        assert scope == "scope: peer:u2 (dm_scope = per-peer)"
    [request] = fake_llm.chat_requests()
    prompt = "\n".join(str(m.get("content")) for m in request["messages"])
    assert "A-1001" in prompt and "B-2002" not in prompt
    assert sorted(p.name for p in (tmp_path / "ws" / "memory" / "scopes").iterdir()) == [
        "peer_u1",
        "peer_u2",
    ]


async def test_conversation_order_is_kept(tmp_path: Path, sink: WebhookSink) -> None:
    """Callbacks are handled as concurrent tasks; one conversation's still run in order."""
    async with robot(tmp_path, sink, reply_format="text") as bot:
        facts = ["我住在杭州", "我的生日是五月", "我养了一只猫", "我每天跑步"]
        for fact in facts:
            await bot.post(dm(f"记住：{fact}", sink))
        await bot.post(dm("/memory", sink))
        posts = await sink.wait_for(5, name="D1")
    assert [p.content for p in posts[:4]] == [f"好的，我记住了：{f}" for f in facts]
    assert (posts[4].content or "").startswith("4 memories, best first:")


# --- item 9: malformed bodies, oversize bodies, foreign webhooks ---------------------------

DEEP = 200_000
DELETE = object()


def body_with(sink: WebhookSink, **fields: Any) -> bytes:
    """A signed-ready DM body whose `fields` are replaced (DELETE removes one)."""
    payload = dm("记住：坏字段的消息不该被存下", sink)
    for name, value in fields.items():
        if value is DELETE:
            del payload[name]
        else:
            payload[name] = value
    return json.dumps(payload, ensure_ascii=False).encode()


def deep_field(sink: WebhookSink) -> bytes:
    """A valid message plus one extra field nested 200 000 deep (json.dumps cannot write it)."""
    body = body_with(sink, atUsers="DEEP-PLACEHOLDER")
    return body.replace(b'"DEEP-PLACEHOLDER"', b"[" * DEEP + b"]" * DEEP)


# name: (the raw body, text the one-line error must contain)
MALFORMED: dict[str, tuple[Callable[[WebhookSink], bytes], str]] = {
    "deep-200k": (lambda s: b"[" * DEEP + b"]" * DEEP, "not JSON"),
    "deep-extra-field": (deep_field, "not JSON"),
    "createAt-1e20": (lambda s: body_with(s, createAt=10**20), "createAt"),
    "createAt-negative": (lambda s: body_with(s, createAt=-1), "createAt"),
    "createAt-string": (lambda s: body_with(s, createAt="1700000000000"), "createAt"),
    "createAt-float": (lambda s: body_with(s, createAt=1.7e12), "createAt"),
    "createAt-bool": (lambda s: body_with(s, createAt=True), "createAt"),
    "createAt-5000-digits": (
        lambda s: body_with(s, createAt="N").replace(b'"N"', b"9" * 5000),
        "not JSON",
    ),
    "content-list": (lambda s: body_with(s, text={"content": ["a", "b"]}), "text.content"),
    "content-number": (lambda s: body_with(s, text={"content": 5}), "text.content"),
    "content-lone-surrogate": (
        lambda s: body_with(s, text={"content": "X"}).replace(b'"X"', b'"\\ud800"'),
        "text.content",
    ),
    "text-string": (lambda s: body_with(s, text="记住：字符串"), "text"),
    "text-missing": (lambda s: body_with(s, text=DELETE), "text.content"),
    "senderStaffId-int": (lambda s: body_with(s, senderStaffId=12345), "senderStaffId"),
    "senderStaffId-too-long": (lambda s: body_with(s, senderStaffId="s" * 1000), "senderStaffId"),
    "senderId-list": (lambda s: body_with(s, senderId=["x"]), "senderId"),
    "no-sender": (
        lambda s: body_with(s, senderStaffId=DELETE, senderId=DELETE),
        "senderStaffId or senderId",
    ),
    "senderNick-object": (lambda s: body_with(s, senderNick={"a": 1}), "senderNick"),
    "conversationId-int": (lambda s: body_with(s, conversationId=7), "conversationId"),
    "conversationId-empty": (lambda s: body_with(s, conversationId=""), "conversationId"),
    "conversationId-missing": (lambda s: body_with(s, conversationId=DELETE), "conversationId"),
    "conversationType-int": (lambda s: body_with(s, conversationType=1), "conversationType"),
    "conversationType-unknown": (lambda s: body_with(s, conversationType="3"), "conversationType"),
    "isInAtList-string": (lambda s: body_with(s, isInAtList="true"), "isInAtList"),
    "msgId-int": (lambda s: body_with(s, msgId=7), "msgId"),
    "msgtype-missing": (lambda s: body_with(s, msgtype=DELETE), "msgtype"),
    "robotCode-list": (lambda s: body_with(s, robotCode=["r"]), "robotCode"),
    "sessionWebhook-int": (lambda s: body_with(s, sessionWebhook=42), "sessionWebhook"),
    "sessionWebhookExpiredTime-string": (
        lambda s: body_with(s, sessionWebhookExpiredTime="later"),
        "sessionWebhookExpiredTime",
    ),
    "array": (lambda s: b"[1, 2]", "not a JSON object"),
    "string": (lambda s: b'"hello"', "not a JSON object"),
    "truncated": (lambda s: body_with(s)[:-1], "not JSON"),
    "invalid-utf8": (lambda s: b'{"text": "\xff"}', "not JSON"),
    "empty": (lambda s: b"", "not JSON"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_malformed_body_is_400_and_nothing_stored(
    tmp_path: Path, sink: WebhookSink, case: str
) -> None:
    build, field = MALFORMED[case]
    # A cap above the 400 kB deep bodies: the parser must refuse them, not the size limit.
    async with robot(tmp_path, sink, max_body_bytes=1024 * 1024) as bot:
        files_before = workspace_files(tmp_path / "ws")
        status, body = await post_raw(bot.url, build(sink), signed_headers(SECRET))
        assert status == 400, body
        assert isinstance(body, dict) and set(body) == {"error"}
        assert field in body["error"] and "\n" not in body["error"]
        await bot.server.drain()
        assert await message_rows(bot.core) == []
        assert workspace_files(tmp_path / "ws") == files_before
        # The robot still works after refusing it.
        assert await bot.ask(dm("/scope", sink), "D1") == "scope: main (dm_scope = main)"
    assert len(sink.attempts) == 1


def padded(body: bytes, size: int) -> bytes:
    """`body` with trailing JSON whitespace up to exactly `size` bytes."""
    assert len(body) <= size
    return body + b" " * (size - len(body))


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_body_over_max_body_bytes_is_413_and_nothing_stored(
    tmp_path: Path, sink: WebhookSink, chunked: bool
) -> None:
    async with robot(tmp_path, sink, max_body_bytes=4096, reply_format="text") as bot:
        files_before = workspace_files(tmp_path / "ws")
        over = padded(body_with(sink), 4097)
        status, body = await post_raw(bot.url, over, signed_headers(SECRET), chunked=chunked)
        assert (status, body) == (413, {"error": "body larger than dingtalk.max_body_bytes (4096)"})
        await bot.server.drain()
        assert await message_rows(bot.core) == []
        assert workspace_files(tmp_path / "ws") == files_before
        # Exactly the cap is read and answered.
        at_cap = padded(body_with(sink), 4096)
        status, body = await post_raw(bot.url, at_cap, signed_headers(SECRET), chunked=chunked)
        assert (status, body) == (200, {})
        [reply] = await sink.wait_for(1, name="D1")
    assert reply.content == "好的，我记住了：坏字段的消息不该被存下"


async def test_a_200k_deep_body_under_the_default_cap_is_400(
    tmp_path: Path, sink: WebhookSink
) -> None:
    """The issue's body, unclosed so it fits the default cap: the parser meets the depth."""
    async with robot(tmp_path, sink) as bot:
        status, body = await post_raw(bot.url, b"[" * DEEP, signed_headers(SECRET))
        assert (status, body) == (400, {"error": "body is not JSON (or is nested too deeply)"})
        await bot.server.drain()
        assert await message_rows(bot.core) == []


SESSION_TOKEN = "s3cr3t-session-token"

# Posted with the default webhook_hosts; the sink's own URL is the loopback case.
FOREIGN_WEBHOOKS: dict[str, str | None] = {
    "loopback-sink": None,
    "loopback-https": f"https://127.0.0.1/robot/sendBySession?session={SESSION_TOKEN}",
    "localhost": f"https://localhost/robot/sendBySession?session={SESSION_TOKEN}",
    "other-host": f"https://attacker.example/robot/sendBySession?session={SESSION_TOKEN}",
    "plain-http-dingtalk": f"http://oapi.dingtalk.com/robot/sendBySession?session={SESSION_TOKEN}",
    "userinfo": (
        f"https://oapi.dingtalk.com@attacker.example/robot/sendBySession?session={SESSION_TOKEN}"
    ),
    "other-port": f"https://oapi.dingtalk.com:8443/robot/sendBySession?session={SESSION_TOKEN}",
    "suffix-host": (
        f"https://oapi.dingtalk.com.attacker.example/robot/sendBySession?session={SESSION_TOKEN}"
    ),
    "scheme-relative": f"//oapi.dingtalk.com/robot/sendBySession?session={SESSION_TOKEN}",
    "backslash": f"https://attacker.example\\@oapi.dingtalk.com/?session={SESSION_TOKEN}",
}


@pytest.mark.parametrize("case", list(FOREIGN_WEBHOOKS))
async def test_default_webhook_hosts_refuse_loopback_and_foreign_hosts(
    tmp_path: Path, sink: WebhookSink, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.dingtalk_bot")
    webhook = FOREIGN_WEBHOOKS[case] or sink.webhook_url(SESSION_TOKEN)
    payload = dm("记住：我的银行卡密码", sink)
    payload["sessionWebhook"] = webhook
    async with robot(tmp_path, sink, webhook_hosts=DingTalkSettings().webhook_hosts) as bot:
        files_before = workspace_files(tmp_path / "ws")
        status, body = await bot.post(payload)
        assert status == 400
        assert "sessionWebhook" in body["error"] and SESSION_TOKEN not in body["error"]
        await bot.server.drain()
        assert await message_rows(bot.core) == []
        assert workspace_files(tmp_path / "ws") == files_before
    assert sink.attempts == []
    assert "dingtalk callback refused: sessionWebhook" in caplog.text
    assert SESSION_TOKEN not in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    "url",
    [
        "https://oapi.dingtalk.com/robot/sendBySession?session=abc",
        "https://api.dingtalk.com/v1.0/robot/sendBySession?session=abc",
        "https://OAPI.DingTalk.com:443/robot/sendBySession?session=abc",
    ],
)
def test_default_webhook_hosts_accept_dingtalks_own(url: str) -> None:
    payload = private_message("你好", sender_staff_id="u1", session_webhook=url)
    callback = parse_payload(payload, "key", DingTalkSettings().webhook_origins())
    assert callback.webhook == URL(url)


async def test_a_redirect_from_the_webhook_is_not_followed(
    tmp_path: Path, sink: WebhookSink
) -> None:
    async with WebhookSink() as elsewhere, robot(tmp_path, sink, reply_format="text") as bot:
        sink.redirect_next(elsewhere.webhook_url("stolen"))
        await bot.post(dm("记住：重定向不跟随", sink))
        await bot.server.drain()
    assert elsewhere.attempts == []
    # A redirect is a failed post: retried on the same, allowed URL.
    assert [p.session for p in sink.attempts] == ["D1", "D1"]
    assert [p.content for p in sink.received] == ["好的，我记住了：重定向不跟随"]


@pytest.mark.parametrize(
    "entry",
    [
        "https://oapi.dingtalk.com/robot",
        "ftp://oapi.dingtalk.com",
        "user@oapi.dingtalk.com",
        "https://user@oapi.dingtalk.com",
        "oapi.dingtalk.com/robot",
        "oapi.dingtalk.com:443",
        "http://127.0.0.1:99999",
        "",
    ],
)
def test_a_bad_webhook_hosts_entry_is_a_config_error(tmp_path: Path, entry: str) -> None:
    file = tmp_path / "chatmem.toml"
    file.write_text(f"[dingtalk]\nwebhook_hosts = [{json.dumps(entry)}]\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"^\S+chatmem\.toml: 'dingtalk\.webhook_hosts': entry "
    ) as err:
        load_config(file, env={})
    assert "\n" not in str(err.value)
    # Settings copied without validation are checked when the robot starts.
    settings = DingTalkSettings().model_copy(update={"webhook_hosts": [entry], "app_secret": "x"})
    with pytest.raises(ConfigError, match=r"^dingtalk\.webhook_hosts: entry "):
        settings.webhook_origins()


def test_max_body_bytes_has_a_floor(tmp_path: Path) -> None:
    file = tmp_path / "chatmem.toml"
    file.write_text("[dingtalk]\nmax_body_bytes = 10\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'dingtalk\.max_body_bytes': must be at least 1024"):
        load_config(file, env={})


async def test_a_busy_listen_port_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """`chatmem dingtalk` on a port something else holds: one error naming the setting
    (the CLI prints it as one line, exit 2), never the app secret."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        settings = {"app_key": "dingappkey", "app_secret": SECRET, "listen_port": port}
        config = make_config(tmp_path / "ws", dingtalk=settings)
        async with MemoryCore.open(config) as core:
            with pytest.raises(ChatmemError, match=f"cannot listen on 127.0.0.1:{port}") as err:
                await run_dingtalk_callback(core, config.dingtalk, asyncio.Event())
    assert "\n" not in str(err.value) and SECRET not in str(err.value)
