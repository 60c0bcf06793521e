"""What the chat tests share: the fake model server, a core whose model it is, and helpers
that read the requests the model received."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config, load_config
from memory_core.conversation.tools import TOOL_SCHEMAS
from memory_core.engine import MemoryCore
from memory_core.storage.sessions import StoredMessage
from testkit.openai_server import FakeOpenAI
from tests.postgres import with_storage


@pytest.fixture(name="fake")
async def fake_fixture() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def model_config(fake: FakeOpenAI, workspace: Path, **llm: Any) -> Config:
    config = load_config(
        None,
        env=with_storage(
            {
                "CHATMEM_MODEL": "gpt-fake",
                "OPENAI_BASE_URL": fake.base_url,
                "OPENAI_API_KEY": "sk-test-123",
            }
        ),
        workspace=workspace,
    )
    llm.setdefault("max_retries", 0)
    llm.setdefault("timeout_seconds", 2.0)
    return config.model_copy(update={"llm": config.llm.model_copy(update=llm)})


@pytest.fixture(name="mcore")
async def mcore_fixture(
    fake: FakeOpenAI, workspace: Path, clock: ManualClock
) -> AsyncIterator[MemoryCore]:
    """A core whose model is the fake server."""
    async with MemoryCore.open(model_config(fake, workspace), clock=clock) as opened:
        yield opened


def turn_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    """Requests of chat turns (they offer all three memory tools)."""
    return [b for b in fake.chat_requests() if b.get("tools") == TOOL_SCHEMAS]


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def history_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The history window: everything between the system prompt and the new user message."""
    return list(body["messages"][1:-1])


def everything(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


def distinct(i: int, prefix: str = "note") -> str:
    """Texts no similarity rule confuses with one another."""
    return f"{prefix} {hashlib.sha256(str(i).encode()).hexdigest()[:20]}"


async def session_messages(core: MemoryCore, session_id: str) -> list[StoredMessage]:
    return await core.history.session_messages(session_id, include_compacted=True)


def numbered_replies(fake: FakeOpenAI) -> None:
    counter = iter(range(1, 10_000))
    fake.set_responder(lambda body: f"reply {next(counter)}")


ALICE = ScopeKey("peer:alice")


BOB = ScopeKey("peer:bob")


FORCED = {"type": "function", "function": {"name": "memory_search"}}
