"""DingTalk robot end to end: signed callbacks into the real aiohttp app, replies into a
local sessionWebhook sink, memories in a real workspace."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from adapters.dingtalk_bot import DingTalkCallbackServer
from memory_core.engine import MemoryCore
from tests.fakes.dingtalk import (
    WebhookSink,
    group_message,
    post_callback,
    private_message,
    sign,
    signed_headers,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.functional.conftest import llm_env, make_config, message_rows, workspace_files

SECRET = "dingtalk-app-secret-for-tests"
HOUR_MS = 60 * 60 * 1000


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
    **dingtalk: Any,
) -> AsyncIterator[Robot]:
    settings: dict[str, Any] = {"app_key": "dingappkey", "app_secret": SECRET}
    settings.update(dingtalk)
    config = make_config(tmp_path / "ws", env=env, dingtalk=settings)
    async with MemoryCore.open(config) as core:
        server = DingTalkCallbackServer(core, config.dingtalk)
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


async def test_failed_webhook_post_is_retried(tmp_path: Path, sink: WebhookSink) -> None:
    async with robot(tmp_path, sink, reply_format="text") as bot:
        sink.fail_next(500)
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
