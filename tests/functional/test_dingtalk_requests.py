"""DingTalk robot end to end, the requests it refuses: malformed and oversized bodies,
webhook hosts outside DingTalk's, bad settings and a busy port."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from yarl import URL

from adapters.dingtalk_bot import parse_payload, run_dingtalk_callback
from adapters.settings import DingTalkSettings
from adapters.settings import load_app_config as load_config
from memory_core.base.errors import ChatmemError, ConfigError
from memory_core.engine import MemoryCore
from testkit.dingtalk import WebhookSink, post_raw, private_message, signed_headers
from tests.functional.conftest import make_config, message_rows, workspace_files
from tests.functional.dingtalk_support import SECRET, dm, robot

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
