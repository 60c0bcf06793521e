"""The one property of testkit/openai_server.py checked on its own: it speaks the real
wire format. Every product test reads the fake through chatmem's LLMClient and
OpenAIEmbedder, whose openai clients validate answers leniently, so a field the real API
always sends but the fake left out would pass unnoticed there; the openai client's strict
validation is the reference here. What the fake is scripted to do (replies, tool calls,
failures, delays, a wrong key refused) is checked by the tests that rely on it
(tests/unit/test_llm.py, tests/unit/test_embedding.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testkit.openai_server import EMBEDDING_DIM, FakeOpenAI

pytestmark = pytest.mark.timeout(30)

USER: Any = [{"role": "user", "content": "what do I drink?"}]
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "memory_search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]


async def test_answers_pass_the_openai_clients_strict_validation() -> None:
    async with FakeOpenAI() as fake:
        fake.reply_text("oolong")
        fake.reply_tool_calls([("memory_search", {"query": "tea"})])
        async with fake.client(
            _strict_response_validation=True, max_retries=0, timeout=5.0
        ) as client:
            text = await client.chat.completions.create(model="gpt-fake", messages=USER)
            tool = await client.chat.completions.create(
                model="gpt-fake", messages=USER, tools=TOOLS
            )
            vectors = await client.embeddings.create(
                model="emb", input=["oolong tea"], encoding_format="float"
            )
    assert text.choices[0].message.content == "oolong"
    assert tool.choices[0].finish_reason == "tool_calls"
    [call] = tool.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "memory_search",
        {"query": "tea"},
    )
    assert len(vectors.data[0].embedding) == EMBEDDING_DIM
