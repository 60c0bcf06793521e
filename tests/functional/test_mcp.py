"""`chatmem mcp` through the official SDK's own client: over stdio (the real command in a
subprocess) and over streamable HTTP on 127.0.0.1, on each storage backend.

Scope isolation is the point of most of these: a client bound to one scope can neither
read nor write another, whatever it passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from adapters.mcp_server import serve_http
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.engine import MemoryCore
from testkit.waiting import until
from tests.functional.conftest import make_config
from tests.functional.test_console import chatmem_executable, clean_env
from tests.postgres import with_storage
from tests.support import another_process_holds

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
        yield f"http://127.0.0.1:{port.result()}{core.config.mcp.path}"
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


# --- stdio ------------------------------------------------------------------------------


async def test_stdio_serves_every_tool_resource_and_prompt(workspace: Path) -> None:
    async with stdio_client(workspace, ALICE) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 40
            assert tool.input_schema.get("additionalProperties") is False
        assert tools["memory_search"].input_schema["required"] == ["query"]

        saved = await ok(
            client,
            "memory_save",
            {"content": "Alice's cat is called Xiaoju", "target": "long-term"},
        )
        assert saved["saved"] == "long-term"
        daily = await ok(client, "memory_save", {"content": "Alice fed Xiaoju at noon"})
        assert daily["saved"] == "daily"

        found = await ok(client, "memory_search", {"query": "cat called", "max_results": 3})
        assert found["results"][0]["text"] == "Alice's cat is called Xiaoju"
        where = found["results"][0]["path"]
        read = await ok(client, "memory_get", {"path": where})
        assert "Xiaoju" in read["text"]

        listed = await ok(client, "memory_list", {})
        assert [entry["id"] for entry in listed["entries"]] == [saved["id"]]
        assert listed["entries"][0]["score"] > 0

        memory = (await client.read_resource("chatmem://memory")).contents[0]
        assert "Alice's cat is called Xiaoju" in getattr(memory, "text", "")
        snapshot = (await client.read_resource("chatmem://snapshot")).contents[0]
        assert "Xiaoju" in getattr(snapshot, "text", "")
        prompt = await client.get_prompt("when_to_search")
        assert "memory_search" in getattr(prompt.messages[0].content, "text", "")

        forgotten = await ok(client, "memory_forget", {"id": saved["id"][:5]})
        assert forgotten["forgotten"] == saved["id"]
        assert (await ok(client, "memory_list", {}))["entries"] == []


async def test_bad_arguments_get_clear_errors(workspace: Path) -> None:
    async with stdio_client(workspace, ALICE) as client:
        assert "query" in await refused(client, "memory_search", {})
        assert "query" in await refused(client, "memory_search", {"query": ""})
        assert "max_results" in await refused(
            client, "memory_search", {"query": "x", "max_results": 500}
        )
        assert "integer" in await refused(
            client, "memory_search", {"query": "x", "max_results": "many"}
        )
        assert "scope" in await refused(client, "memory_search", {"query": "x", "scope": "main"})
        assert "target" in await refused(
            client, "memory_save", {"content": "x", "target": "elsewhere"}
        )
        assert "category must be one of" in await refused(
            client, "memory_save", {"content": "x", "category": "gossip"}
        )
        assert "importance" in await refused(
            client, "memory_save", {"content": "x", "importance": "urgent"}
        )
        assert "no entry" in await refused(client, "memory_forget", {"id": "deadbeef"})
        assert "outside this scope" in await refused(
            client, "memory_get", {"path": "../../../etc/passwd"}
        )
        assert "Unknown tool" in await refused(client, "memory_delete_everything", {})
        # Nothing of the refused calls was written.
        assert (await ok(client, "memory_list", {}))["total"] == 0


async def test_stdio_client_cannot_reach_another_scope(workspace: Path) -> None:
    config = make_config(workspace)
    async with MemoryCore.open(config, create=True) as core:
        bob_entry = await bob_has_a_secret(core)
        bob_session = (
            await core.conversation.turn(BOB, "my locker combination is 4711")
        ).session_id
        bob_file = core.memories.relative_path(BOB)
        bob_dir = bob_file.rsplit("/", 1)[0]
    async with stdio_client(workspace, ALICE) as client:
        assert "4711" not in await everything_visible(client)
        for path in (
            bob_file,
            f"{bob_file}:1",
            f"{bob_dir}/../{bob_file.rsplit('/', 2)[1]}/LONG_TERM.md",
            str(workspace / bob_file),
            f"memory/{bob_file}",
            f"file://{workspace / bob_file}",
            bob_file.replace("/", "%2F"),
            f"sessions/{bob_session}",
            f"sessions/{bob_session}:1",
        ):
            result = await call(client, "memory_get", {"path": path})
            assert result.is_error or "4711" not in text_of(result), path
        assert "no entry" in await refused(client, "memory_forget", {"id": bob_entry})
        assert "scope" in await refused(
            client, "memory_save", {"content": "Alice was here", "scope": BOB.value}
        )
    async with MemoryCore.open(config) as core:
        bob = [entry.content for entry in await core.memories.entries(BOB)]
        assert bob == [BOB_SECRET]
        assert "Alice" not in json.dumps(await core.finder.search(BOB, "Alice was here"))


async def test_two_stdio_servers_on_one_workspace_keep_their_scopes(workspace: Path) -> None:
    """Two agents at once, each with its own `chatmem mcp` process on the same workspace,
    calls in flight together in both."""

    async def agent(scope: ScopeKey) -> list[str]:
        async with stdio_client(workspace, scope) as client:
            await asyncio.gather(
                *(
                    ok(
                        client,
                        "memory_save",
                        {"content": f"{scope.value} remembers {thing}", "target": "long-term"},
                    )
                    for thing in THINGS
                )
            )
            listed = await ok(client, "memory_list", {})
            return [entry["content"] for entry in listed["entries"]]

    alice, bob = await asyncio.gather(agent(ALICE), agent(BOB))
    assert sorted(alice) == sorted(f"{ALICE.value} remembers {thing}" for thing in THINGS)
    assert sorted(bob) == sorted(f"{BOB.value} remembers {thing}" for thing in THINGS)


async def test_stdio_server_ends_cleanly_when_the_client_goes_mid_call(workspace: Path) -> None:
    """The client process dies while a save is in flight: the server sees stdin close,
    ends, and the workspace is whole (the save is there or not, never half)."""
    script = (
        "import asyncio, sys\n"
        "from mcp import Client, StdioServerParameters\n"
        "async def main():\n"
        f"    params = StdioServerParameters(command={chatmem_executable()!r}, args=sys.argv[1:],"
        " env=dict(__import__('os').environ))\n"
        "    async with Client(params) as client:\n"
        "        asyncio.ensure_future(client.call_tool('memory_save', {'content': "
        "'half a thought', 'target': 'long-term'}))\n"
        "        for _ in range(100):  # loop turns: the request goes out meanwhile\n"
        "            await asyncio.sleep(0)\n"
        "        print('calling', flush=True)\n"
        "        await asyncio.Event().wait()  # until killed\n"
        "asyncio.run(main())\n"
    )
    args = ["mcp", "--workspace", str(workspace), "--scope", ALICE.value, "--create"]
    await made(workspace)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        env=clean_env(with_storage()),
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), CALL_TIMEOUT) == b"calling\n"
    process.kill()
    await process.wait()
    # The server notices its stdin closed and exits; nothing of it is left running.
    await until(lambda: not _servers_of(workspace), within=20, pause=0.1, what="the server's exit")
    async with MemoryCore.open(make_config(workspace)) as core:
        assert await core.memories.validate() == []
        assert [e.content for e in await core.memories.entries(ALICE)] in ([], ["half a thought"])
    async with stdio_client(workspace, ALICE) as client:
        await ok(client, "memory_search", {"query": "thought"})


def _servers_of(workspace: Path) -> list[int]:
    """Pids of processes whose command line names `workspace` (Linux /proc)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if str(workspace).encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
    return pids


