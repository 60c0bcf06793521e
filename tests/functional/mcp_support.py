"""What the MCP end-to-end tests share: two clients' scopes and tokens, a stdio client of the
real command, an HTTP server and client, and calls that assert a tool's answer or refusal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from adapters.mcp_server import serve_http
from adapters.settings import AppConfig
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.engine import MemoryCore
from tests.functional.conftest import make_config
from tests.functional.test_console import chatmem_executable, clean_env
from tests.postgres import with_storage

ALICE = ScopeKey("telegram:peer:42")
BOB = ScopeKey("telegram:peer:43")
ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"
BOB_SECRET = "Bob's locker combination is 4711"
TOOLS = {"memory_search", "memory_get", "memory_save", "memory_forget", "memory_list"}
CALL_TIMEOUT = 30.0
THINGS = ("a violin lesson", "the kayak trip", "green tea", "the dentist at nine", "a red bike")


# --- helpers ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def stdio_client(
    workspace: Path, scope: ScopeKey, env: Mapping[str, str] | None = None
) -> AsyncIterator[Client]:
    """The SDK's client on `chatmem mcp --workspace W --scope S`, a real subprocess (on
    a workspace made first: `chatmem mcp` creates none)."""
    await made(workspace)
    params = StdioServerParameters(
        command=chatmem_executable(),
        args=["mcp", "--workspace", str(workspace), "--scope", scope.value, "--create"],
        env=clean_env(with_storage(env)),
        cwd=str(workspace.parent),
    )
    async with Client(params) as client:
        yield client


async def made(workspace: Path) -> None:
    """`workspace` made a workspace, as `chatmem init` does (when it is none yet)."""
    if not MemoryCore.workspace_exists(workspace):
        async with MemoryCore.open(make_config(workspace), create=True) as core:
            await core.memories.touch(MAIN)


@contextlib.asynccontextmanager
async def http_server(
    core: MemoryCore, own: ScopeKey, host: str = "127.0.0.1"
) -> AsyncIterator[str]:
    """`serve_http` in this loop on a free port; the endpoint's URL."""
    stop = asyncio.Event()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_http(core, own, host, 0, stop, port.set_result))
    done, _ = await asyncio.wait({serving, port}, return_when=asyncio.FIRST_COMPLETED)
    if serving in done:
        serving.result()
    try:
        yield f"http://127.0.0.1:{port.result()}{AppConfig.of(core.config).mcp.path}"
    finally:
        stop.set()
        await serving


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def mcp_config(workspace: Path, **mcp: Any) -> Any:
    config = make_config(workspace)
    return config.model_copy(update={"mcp": config.mcp.model_copy(update=mcp)})


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    return await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT)


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await call(client, tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await call(client, tool, arguments)
    assert result.is_error, f"{tool}{arguments} was not refused: {text_of(result)}"
    return text_of(result)


def text_of(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def everything_visible(client: Client) -> str:
    """All a client can see of its scope: searches, the list, the archive, both resources,
    and reads of every file its hits point to."""
    seen: list[str] = []
    for query in ("locker combination", "4711", "Bob", "combination"):
        found = await ok(client, "memory_search", {"query": query, "max_results": 20})
        seen.append(json.dumps(found, ensure_ascii=False))
        for hit in found["results"]:
            seen.append(json.dumps(await ok(client, "memory_get", {"path": hit["path"]})))
    for archived in (False, True):
        seen.append(json.dumps(await ok(client, "memory_list", {"archived": archived})))
    for uri in ("chatmem://memory", "chatmem://snapshot"):
        contents = (await client.read_resource(uri)).contents
        seen.extend(getattr(content, "text", "") for content in contents)
    return "\n".join(seen)


async def bob_has_a_secret(core: MemoryCore) -> str:
    entry, _ = await core.memories.capture(BOB, BOB_SECRET, category="fact", importance="high")
    await core.notes.append(BOB, "Bob hid the spare key under the 4711 flowerpot")
    await core.memories.flush(BOB)
    return entry.id


DEEP = '{"a":' * 3000 + "1" + "}" * 3000


MALFORMED: dict[str, tuple[bytes, Any, int]] = {
    # name: (the line, the id the answer must carry, the JSON-RPC error code)
    "batch": (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', 1, -32600),
    "no jsonrpc": (b'{"id":2,"method":"tools/list"}', 2, -32600),
    "jsonrpc 1.0": (b'{"jsonrpc":"1.0","id":3,"method":"tools/list"}', 3, -32600),
    "object id": (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', None, -32600),
    "float id": (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', None, -32600),
    "string params": (b'{"jsonrpc":"2.0","id":6,"method":"tools/list","params":"x"}', 6, -32602),
    "array params": (b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}', 7, -32602),
    "deep params": (
        b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":' + DEEP.encode() + b"}",
        8,
        -32600,
    ),
    "escaped lone surrogate": (
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"memory_search",'
        b'"arguments":{"query":"\\ud800"}}}',
        9,
        -32602,
    ),
    "raw lone surrogate": (
        b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory_search",'
        b'"arguments":{"query":"\xed\xa0\x80"}}}',
        10,
        -32700,
    ),
    "not JSON": (b'{"jsonrpc":"2.0","id":11,', None, -32700),
    "no method": (b'{"jsonrpc":"2.0","id":12}', 12, -32600),
    "null": (b"null", None, -32600),
}


INTERNAL = ("pydantic", "Traceback", "validation error", "input_value", "errors.pydantic", "Error(")


def assert_plain(error: dict[str, Any]) -> None:
    """One plain sentence: none of Python's or pydantic's own text."""
    text = json.dumps(error)
    assert not any(word in text for word in INTERNAL), text
    assert error["message"] and "\n" not in error["message"]


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


class RawStdio:
    """The real `chatmem mcp` over its stdio, spoken to line by line (for what a
    well-behaved client never sends); its whole stderr once it has exited."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr = b""

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")

    async def answer(self, line: bytes) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.send(line)
        await self.process.stdin.drain()
        reply = await asyncio.wait_for(self.process.stdout.readline(), CALL_TIMEOUT)
        assert reply, "the server ended"
        parsed: dict[str, Any] = json.loads(reply)
        return parsed


@contextlib.asynccontextmanager
async def raw_stdio(workspace: Path) -> AsyncIterator[RawStdio]:
    """`chatmem mcp` on `workspace`; on leaving, its stdin closed and a clean exit
    (0) asserted, with its stderr kept on the value for the test to read."""
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
    server = RawStdio(process)
    try:
        yield server
    finally:
        assert process.stdin is not None and process.stderr is not None
        process.stdin.close()
        server.stderr = await asyncio.wait_for(process.stderr.read(), CALL_TIMEOUT)
        code = await asyncio.wait_for(process.wait(), CALL_TIMEOUT)
        assert code == 0, server.stderr.decode()
