"""Tests for testkit/openai_server.py, driven only through the real ``openai`` client.

The point of the fake is that the genuine client accepts what it serves (strict response
validation is on) and that its scripting/recording behaves as other tests assume.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from testkit.openai_server import (
    EMBEDDING_DIM,
    FakeOpenAI,
    Reply,
    ToolCall,
    bag_of_words_vector,
)

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "what do I use for tests?"}]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def make_client(fake: FakeOpenAI, **kwargs: Any) -> openai.AsyncOpenAI:
    """Strict validation: a response the real API would never send must fail here too."""
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5.0)
    return fake.client(_strict_response_validation=True, **kwargs)


async def chat(client: openai.AsyncOpenAI, messages: Any = USER, **kwargs: Any) -> Any:
    return await client.chat.completions.create(model="gpt-fake", messages=messages, **kwargs)


async def test_plain_text_reply_and_default(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dead proxy in the environment must be ignored by fake.client() (trust_env=False).
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    fake.reply_text("hello")
    async with make_client(fake) as client:
        first = await chat(client)
        second = await chat(client)
    assert first.object == "chat.completion"
    assert first.choices[0].message.content == "hello"
    assert first.choices[0].finish_reason == "stop"
    assert first.choices[0].message.tool_calls is None
    assert first.usage is not None and first.usage.completion_tokens == 1
    assert second.choices[0].message.content == "ok"  # empty queue → default_text
    assert fake.last_messages() == USER
    assert fake.requests[0].method == "POST"
    assert fake.requests[0].path == "/v1/chat/completions"


async def test_authorization_header_carries_key(fake: FakeOpenAI) -> None:
    async with make_client(fake, api_key="sk-secret") as client:
        await chat(client)
    assert fake.requests[0].headers["authorization"] == "Bearer sk-secret"
    assert fake.requests[0].bearer == "sk-secret"


async def test_wrong_key_is_rejected_when_fake_checks_keys() -> None:
    async with FakeOpenAI(api_key="right") as fake:
        fake.reply_text("kept for the next valid call")
        async with make_client(fake, api_key="wrong") as client:
            with pytest.raises(openai.AuthenticationError):
                await chat(client)
        assert fake.pending == 1  # rejected calls do not consume the script


async def test_tool_call_round_trip(fake: FakeOpenAI) -> None:
    fake.reply_tool_calls([("memory_search", {"query": "pytest"})])
    fake.reply_text("You use pytest.")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "memory_search",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            },
        }
    ]
    async with make_client(fake) as client:
        first = await chat(client, tools=tools)
        msg = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        assert msg.tool_calls is not None
        call = msg.tool_calls[0]
        assert call.type == "function"
        assert call.function.name == "memory_search"
        assert json.loads(call.function.arguments) == {"query": "pytest"}
        follow_up = [
            *USER,
            msg.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "[]"},
        ]
        second = await chat(client, messages=follow_up, tools=tools)
    assert second.choices[0].message.content == "You use pytest."
    assert fake.chat_requests()[0]["tools"][0]["function"]["name"] == "memory_search"
    assert fake.last_messages()[-1] == {"role": "tool", "tool_call_id": call.id, "content": "[]"}


async def test_json_raw_and_broken_tool_arguments(fake: FakeOpenAI) -> None:
    fake.reply_json([{"fact": "likes tea"}])
    fake.reply_raw_content('```json\n[{"fact": \n```')
    fake.push(Reply(tool_calls=(ToolCall("save", "{not json", id="call_x"),)))
    async with make_client(fake) as client:
        parsed = await chat(client)
        fenced = await chat(client)
        broken = await chat(client)
    assert json.loads(parsed.choices[0].message.content or "") == [{"fact": "likes tea"}]
    assert fenced.choices[0].message.content == '```json\n[{"fact": \n```'
    tool_calls = broken.choices[0].message.tool_calls
    assert tool_calls is not None and tool_calls[0].id == "call_x"
    assert tool_calls[0].function.arguments == "{not json"


async def test_429_twice_then_success_uses_client_retries(fake: FakeOpenAI) -> None:
    fake.fail(status=429, times=2, retry_after=0)
    fake.reply_text("finally")
    started = time.monotonic()
    async with make_client(fake, max_retries=3) as client:
        result = await chat(client)
    assert result.choices[0].message.content == "finally"
    assert len(fake.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1", "2"]
    # Without retry-after-ms the client would back off >= 0.375 s + 0.75 s (jittered).
    assert time.monotonic() - started < 1.0


async def test_500_without_retries_raises(fake: FakeOpenAI) -> None:
    fake.fail(status=500, message="boom")
    async with make_client(fake, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as info:
            await chat(client)
    assert info.value.status_code == 500
    assert "boom" in info.value.message
    assert len(fake.requests) == 1


async def test_delay_beyond_client_timeout_raises_timeout(fake: FakeOpenAI) -> None:
    fake.delay(5.0)
    started = time.monotonic()
    async with make_client(fake, timeout=0.2, max_retries=0) as client:
        with pytest.raises(openai.APITimeoutError):
            await chat(client)
    await fake.stop()  # the abandoned 5 s sleep must not hold shutdown
    assert time.monotonic() - started < 2.0


async def test_responder_sees_messages_sync_and_async(fake: FakeOpenAI) -> None:
    seen: list[Any] = []

    def echo(body: dict[str, Any]) -> str:
        seen.append(body["messages"])
        return f"echo: {body['messages'][-1]['content']}"

    async def tool_if_asked(body: dict[str, Any]) -> Reply | None:
        await asyncio.sleep(0)
        if "search" in body["messages"][-1]["content"]:
            return Reply(tool_calls=(ToolCall("memory_search", {"query": "x"}),))
        return None

    async with make_client(fake) as client:
        fake.set_responder(echo)
        fake.reply_text("scripted wins")
        assert (await chat(client)).choices[0].message.content == "scripted wins"
        assert (await chat(client)).choices[0].message.content == f"echo: {USER[0]['content']}"
        fake.set_responder(tool_if_asked)
        searched = await chat(client, messages=[{"role": "user", "content": "search it"}])
        plain = await chat(client)
    assert seen == [USER]
    assert searched.choices[0].message.tool_calls is not None
    assert plain.choices[0].message.content == "ok"


async def test_100_concurrent_calls_each_answered_once_in_arrival_order(fake: FakeOpenAI) -> None:
    for i in range(100):
        fake.reply_text(f"r{i}")
    async with make_client(fake) as client:
        results = await asyncio.gather(
            *(chat(client, messages=[{"role": "user", "content": f"q{i}"}]) for i in range(100))
        )
    answers = {f"q{i}": r.choices[0].message.content for i, r in enumerate(results)}
    assert sorted(answers.values()) == sorted(f"r{i}" for i in range(100))
    assert fake.pending == 0
    assert len(fake.requests) == 100
    arrival = [r.body["messages"][0]["content"] for r in fake.requests]
    assert [answers[q] for q in arrival] == [f"r{k}" for k in range(100)]


async def test_streaming_text_tool_calls_and_usage(fake: FakeOpenAI) -> None:
    fake.reply_text("a fairly long streamed answer")
    fake.reply_tool_calls([("memory_search", {"query": "tea"})])
    async with make_client(fake) as client:
        stream = await chat(client, stream=True, stream_options={"include_usage": True})
        parts, usage = [], None
        async for chunk in stream:
            parts += [c.delta.content or "" for c in chunk.choices]
            usage = chunk.usage or usage
        tool_stream = await chat(client, stream=True)
        calls = [
            tc
            async for chunk in tool_stream
            for c in chunk.choices
            for tc in c.delta.tool_calls or []
        ]
    assert "".join(parts) == "a fairly long streamed answer"
    assert usage is not None and usage.completion_tokens == 5
    assert calls[0].function is not None and calls[0].function.name == "memory_search"
    assert json.loads(calls[0].function.arguments or "") == {"query": "tea"}


async def test_models_list_and_unknown_endpoint(fake: FakeOpenAI) -> None:
    async with make_client(fake) as client:
        models = await client.models.list()
        with pytest.raises(openai.NotFoundError):
            await client.completions.create(model="x", prompt="hi")
    assert [m.id for m in models.data] == ["gpt-fake"]
    assert [r.path for r in fake.requests] == ["/v1/models", "/v1/completions"]
    assert fake.requests[1].body["prompt"] == "hi"


def cosine(a: Any, b: Any) -> float:
    return float(sum(x * y for x, y in zip(a, b, strict=True)))


async def test_embeddings_are_deterministic_unit_vectors_that_share_words(fake: FakeOpenAI) -> None:
    texts = ["I like oolong tea", "oolong tea in the morning", "我喜欢乌龙茶", "乌龙茶很好喝"]
    async with make_client(fake) as client:
        first = await client.embeddings.create(model="emb", input=texts, encoding_format="float")
        shorter = await client.embeddings.create(
            model="emb", input=texts[:1], dimensions=16, encoding_format="float"
        )
    # Unasked, the client wants base64 (which strict validation cannot check: the schema
    # says floats, so the real API would fail it too) and decodes it to the same floats.
    async with fake.client(max_retries=0) as loose:
        again = await loose.embeddings.create(model="emb", input=texts[0])
    vectors = [item.embedding for item in first.data]
    assert [item.index for item in first.data] == [0, 1, 2, 3]
    assert all(len(v) == EMBEDDING_DIM for v in vectors)
    assert all(abs(cosine(v, v) - 1.0) < 1e-6 for v in vectors)
    assert cosine(vectors[0], vectors[1]) > 0.3  # "oolong", "tea"
    assert cosine(vectors[2], vectors[3]) > 0.3  # 乌, 龙, 茶
    assert again.data[0].embedding == pytest.approx(vectors[0])
    assert fake.embedding_requests()[2].get("encoding_format") == "base64"
    assert len(shorter.data[0].embedding) == 16
    assert shorter.data[0].embedding == pytest.approx(bag_of_words_vector(texts[0], 16), abs=1e-6)
    assert first.model == "emb" and first.usage.prompt_tokens > 0
    assert fake.embedded_texts() == [*texts, texts[0], texts[0]]


async def test_embeddings_scripted_failures_custom_vectors_and_bad_input(fake: FakeOpenAI) -> None:
    fake.fail_embeddings(status=503, message="overloaded")
    fake.fail_embeddings(status=429, retry_after=0)
    fake.set_embedding(lambda text, dim: [1.0] + [0.0] * (dim - 1))
    async with make_client(fake) as client:
        with pytest.raises(openai.InternalServerError, match="overloaded"):
            await client.embeddings.create(model="emb", input=["a"])
        async with make_client(fake, max_retries=1) as retrying:
            custom = await retrying.embeddings.create(
                model="emb", input=["a"], encoding_format="float"
            )
        with pytest.raises(openai.BadRequestError):
            await client.embeddings.create(model="emb", input=[""], encoding_format="float")
    assert custom.data[0].embedding[:2] == [1.0, 0.0]
    assert len(fake.embedding_requests()) == 4  # 503, 429, its retry, the bad input
    fake.reset()
    assert fake.embedding_requests() == []
