"""A prompt asked with arguments it does not take: one clear refusal, no traceback.

Over the real `chatmem mcp` command's stdio, its stderr read whole at the end: a client's
mistake is answered, never logged as a failure of the server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_types import INVALID_PARAMS

from tests.functional.mcp_support import HELLO, made, raw_stdio


def prompt_request(request_id: int, arguments: dict[str, str] | None) -> bytes:
    params: dict[str, Any] = {"name": "when_to_search"}
    if arguments is not None:
        params["arguments"] = arguments
    request = {"jsonrpc": "2.0", "id": request_id, "method": "prompts/get", "params": params}
    return json.dumps(request).encode()


async def test_a_prompt_argument_it_does_not_take_is_refused_without_a_traceback(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    await made(workspace)
    async with raw_stdio(workspace) as server:
        assert "result" in await server.answer(json.dumps(HELLO).encode())
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for n, arguments in enumerate(({"topic": "x"}, {"a": "1", "b": "2"}), start=1):
            reply = await server.answer(prompt_request(n, arguments))
            assert reply["id"] == n
            assert reply["error"]["code"] == INVALID_PARAMS
            message = reply["error"]["message"]
            assert message.startswith("prompt when_to_search takes no arguments (given: ")
            assert "\n" not in message
        # Asked as it should be, the prompt is served as before.
        reply = await server.answer(prompt_request(9, None))
        assert "memory_search" in reply["result"]["messages"][0]["content"]["text"]
    assert b"Traceback" not in server.stderr, server.stderr.decode()
    assert b"ERROR" not in server.stderr, server.stderr.decode()
