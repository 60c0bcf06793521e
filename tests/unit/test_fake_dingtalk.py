"""The one property of testkit/dingtalk.py checked on its own: `post_raw` sends exactly
the bytes it is given, with a Content-Length or chunked. Everything else the fakes do is
relied on, and so checked, by tests/functional/test_dingtalk.py (its signatures are
accepted by the robot, whose own check is pinned to DingTalk's published algorithm there;
the sink keeps conversations apart, fails and redirects on demand)."""

from __future__ import annotations

import pytest
from aiohttp import web

from testkit.dingtalk import post_raw


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


async def test_post_raw_sends_exact_bytes_with_or_without_a_length() -> None:
    """The robot refuses an oversize body on two paths: up front by its Content-Length, or
    while reading a chunked one. test_body_over_max_body_bytes_is_413 posts both ways,
    and nothing in it would notice if `post_raw` sent a length both times."""
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
