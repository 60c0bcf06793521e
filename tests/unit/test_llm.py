"""The OpenAI-compatible client (memory_core.llm.client) driven through the real `openai` client
against the in-process fake server: tool calls, tolerant JSON, retries, timeouts, and the
API key never reaching a log record."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.errors import LLMError
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config, load_config
from memory_core.config.services import LLMSettings
from memory_core.engine import MemoryCore
from memory_core.llm.client import ChatReply, LLMClient, ToolCallRequest, parse_json_tolerant
from testkit.openai_server import FakeOpenAI, ToolCall
from tests.postgres import with_storage

pytestmark = pytest.mark.timeout(60)

API_KEY = "sk-test-123"
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def settings(fake: FakeOpenAI, **overrides: Any) -> LLMSettings:
    base = LLMSettings(
        model="gpt-fake",
        base_url=fake.base_url,
        api_key=API_KEY,
        max_retries=0,
        timeout_seconds=2.0,
    )
    return base.model_copy(update=overrides)


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    llm = LLMClient(settings(fake, max_retries=2))
    try:
        yield llm
    finally:
        await llm.close()


def model_config(fake: FakeOpenAI, tmp_path: Path, **llm: Any) -> Config:
    config = load_config(
        None,
        env=with_storage(
            {
                "CHATMEM_MODEL": "gpt-fake",
                "OPENAI_BASE_URL": fake.base_url,
                "OPENAI_API_KEY": API_KEY,
            }
        ),
        workspace=tmp_path / "ws",
    )
    llm.setdefault("max_retries", 0)
    llm.setdefault("timeout_seconds", 2.0)
    return config.model_copy(update={"llm": config.llm.model_copy(update=llm)})


# --- replies ------------------------------------------------------------------------------


async def test_plain_text_reply(fake: FakeOpenAI, client: LLMClient) -> None:
    fake.reply_text("hi there")
    reply = await client.chat(USER)
    assert reply == ChatReply(
        content="hi there", tool_calls=[], prompt_tokens=1, completion_tokens=2
    )
    [body] = fake.chat_requests()
    assert body["model"] == "gpt-fake"
    assert body["messages"] == USER
    assert "tools" not in body and "tool_choice" not in body


async def test_tool_calls_are_parsed(fake: FakeOpenAI, client: LLMClient) -> None:
    fake.reply_tool_calls(
        [
            ToolCall("memory_search", {"query": "pytest 偏好"}, id="call_a"),
            ToolCall("memory_get", '{"path": "MEMORY.md"', id="call_b"),  # broken JSON kept raw
        ]
    )
    tools = [{"type": "function", "function": {"name": "memory_search", "parameters": {}}}]
    choice = {"type": "function", "function": {"name": "memory_search"}}
    reply = await client.chat(USER, tools=tools, tool_choice=choice)
    assert reply.content is None
    assert reply.tool_calls == [
        ToolCallRequest("call_a", "memory_search", '{"query": "pytest 偏好"}'),
        ToolCallRequest("call_b", "memory_get", '{"path": "MEMORY.md"'),
    ]
    body = fake.chat_requests()[0]
    assert body["tools"] == tools
    assert body["tool_choice"] == choice
    # The assistant message to send back carries the calls in OpenAI's shape.
    message = reply.as_message()
    assert message["role"] == "assistant"
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["memory_search", "memory_get"]
    assert message["tool_calls"][0] == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "memory_search", "arguments": '{"query": "pytest 偏好"}'},
    }


async def test_tool_choice_dropped_without_tools(fake: FakeOpenAI, client: LLMClient) -> None:
    await client.chat(USER, tool_choice="auto")
    assert "tool_choice" not in fake.chat_requests()[0]


async def test_unconfigured_client_refuses(fake: FakeOpenAI) -> None:
    llm = LLMClient(settings(fake, model=""))
    assert not llm.configured
    with pytest.raises(LLMError, match="no model"):
        await llm.chat(USER)
    assert fake.requests == []


# --- tolerant JSON --------------------------------------------------------------------------

ITEMS = [{"content": "用户偏好 pytest", "category": "preference", "importance": "medium"}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[{"content": "用户偏好 pytest", "category": "preference", "importance": "medium"}]',
            ITEMS,
        ),
        (
            '```json\n[{"content": "用户偏好 pytest", "category": "preference",'
            ' "importance": "medium"}]\n```',
            ITEMS,
        ),
        ('```\n{"a": 1}\n```', {"a": 1}),
        (
            'Here is the JSON:\n[{"content": "用户偏好 pytest", "category": "preference",'
            ' "importance": "medium"}]\nHope this helps!',
            ITEMS,
        ),
        ('[{"a": 1}] and then some prose [oops', [{"a": 1}]),
        ("[]", []),
        ('[{"content": "unterminated', None),
        ("I could not find anything worth remembering.", None),
        ("", None),
        ("   \n ", None),
        ("{broken: json}", None),
    ],
)
def test_parse_json_tolerant(text: str, expected: Any) -> None:
    assert parse_json_tolerant(text) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[{"content": "x"}]', [{"content": "x"}]),
        ('```json\n[{"content": "x"}]\n```', [{"content": "x"}]),
        ('Sure! [{"content": "x"}] That is all.', [{"content": "x"}]),
    ],
)
async def test_complete_json_good_fenced_and_prose(
    fake: FakeOpenAI,
    client: LLMClient,
    content: str,
    expected: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.reply_raw_content(content)
    with caplog.at_level(logging.WARNING, logger="memory_core.llm.client"):
        assert await client.complete_json(USER) == expected
    assert not [r for r in caplog.records if r.name == "memory_core.llm.client"]
    assert fake.chat_requests()[0]["temperature"] == 0.0


@pytest.mark.parametrize("content", ['[{"content": "broken"', "no json here at all", ""])
async def test_complete_json_broken_warns_and_returns_none(
    fake: FakeOpenAI, client: LLMClient, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake.reply_raw_content(content)
    with caplog.at_level(logging.WARNING, logger="memory_core.llm.client"):
        assert await client.complete_json(USER) is None
    warnings = [r for r in caplog.records if r.name == "memory_core.llm.client"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "not usable JSON" in warnings[0].getMessage()


# --- retries and failures ------------------------------------------------------------------
# Which statuses are retried, and after how long, is the openai client's own (see
# memory_core/llm/client.py): checked here is that chatmem hands it `max_retries` and turns
# whatever still fails into one LLMError.


async def test_server_error_with_retries_exhausted_raises(
    fake: FakeOpenAI, client: LLMClient
) -> None:
    fake.fail(500, times=3, retry_after=0, message="upstream exploded")
    with pytest.raises(LLMError, match="HTTP 500") as info:
        await client.chat(USER)
    assert "upstream exploded" in str(info.value)
    assert len(fake.chat_requests()) == 3  # first try + max_retries=2


async def test_complete_json_raises_on_transport_failure(
    fake: FakeOpenAI, client: LLMClient
) -> None:
    """Unusable output is None; an unreachable model is an LLMError the caller retries."""
    fake.fail(503, times=3, retry_after=0)
    with pytest.raises(LLMError):
        await client.complete_json(USER)


async def test_timeout_raises_quickly(fake: FakeOpenAI) -> None:
    llm = LLMClient(settings(fake, max_retries=0, timeout_seconds=0.3))
    fake.delay(10.0, text="too late")
    started = time.monotonic()
    try:
        with pytest.raises(LLMError, match="timed out"):
            await llm.chat(USER)
    finally:
        await llm.close()
    assert time.monotonic() - started < 3.0
    assert len(fake.chat_requests()) == 1


async def test_unreachable_server_raises_llm_error(fake: FakeOpenAI) -> None:
    url = fake.base_url
    await fake.stop()
    llm = LLMClient(settings(fake, base_url=url, max_retries=0))
    try:
        with pytest.raises(LLMError, match="could not be reached"):
            await llm.chat(USER)
    finally:
        await llm.close()


# --- the API key -----------------------------------------------------------------------------


def test_key_not_in_config_repr(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = model_config(fake, tmp_path)
    assert config.llm.api_key == API_KEY
    for text in (repr(config), str(config), repr(config.llm), str(config.llm)):
        assert API_KEY not in text
    assert "gpt-fake" in repr(config.llm)


async def test_key_sent_as_bearer_but_never_logged(
    fake: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole session at DEBUG: turns with tools, a failing turn, a failed and a good
    extraction, a flush; no log record (message, args or traceback) shows the key."""
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "memory_core"):
        caplog.set_level(logging.DEBUG, logger=name)
    config = model_config(fake, tmp_path, max_retries=1, context_tokens=200)
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    scope = ScopeKey("peer:alice")
    async with MemoryCore.open(config, clock=clock) as core:
        fake.reply_tool_calls(
            [("memory_save", {"content": "用户用 pytest", "target": "long-term"})]
        )
        fake.reply_text("好的")
        await core.conversation.turn(scope, "我喜欢用 pytest 写测试")
        fake.fail(500, times=2, retry_after=0, message=f"echo of key {API_KEY[:3]}")
        failed = await core.conversation.turn(scope, "还记得我用什么测试框架吗？")
        assert "抱歉" in failed.reply
        fake.fail(401, times=1, message="Incorrect API key provided")
        await core.conversation.turn(MAIN, "hello there")
        for i in range(4):
            await core.conversation.turn(scope, f"第 {i} 条很长的消息，" + "内容" * 30)
        fake.fail(500, times=2, retry_after=0)
        assert (await core.conversation.new_session(scope)).retry_later
        fake.reply_json([{"content": "用户用 pytest", "category": "preference"}])
        await core.conversation.new_session(MAIN)
        await core.conversation.stop()
    assert fake.chat_requests(), "the session made no model calls"
    assert {r.bearer for r in fake.requests} == {API_KEY}
    assert any(r.name.startswith("openai") and r.levelno == logging.DEBUG for r in caplog.records)
    assert any(r.levelno >= logging.WARNING for r in caplog.records)
    assert API_KEY not in caplog.text
    for record in caplog.records:
        assert API_KEY not in record.getMessage()
        assert API_KEY not in repr(record.args)
        assert API_KEY not in (record.exc_text or "")