# --- malformed messages ------------------------------------------------------------------

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
"""A client's `initialize`, as raw JSON-RPC."""


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


def assert_plain(error: dict[str, Any]) -> None:
    """One plain sentence: none of Python's or pydantic's own text."""
    text = json.dumps(error)
    assert not any(word in text for word in INTERNAL), text
    assert error["message"] and "\n" not in error["message"]


async def test_stdio_answers_every_malformed_request(tmp_path: Path) -> None:
    """Over the real command's stdin: each malformed line that carries an id gets its
    JSON-RPC error (the id echoed when it is a valid one, else null), a malformed
    notification gets nothing, and the server goes on serving."""
    workspace = tmp_path / "ws"
    await made(workspace)
    async with raw_stdio(workspace) as server:
        assert "result" in await server.answer(json.dumps(HELLO).encode())
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        # A malformed notification (no id) is not answered: the next answer is the next
        # request's.
        server.send(b'{"jsonrpc":"1.0","method":"notifications/initialized"}')
        for name, (line, request_id, code) in MALFORMED.items():
            reply = await server.answer(line)
            assert reply.get("id") == request_id and "error" in reply, (name, reply)
            assert reply["error"]["code"] == code, (name, reply)
            assert_plain(reply["error"])
        listed = await server.answer(b'{"jsonrpc":"2.0","id":99,"method":"tools/list"}')
        assert listed["id"] == 99 and {t["name"] for t in listed["result"]["tools"]} == TOOLS
    assert b"Traceback" not in server.stderr


