"""The example signed-webhook front end (example_webhook.py) end to end: a real aiohttp
client posts signed requests on loopback into `WebhookServer`, a real workspace
remembers and answers, and the replies land in a local callback endpoint.

The example adds two files (the adapter and this test) and edits nothing else: its
settings, its signature and its parse are its own; the signature checks, the replay
window, the body limit, answering at once, the lock per chat and the retried reply are
adapters/webhook's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from adapters.webhook.server import WebhookServer
from memory_core.base.clock import ManualClock
from memory_core.base.errors import ConfigError
from memory_core.config import Config, env_bindings, load_config, secret_values
from memory_core.engine import MemoryCore
from tests.functional.conftest import message_rows
from tests.functional.example_webhook import (
    ExampleConfig,
    ExampleRequest,
    example_server,
    signature,
)
from tests.postgres import with_storage

SECRET = "example-webhook-secret-for-tests"
BAD_SIGNATURE = (401, {"error": "bad signature"})
WAIT_SECONDS = 10.0
"""How long a test waits for a reply to land: generous, for a busy machine."""


@dataclass
class CallbackSink:
    """The platform's reply endpoint: each POST recorded; the next `fail_next` answered 500."""

    attempts: list[dict[str, Any]] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    fail_next: int = 0
    _landed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        async with self._landed:
            self.attempts.append(body)
            if self.fail_next:
                self.fail_next -= 1
                return web.json_response({"error": "try later"}, status=500)
            self.received.append(body)
            self._landed.notify_all()
        return web.json_response({"ok": True})

    def texts(self, chat: str) -> list[str]:
        return [str(body["text"]) for body in self.received if body["chat"] == chat]

    async def wait_for(self, count: int, chat: str) -> list[str]:
        """The chat's reply texts once there are `count` of them."""

        async def landed() -> None:
            async with self._landed:
                await self._landed.wait_for(lambda: len(self.texts(chat)) >= count)

        await asyncio.wait_for(landed(), WAIT_SECONDS)
        return self.texts(chat)


