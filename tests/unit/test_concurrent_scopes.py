"""Two scopes chatting at once through the fake model: 50 concurrent turns, and no prompt
of one scope ever carries the other scope's memories, notes or history."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from testkit.openai_server import FakeOpenAI, Reply, ToolCall
from tests.conftest import START
from tests.postgres import with_storage
from tests.support import recent_messages

pytestmark = pytest.mark.timeout(60)

ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")

# Same topic words in both scopes, so a leak through recall would have something to match.
SECRETS = {
    ALICE: {
        "memory": "project phoenix budget is 4711 alpacas",
        "low": "project phoenix owner is Marguerite from Lyon",
        "daily": "phoenix standup moved to the aquarium room",
        "history": "my cat Whiskerton hates the phoenix logo",
    },
    BOB: {
        "memory": "project phoenix budget is 9999 llamas",
        "low": "project phoenix owner is Bartholomew from Leeds",
        "daily": "phoenix standup moved to the volcano room",
        "history": "my dog Barkley loves the phoenix logo",
    },
}
MARK = re.compile(r"\[(alice|bob)-\d+\]")


def forbidden(scope: ScopeKey) -> list[str]:
    """What a prompt of `scope` must never contain: everything of the other scope."""
    other = BOB if scope == ALICE else ALICE
    name = other.value.split(":")[1]
    return [*SECRETS[other].values(), f"[{name}-", *_distinct_words(other)]


def _distinct_words(scope: ScopeKey) -> list[str]:
    return {
        ALICE: ["4711", "alpacas", "Marguerite", "aquarium", "Whiskerton"],
        BOB: ["9999", "llamas", "Bartholomew", "volcano", "Barkley"],
    }[scope]


def respond(body: dict[str, Any]) -> Reply | str:
    """Search memory when asked to remember, else just 'ok'."""
    last = body["messages"][-1]
    if body.get("tools") and last["role"] == "user" and "remember" in str(last["content"]):
        return Reply(tool_calls=(ToolCall("memory_search", {"query": "project phoenix budget"}),))
    return "ok"


def scope_of(body: dict[str, Any]) -> ScopeKey:
    users = [m for m in body["messages"] if m["role"] == "user"]
    marks = {m.group(1) for u in users for m in MARK.finditer(str(u["content"]))}
    assert len(marks) == 1, f"a request mixes or lacks scope markers: {marks}"
    return ScopeKey(f"peer:{marks.pop()}")


async def test_fifty_concurrent_turns_never_cross_scopes(tmp_path: Path) -> None:
    started = time.monotonic()
    async with FakeOpenAI() as fake:
        fake.set_responder(respond)
        config = load_config(
            None,
            env=with_storage({"CHATMEM_MODEL": "gpt-fake", "OPENAI_BASE_URL": fake.base_url}),
            workspace=tmp_path / "ws",
        )
        config = config.model_copy(
            update={
                "llm": config.llm.model_copy(update={"max_retries": 0, "timeout_seconds": 10.0})
            }
        )
        clock = ManualClock(START)
        async with MemoryCore.open(config, clock=clock) as core:
            for scope, secret in SECRETS.items():
                name = scope.value.split(":")[1]
                await core.memories.capture(scope, secret["memory"], importance="high")
                await core.memories.capture(scope, secret["low"], importance="low")
                await core.notes.append(scope, secret["daily"])
                await core.conversation.turn(scope, f"{secret['history']} [{name}-0]")

            async def one(scope: ScopeKey, n: int) -> tuple[ScopeKey, str]:
                name = scope.value.split(":")[1]
                verb = "do you remember" if n % 3 == 0 else "tell me about"
                result = await core.conversation.turn(
                    scope, f"{verb} project phoenix budget [{name}-{n}]"
                )
                return scope, result.reply

            jobs = [one(ALICE if i % 2 else BOB, i // 2 + 1) for i in range(50)]
            results = await asyncio.gather(*jobs)
            assert len(results) == 50
            assert all(reply == "ok" for _, reply in results)

            bodies = fake.chat_requests()
            assert len(bodies) >= 52
            seen = {ALICE: 0, BOB: 0}
            for body in bodies:
                scope = scope_of(body)
                seen[scope] += 1
                text = json.dumps(body["messages"], ensure_ascii=False)
                for leak in forbidden(scope):
                    assert leak not in text, f"{scope} prompt carries {leak!r}"
            assert seen[ALICE] >= 26 and seen[BOB] >= 26

            # Each scope's prompts did carry its own memories and tool results.
            for scope in (ALICE, BOB):
                own = [
                    json.dumps(b["messages"], ensure_ascii=False)
                    for b in bodies
                    if scope_of(b) == scope
                ]
                assert any(SECRETS[scope]["memory"] in t for t in own)
                assert any(SECRETS[scope]["history"] in t for t in own)
                assert any('"role": "tool"' in t and _distinct_words(scope)[0] in t for t in own)

            # And each scope's stored history holds only its own turns.
            for scope in (ALICE, BOB):
                name = scope.value.split(":")[1]
                recent = await recent_messages(core, scope, 500)
                users = [m.content for m in recent if m.role == "user"]
                assert len(users) == 26
                assert all(f"[{name}-" in u for u in users)
    assert time.monotonic() - started < 20