# --- HTTP -------------------------------------------------------------------------------


async def test_http_needs_a_known_bearer_token(workspace: Path) -> None:
    config = mcp_config(workspace, clients={ALICE_TOKEN: ALICE.value})
    async with MemoryCore.open(config, create=True) as core, http_server(core, ALICE) as url:
        async with httpx2.AsyncClient() as http:
            for headers in (
                {},
                {"Authorization": "Bearer wrong-token-0123456789"},
                {"Authorization": f"Basic {ALICE_TOKEN}"},
                {"Authorization": f"Bearer {ALICE_TOKEN[:-1]}"},
            ):
                answer = await http.post(url, json={}, headers=headers)
                assert answer.status_code == 401, headers
                assert answer.headers["www-authenticate"].startswith("Bearer")
        async with http_client(url, ALICE_TOKEN) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS


async def test_http_tokens_bind_clients_to_their_scopes(workspace: Path) -> None:
    config = mcp_config(workspace, clients={ALICE_TOKEN: ALICE.value, BOB_TOKEN: BOB.value})
    async with MemoryCore.open(config, create=True) as core:
        bob_entry = await bob_has_a_secret(core)
        async with http_server(core, ScopeKey("main")) as url:
            async with http_client(url, ALICE_TOKEN) as alice:
                await ok(
                    alice,
                    "memory_save",
                    {"content": "Alice likes green tea", "target": "long-term"},
                )
                assert "4711" not in await everything_visible(alice)
                assert "no entry" in await refused(alice, "memory_forget", {"id": bob_entry})
                assert "scope" in await refused(alice, "memory_list", {"scope": BOB.value})
            async with http_client(url, BOB_TOKEN) as bob:
                seen = await everything_visible(bob)
                assert "4711" in seen
                assert "green tea" not in seen
        assert [e.content for e in await core.memories.entries(ALICE)] == ["Alice likes green tea"]
        assert [e.content for e in await core.memories.entries(BOB)] == [BOB_SECRET]
        assert await core.memories.entries(ScopeKey("main")) == []


