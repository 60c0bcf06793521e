"""The DingTalk robot under test: a real aiohttp callback app on a fresh workspace, replies
into a local sessionWebhook sink, and the callbacks the tests post to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer

from adapters.dingtalk_bot import DingTalkCallbackServer
from memory_core.base.clock import Clock, system_clock
from memory_core.engine import MemoryCore
from testkit.dingtalk import (
    WebhookSink,
    group_message,
    post_callback,
    private_message,
    signed_headers,
)
from tests.functional.conftest import make_config

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
