"""DingTalk robot end to end: signed callbacks into the real aiohttp app, replies into a
local sessionWebhook sink, memories in a real workspace."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.dingtalk_bot import verify_signature
from adapters.settings import load_app_config as load_config
from memory_core.base.clock import ManualClock
from memory_core.base.errors import ConfigError
from testkit.bot import llm_env
from testkit.dingtalk import WebhookSink, sign, signed_headers
from testkit.openai_server import FakeOpenAI
from tests.functional.conftest import message_rows, workspace_files
from tests.functional.dingtalk_support import BAD_SIGNATURE, HOUR_MS, SECRET, dm, grp, robot


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
        assert len(bot.server.window) == 1
        clock.advance(timedelta(seconds=2))
        assert await bot.post(dm("/scope", sink, msg_id="msgW3=="), kept) == (403, BAD_SIGNATURE)
        assert await bot.post(dm("/scope", sink, msg_id="msgW4=="), at(0)) == (200, {})
        assert len(bot.server.window) == 1  # the expired pair is no longer held
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