async def test_concurrent_http_clients_each_stay_in_their_scope(workspace: Path) -> None:
    people = {
        f"person-{n}-token-0123456789": ScopeKey(f"telegram:peer:{100 + n}") for n in range(8)
    }
    config = mcp_config(workspace, clients={t: s.value for t, s in people.items()})
    async with MemoryCore.open(config, create=True) as core, http_server(core, ALICE) as url:

        async def person(token: str, scope: ScopeKey) -> str:
            async with http_client(url, token) as client:
                for n in range(5):
                    await ok(
                        client,
                        "memory_save",
                        {
                            "content": f"{scope.value} remembers {THINGS[n]}",
                            "target": "long-term" if n % 2 else "daily",
                        },
                    )
                return await everything_visible(client) + json.dumps(
                    await ok(
                        client,
                        "memory_search",
                        {"query": "remembers", "max_results": 20},
                    )
                )

        seen = await asyncio.gather(*(person(t, s) for t, s in people.items()))
        for scope, text in zip(people.values(), seen, strict=True):
            assert scope.value in text
            for other in people.values():
                if other != scope:
                    assert f"{other.value} remembers" not in text
            assert len(await core.memories.entries(scope)) == 2


async def test_http_survives_a_client_that_disconnects_mid_call(workspace: Path) -> None:
    """Clients give up on a forget that waits for the scope's write lock (held by another
    process): the server serves others meanwhile, and once the lock is free the entry is
    forgotten whole or not at all."""
    config = mcp_config(workspace, clients={ALICE_TOKEN: ALICE.value, BOB_TOKEN: BOB.value})
    async with MemoryCore.open(config, create=True) as core, http_server(core, ALICE) as url:
        entry, _ = await core.memories.capture(ALICE, "a thought cut short")
        await core.memories.flush(ALICE)
        async with another_process_holds(core, core.workspace.lock_name(ALICE, "memory")):
            answered = []
            for _ in range(3):
                # The client side of an abandoned call may fail as it is torn down.
                with contextlib.suppress(TimeoutError, BaseExceptionGroup):
                    async with asyncio.timeout(0.5), http_client(url, ALICE_TOKEN) as alice:
                        answered.append(await alice.call_tool("memory_forget", {"id": entry.id}))
            assert answered == [], "a forget went through the held lock"
            assert [e.id for e in await core.memories.entries(ALICE)] == [entry.id]
            async with http_client(url, BOB_TOKEN) as bob:
                arguments = {"content": "Bob is still served", "target": "long-term"}
                saved = await ok(bob, "memory_save", arguments)
                assert (await ok(bob, "memory_list", {}))["entries"][0]["id"] == saved["id"]
        async with http_client(url, ALICE_TOKEN) as alice:
            listed = (await ok(alice, "memory_list", {}))["entries"]
            assert [e["id"] for e in listed] in ([], [entry.id])
        assert await core.memories.validate() == []
        kept = [e.id for e in await core.memories.entries(ALICE)] + [
            e.id for e in await core.memories.restorable(ALICE)
        ]
        assert kept == [entry.id]


