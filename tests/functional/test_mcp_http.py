"""`chatmem mcp` over streamable HTTP on 127.0.0.1, through the official SDK's own client:
bearer tokens bind each client to its scope, and a client that leaves mid-call or sends a
malformed body harms no one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path

import httpx2
import pytest

from memory_core.base.errors import ChatmemError
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from tests.functional.conftest import make_config
from tests.functional.mcp_support import (
    ALICE,
    ALICE_TOKEN,
    BOB,
    BOB_SECRET,
    BOB_TOKEN,
    CALL_TIMEOUT,
    MALFORMED,
    THINGS,
    TOOLS,
    assert_plain,
    bob_has_a_secret,
    everything_visible,
    http_client,
    http_server,
    made,
    mcp_config,
    ok,
    refused,
)
from tests.functional.test_console import chatmem_executable, clean_env
from tests.postgres import with_storage
from tests.support import another_process_holds

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
