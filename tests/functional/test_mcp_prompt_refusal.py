"""A prompt asked with arguments it does not take: one clear refusal, no traceback.

Over the real `chatmem mcp` command's stdio, its stderr read whole at the end: a client's
mistake is answered, never logged as a failure of the server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp_types import INVALID_PARAMS

from tests.functional.test_console import clean_env
from tests.functional.test_mcp import CALL_TIMEOUT, made
from tests.postgres import with_storage

HELLO = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


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
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapters.cli",
        "mcp",
        "--workspace",
        str(workspace),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(with_storage()),
        limit=1 << 20,
    )
    assert process.stdin is not None and process.stdout is not None

    async def answer(line: bytes) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(line + b"\n")
        await process.stdin.drain()
        reply = await asyncio.wait_for(process.stdout.readline(), CALL_TIMEOUT)
        assert reply, "the server ended"
        parsed: dict[str, Any] = json.loads(reply)
        return parsed

    try:
        assert "result" in await answer(json.dumps(HELLO).encode())
        process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for n, arguments in enumerate(({"topic": "x"}, {"a": "1", "b": "2"}), start=1):
            reply = await answer(prompt_request(n, arguments))
            assert reply["id"] == n
            assert reply["error"]["code"] == INVALID_PARAMS
            message = reply["error"]["message"]
            assert message.startswith("prompt when_to_search takes no arguments (given: ")
            assert "\n" not in message
        # Asked as it should be, the prompt is served as before.
        reply = await answer(prompt_request(9, None))
        assert "memory_search" in reply["result"]["messages"][0]["content"]["text"]
    finally:
        process.stdin.close()
        rest = (
            await asyncio.wait_for(process.stderr.read(), CALL_TIMEOUT) if process.stderr else b""
        )
        assert await asyncio.wait_for(process.wait(), CALL_TIMEOUT) == 0, rest.decode()
    assert b"Traceback" not in rest, rest.decode()
    assert b"ERROR" not in rest, rest.decode()