async def test_without_a_token_http_is_loopback_only(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with MemoryCore.open(mcp_config(workspace), create=True) as core:
        for host in ("0.0.0.0", "127.0.0.2"):
            with pytest.raises(ChatmemError, match="loopback only"):
                async with http_server(core, ALICE, host=host):
                    pass
        with caplog.at_level("INFO", logger="adapters.mcp_server"):
            async with http_server(core, ALICE) as url, http_client(url, None) as client:
                await ok(
                    client, "memory_save", {"content": "open on loopback", "target": "long-term"}
                )
        # The start line is news, not a warning: INFO.
        [start] = [r for r in caplog.records if r.getMessage().startswith("MCP server on")]
        assert start.levelname == "INFO" and "loopback only" in start.getMessage()
        assert [e.content for e in await core.memories.entries(ALICE)] == ["open on loopback"]


async def test_the_command_serves_http_with_the_configured_tokens(
    workspace: Path, tmp_path: Path
) -> None:
    """`chatmem mcp --http 127.0.0.1:0` end to end: tokens from the config file and the
    environment, the port from its log line, stopped by SIGTERM."""
    config_file = tmp_path / "chatmem.toml"
    config_file.write_text(f'[mcp]\nclients = {{ "{BOB_TOKEN}" = "{BOB.value}" }}\n')
    await made(workspace)
    process = await asyncio.create_subprocess_exec(
        chatmem_executable(),
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--config",
        str(config_file),
        "--workspace",
        str(workspace),
        "--scope",
        ALICE.value,
        "--create",
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(with_storage({"CHATMEM_MCP_TOKEN": ALICE_TOKEN})),
    )
    assert process.stderr is not None
    try:
        url = ""
        while not url:
            line = (await asyncio.wait_for(process.stderr.readline(), CALL_TIMEOUT)).decode()
            assert line, "the server ended before it listened"
            assert ALICE_TOKEN not in line and BOB_TOKEN not in line
            if match := re.search(r"(http://127\.0\.0\.1:\d+/mcp) \(2 bearer token", line):
                url = match.group(1)
        async with http_client(url, ALICE_TOKEN) as alice:
            await ok(alice, "memory_save", {"content": "via the command", "target": "long-term"})
        async with http_client(url, BOB_TOKEN) as bob:
            assert (await ok(bob, "memory_list", {}))["entries"] == []
    finally:
        process.terminate()
        rest = await asyncio.wait_for(process.stderr.read(), CALL_TIMEOUT)
        assert await process.wait() == 0, rest.decode()
    assert ALICE_TOKEN.encode() not in rest and BOB_TOKEN.encode() not in rest
    async with MemoryCore.open(make_config(workspace)) as core:
        assert [e.content for e in await core.memories.entries(ALICE)] == ["via the command"]


async def test_http_answers_every_malformed_body_with_a_json_rpc_error(workspace: Path) -> None:
    """The same messages POSTed over streamable HTTP (and a body `null`): each gets 400
    with its JSON-RPC error, never the SDK's pydantic text; nothing reaches the tools."""
    config = mcp_config(workspace)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with MemoryCore.open(config, create=True) as core, http_server(core, ALICE) as url:
        async with httpx2.AsyncClient(headers=headers) as http:
            for name, (body, request_id, code) in MALFORMED.items():
                response = await http.post(url, content=body)
                assert response.status_code == 400, (name, response.text)
                reply = response.json()
                assert reply.get("id") == request_id and "error" in reply, (name, reply)
                assert reply["error"]["code"] == code, (name, reply)
                assert_plain(reply["error"])
        async with http_client(url, None) as client:
            assert (await ok(client, "memory_list", {}))["total"] == 0


async def test_memory_save_tells_an_update_from_a_reinforcement(workspace: Path) -> None:
    """An agent saving a changed phone number learns that it updated the old entry, whose
    text stays readable; the same text again is a reinforcement."""
    old_number = "Alice's new phone number is 555-0142, call her after six"
    new_number = old_number.replace("0142", "0143")
    async with MemoryCore.open(mcp_config(workspace), create=True) as core:
        async with http_server(core, ALICE) as url, http_client(url, None) as client:
            first = await ok(client, "memory_save", {"content": old_number, "target": "long-term"})
            assert first["action"] == "saved"
            second = await ok(client, "memory_save", {"content": new_number, "target": "long-term"})
            assert second["action"] == "updated"
            assert second["replaced"] == first["id"] and second["id"] != first["id"]
            again = await ok(client, "memory_save", {"content": new_number, "target": "long-term"})
            assert (again["action"], again["id"]) == ("reinforced", second["id"])
        scores = {e.content: e.score for e in await core.memories.entries(ALICE)}
        assert scores[new_number] > scores[old_number]
