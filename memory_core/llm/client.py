"""A thin layer over `openai.AsyncOpenAI` that any OpenAI-compatible server can answer.

Retries of rate limits and 5xx are the openai client's own (with backoff, honouring
Retry-After); this layer turns every failure into one `LLMError`, parses JSON output
tolerantly and never logs the key.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory_core.base.errors import LLMError
from memory_core.base.meter import NO_METER, Meter
from memory_core.config.services import LLMSettings

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatReply:
    content: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def as_message(self) -> Message:
        """The assistant message to append to the conversation for the next round."""
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


class LLMClient:
    def __init__(
        self,
        settings: LLMSettings,
        *,
        http_client: openai.DefaultAsyncHttpxClient | None = None,
        meter: Meter = NO_METER,
    ) -> None:
        self.settings = settings
        self.meter = meter
        """Times each call (its owner may set it later: a core given a client)."""
        self._client: openai.AsyncOpenAI | None = None
        self._http_client = http_client

    @property
    def configured(self) -> bool:
        """Offline mode is simply 'no model named'."""
        return bool(self.settings.model)

    def _get(self) -> openai.AsyncOpenAI:
        # Imported on first use: the openai package takes most of a second to import,
        # which every `chatmem` command without a model (status, search, …) would pay.
        import openai

        if self._client is None:
            self._client = openai.AsyncOpenAI(
                base_url=self.settings.base_url or None,
                # Local servers (Ollama, vLLM) accept any key; the client insists on one.
                api_key=self.settings.api_key or "not-needed",
                timeout=self.settings.timeout_seconds,
                max_retries=self.settings.max_retries,
                http_client=self._http_client,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        if not self.configured:
            raise LLMError("no model is configured (set llm.model or CHATMEM_MODEL)")
        import openai

        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": list(messages),
            "temperature": self.settings.temperature if temperature is None else temperature,
        }
        if tools:
            kwargs["tools"] = list(tools)
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        try:
            with self.meter.timed(self.meter.llm_call):
                response = await self._get().chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise LLMError(f"the model timed out after {self.settings.timeout_seconds:g}s") from exc
        except openai.APIStatusError as exc:
            raise LLMError(
                f"the model answered HTTP {exc.status_code}: {_short(exc.message)}"
            ) from exc
        except openai.APIError as exc:
            raise LLMError(f"the model could not be reached: {_short(str(exc))}") from exc
        if not response.choices:
            raise LLMError("the model returned no choices")
        message = response.choices[0].message
        calls = [
            ToolCallRequest(id=c.id, name=c.function.name, arguments=c.function.arguments or "{}")
            for c in (message.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        usage = response.usage
        return ChatReply(
            content=message.content,
            tool_calls=calls,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
        )

    async def complete_json(self, messages: Sequence[Message]) -> Any:
        """Ask for JSON; whatever comes back is parsed tolerantly (None when unusable)."""
        reply = await self.chat(messages, temperature=0.0)
        parsed = parse_json_tolerant(reply.content or "")
        if parsed is None:
            log.warning(
                "model output was not usable JSON (%d chars); ignoring it", len(reply.content or "")
            )
        return parsed


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json_tolerant(text: str) -> Any:
    """JSON from model output: plain, fenced in ``` blocks, or followed/preceded by prose.

    Returns None when nothing parses: callers treat that as an empty result, not a crash.
    """
    stripped = text.strip()
    if not stripped:
        return None
    for candidate in (stripped, *(m.group(1).strip() for m in _FENCE.finditer(stripped))):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for index, ch in enumerate(stripped):
        if ch in "[{":
            try:
                value, _ = decoder.raw_decode(stripped[index:])
            except json.JSONDecodeError:
                continue
            return value
    return None