@dataclass
class Bot:
    server: WebhookServer[ExampleRequest]
    core: MemoryCore
    sink: CallbackSink
    url: str
    clock: ManualClock
    waits: list[float]
    http: aiohttp.ClientSession

    def body(self, chat: str, text: str, user: str = "ana") -> bytes:
        return json.dumps({"chat": chat, "user": user, "text": text}).encode()

    def headers(self, body: bytes, *, secret: str = SECRET, age: float = 0) -> dict[str, str]:
        when = self.clock() - timedelta(seconds=age)
        timestamp = str(int(when.timestamp() * 1000))
        return {"X-Timestamp": timestamp, "X-Signature": signature(secret, timestamp, body)}

    async def post(self, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        sent = self.headers(body) if headers is None else headers
        async with self.http.post(self.url, data=body, headers=sent) as response:
            return response.status, await response.json(content_type=None)

    async def ask(self, chat: str, text: str) -> str:
        """Post a signed message and return the reply that lands for its chat."""
        before = len(self.sink.texts(chat))
        assert await self.post(self.body(chat, text)) == (200, {})
        return (await self.sink.wait_for(before + 1, chat))[-1]


def write_config(tmp_path: Path, callback_url: str) -> Path:
    path = tmp_path / "chatmem.toml"
    path.write_text(
        f'[example]\ncallback_url = "{callback_url}"\nmax_body_bytes = 2048\n'
        '[dingtalk]\nmode = "callback"\n',  # the other front ends' tables still load
        encoding="utf-8",
    )
    return path


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    sink = CallbackSink()
    sink_app = web.Application()
    sink_app.router.add_post("/replies", sink.handle)
    clock = ManualClock(datetime.now(UTC))
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    async with TestServer(sink_app, host="127.0.0.1") as sink_server:
        path = write_config(tmp_path, str(sink_server.make_url("/replies")))
        env = with_storage({"EXAMPLE_WEBHOOK_SECRET": SECRET})
        config = load_config(path, env=env, workspace=tmp_path / "ws", schema=ExampleConfig)
        async with MemoryCore.open(config) as core:
            server = example_server(core, config.example, clock, no_wait)
            async with TestServer(server.app(), host="127.0.0.1") as test_server:
                url = str(test_server.make_url(config.example.path))
                async with aiohttp.ClientSession() as http:
                    yield Bot(server, core, sink, url, clock, waits, http)


async def test_a_signed_message_is_remembered_and_answered(bot: Bot) -> None:
    reply = await bot.ask("A", "remember that the door code is 4711")
    assert "door code is 4711" in reply
    memory = await bot.ask("A", "/memory")
    assert memory.startswith("1 memory, best first:") and "4711" in memory
    rows = await message_rows(bot.core, "role = 'user'")
    assert rows[0] == ("group:example:A", "user", "ana", "remember that the door code is 4711")
    assert [body["chat"] for body in bot.sink.received] == ["A", "A"]


async def test_a_bad_signature_is_401_and_nothing_stored(bot: Bot) -> None:
    body = bot.body("A", "remember that this is forged")
    other = bot.body("A", "remember that this is something else")
    cases = {
        "other-secret": bot.headers(body, secret="another-secret"),
        "signed-other-body": bot.headers(other),
        "no-signature": {"X-Timestamp": bot.headers(body)["X-Timestamp"]},
        "no-timestamp": {"X-Signature": bot.headers(body)["X-Signature"]},
        "stale": bot.headers(body, age=301),
        "ahead": bot.headers(body, age=-301),
    }
    for name, headers in cases.items():
        assert await bot.post(body, headers) == BAD_SIGNATURE, name
    await bot.server.drain()
    assert await message_rows(bot.core) == []
    assert bot.sink.attempts == []


async def test_a_replayed_request_is_refused(bot: Bot) -> None:
    body = bot.body("A", "remember that this comes once")
    headers = bot.headers(body)
    assert await bot.post(body, headers) == (200, {})
    await bot.sink.wait_for(1, "A")
    assert await bot.post(body, headers) == BAD_SIGNATURE
    assert len(bot.server.window) == 1
    # Once its timestamp leaves the window the pair is refused as stale, and forgotten.
    bot.clock.advance(timedelta(seconds=301))
    assert await bot.post(body, headers) == BAD_SIGNATURE
    assert await bot.ask("A", "/memory")
    assert len(bot.server.window) == 1
    await bot.server.drain()
    assert len(await message_rows(bot.core, "content = 'remember that this comes once'")) == 1


async def test_a_body_over_the_limit_is_413_and_nothing_stored(bot: Bot) -> None:
    over = bot.body("A", "remember that " + "x" * 2100)
    assert await bot.post(over) == (
        413,
        {"error": "body larger than example.max_body_bytes (2048)"},
    )
    assert await bot.post(b"[" * 100_000) == (
        413,
        {"error": "body larger than example.max_body_bytes (2048)"},
    )
    assert await bot.post(b'{"chat": "A"}') == (
        400,
        {"error": "body needs a chat, a user and a text (strings)"},
    )
    await bot.server.drain()
    assert await message_rows(bot.core) == []


async def test_two_chats_are_isolated(bot: Bot) -> None:
    await bot.ask("A", "remember that the door code is 4711")
    await bot.ask("B", "remember that the wifi password is tulip")
    memory_a = await bot.ask("A", "/memory")
    memory_b = await bot.ask("B", "/memory")
    assert "4711" in memory_a and "tulip" not in memory_a
    assert "tulip" in memory_b and "4711" not in memory_b
    assert bot.sink.texts("A")[0] != bot.sink.texts("B")[0]


async def test_a_failed_reply_is_tried_again_after_the_backoffs_wait(bot: Bot) -> None:
    bot.sink.fail_next = 1
    reply = await bot.ask("A", "remember that the reply came on the second try")
    assert "the reply came on the second try" in reply
    assert len(bot.sink.attempts) == 2
    assert bot.waits == [0.5]  # memory_core.base.retry.Backoff's first wait, not slept


def test_the_examples_settings_are_checked_bound_and_redacted(tmp_path: Path) -> None:
    """Its section is loaded, checked, bound to its variable and kept out of logs by the
    core's loader, which names no front end: the section comes from the caller."""
    path = write_config(tmp_path, "http://127.0.0.1:9/replies")
    config = load_config(path, env={"EXAMPLE_WEBHOOK_SECRET": SECRET}, schema=ExampleConfig)
    assert config.example.max_body_bytes == 2048
    assert SECRET in secret_values(config)
    assert ("EXAMPLE_WEBHOOK_SECRET", "example.secret") in env_bindings(ExampleConfig)
    small = tmp_path / "small.toml"
    small.write_text("[example]\nmax_body_bytes = 10\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'example\.max_body_bytes': must be >= 1024$"):
        load_config(small, env={}, schema=ExampleConfig)
    with pytest.raises(ConfigError, match=r"unknown key 'example'$"):
        load_config(small, env={}, schema=Config)
