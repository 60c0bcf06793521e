"""`chatmem mcp` through the official SDK's own client: over stdio (the real command in a
subprocess), on each storage backend; streamable HTTP is test_mcp_http.py's.

Scope isolation is the point of most of these: a client bound to one scope can neither
read nor write another, whatever it passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from testkit.waiting import until
from tests.functional.conftest import make_config
from tests.functional.mcp_support import (
    ALICE,
    BOB,
    BOB_SECRET,
    CALL_TIMEOUT,
    HELLO,
    MALFORMED,
    THINGS,
    TOOLS,
    assert_plain,
    bob_has_a_secret,
    call,
    everything_visible,
    made,
    ok,
    raw_stdio,
    refused,
    stdio_client,
    text_of,
)
from tests.functional.test_console import chatmem_executable, clean_env
from tests.postgres import with_storage

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


"""A client's `initialize`, as raw JSON-RPC."""


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
