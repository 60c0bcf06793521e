"""A scripted, in-process fake of the OpenAI Chat Completions HTTP API.

Why a real HTTP server instead of mocking `AsyncOpenAI`: chatmem talks to the model through
the real `openai` client, and most of the bugs we care about (retries, timeouts, malformed
model output, tool-call parsing, concurrency) live on the wire or inside that client. Driving
the genuine client against this server exercises all of that without the network.

Usage::

    async with FakeOpenAI() as fake:
        fake.reply_tool_calls([("memory_search", {"query": "pytest"})])
        fake.reply_text("done")
        async with fake.client(max_retries=0) as client:
            ...  # code under test
        assert fake.last_messages()[-1]["role"] == "tool"

`/v1/embeddings` answers deterministic vectors (`bag_of_words_vector`: texts sharing words
point the same way), or whatever `set_embedding(fn)` says; `fail_embeddings` scripts
errors, and `embedding_requests()` lists what was asked.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import itertools
import json
import math
import re
import struct
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy


@dataclass(frozen=True)
class ToolCall:
    """One function call the fake model asks for.

    `arguments` may be a mapping (JSON-encoded for you) or a raw string, so tests can feed
    the code under test deliberately broken argument JSON.
    """

    name: str
    arguments: Mapping[str, Any] | str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """What the fake answers to one request: text and/or tool calls, or an HTTP error.

    A plain dataclass (not a dict) so scripted queues and responders are type checked.
    `delay` is applied before answering, whatever the answer is.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    error_message: str = "scripted failure from FakeOpenAI"
    retry_after: float | None = None
    delay: float = 0.0
    finish_reason: str | None = None


EMBEDDING_DIM = 64
_WORD = re.compile(r"[^\W\d_]+|\d+")
_HAN = re.compile(r"[\u3400-\u9fff]")


def bag_of_words_vector(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A unit vector of hashed words (latin words lowercased, each Han character a word):
    deterministic across runs and processes, and texts that share words get a positive
    cosine, so a test can reason about which text is nearest. No word, zero vector."""
    vec = [0.0] * dim
    words = [w.lower() for w in _WORD.findall(text) if not _HAN.search(w)]
    words += _HAN.findall(text)
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % dim
        vec[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm else vec


EmbeddingFn = Callable[[str, int], Sequence[float]]
"""(text, dimensions) -> vector: what the embeddings route answers for each input."""

# A responder may answer with a Reply, a bare string (assistant text) or None (default_text).
Responder = Callable[[dict[str, Any]], Reply | str | Awaitable[Reply | str | None] | None]


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server saw it; `headers` is case-insensitive, `body` parsed JSON."""

    path: str
    headers: CIMultiDictProxy[str]
    body: Any
    method: str

    @property
    def bearer(self) -> str | None:
        """The API key the client sent, so tests need not parse the header themselves."""
        auth = self.headers.get("Authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


def _error_body(status: int, message: str) -> dict[str, Any]:
    """Shape errors like OpenAI does so the client builds the right exception and message."""
    kind = {429: "requests"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error"
    )
    code = {401: "invalid_api_key", 404: "not_found", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _tool_call_json(tc: ToolCall, default_id: str) -> dict[str, Any]:
    args = tc.arguments
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return {
        "id": tc.id or default_id,
        "type": "function",
        "function": {"name": tc.name, "arguments": arguments},
    }


def _count_tokens(messages: Any) -> int:
    """A crude whitespace token count: enough for usage fields to be plausible and non-zero."""
    if not isinstance(messages, list):
        return 0
    return sum(len(str(m.get("content") or "").split()) for m in messages if isinstance(m, dict))


class FakeOpenAI:
    """aiohttp server on 127.0.0.1:<random port> answering from a FIFO script.

    Each chat request takes exactly one item off the queue at the moment it is recorded (no
    `await` in between), so concurrent callers get items in arrival order. When the queue is
    empty the responder (if any) decides, else `default_text` is sent.
    """

    def __init__(
        self,
        *,
        model: str = "gpt-fake",
        default_text: str = "ok",
        api_key: str | None = None,
        latency: float = 0.0,
        record: bool = True,
        embedding_dim: int = EMBEDDING_DIM,
    ) -> None:
        """`api_key` set → requests with another bearer get 401. For benchmarks, `latency`
        is added to every answer (0 = instant) and `record=False` keeps memory flat."""
        self.model = model
        self.default_text = default_text
        self.api_key = api_key
        self.latency = latency
        self.record = record
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._responder: Responder | None = None
        self.embedding_dim = embedding_dim
        self._embedding_fn: EmbeddingFn = bag_of_words_vector
        self._embedding_queue: deque[Reply] = deque()
        self._ids = itertools.count(1)
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> FakeOpenAI:
        self._closing = asyncio.Event()  # bound to the running loop, not the constructor's
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a client that timed out must not leave a sleeping handler behind.
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._closing is not None:
            self._closing.set()  # wake scripted delays so shutdown never waits on them
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeOpenAI is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    def client(self, *, api_key: str = "test-key", **kwargs: Any) -> openai.AsyncOpenAI:
        """A real client pointed here that ignores HTTP(S)_PROXY / .netrc (`trust_env=False`)."""
        kwargs.setdefault("http_client", openai.DefaultAsyncHttpxClient(trust_env=False))
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, **kwargs)

    # ----------------------------------------------------------------- scripting
    def push(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def reply_text(self, text: str, *, delay: float = 0.0) -> None:
        self.push(Reply(text=text, delay=delay))

    def reply_json(self, obj: Any, *, delay: float = 0.0) -> None:
        self.push(Reply(text=json.dumps(obj, ensure_ascii=False), delay=delay))

    def reply_raw_content(self, content: str, *, delay: float = 0.0) -> None:
        """Alias of reply_text that reads as intent: fenced JSON, broken JSON, prose..."""
        self.push(Reply(text=content, delay=delay))

    def reply_tool_calls(
        self,
        calls: Iterable[ToolCall | tuple[str, Mapping[str, Any] | str]],
        *,
        text: str | None = None,
    ) -> None:
        tcs = tuple(c if isinstance(c, ToolCall) else ToolCall(c[0], c[1]) for c in calls)
        self.push(Reply(text=text, tool_calls=tcs))

    def fail(
        self,
        status: int = 500,
        *,
        times: int = 1,
        retry_after: float | None = None,
        message: str = "scripted failure from FakeOpenAI",
    ) -> None:
        self.push(*[Reply(status=status, retry_after=retry_after, error_message=message)] * times)

    def delay(self, seconds: float, *, text: str | None = None) -> None:
        """Next call sleeps `seconds` then answers `text` (default_text if None)."""
        self.push(Reply(text=text, delay=seconds))

    def set_responder(self, responder: Responder | None) -> None:
        self._responder = responder

    def set_embedding(self, fn: EmbeddingFn | None) -> None:
        """What each embeddings input becomes; None restores `bag_of_words_vector`."""
        self._embedding_fn = fn or bag_of_words_vector

    def fail_embeddings(
        self,
        status: int = 500,
        *,
        times: int = 1,
        retry_after: float | None = None,
        message: str = "scripted failure from FakeOpenAI",
        delay: float = 0.0,
    ) -> None:
        """The next `times` embeddings requests fail (a status of 200 with a `delay`
        only waits, e.g. to trip a client timeout)."""
        reply = Reply(status=status, retry_after=retry_after, error_message=message, delay=delay)
        self._embedding_queue.extend([reply] * times)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed; assert 0 to prove the code made every call."""
        return len(self._queue)

    def reset(self) -> None:
        self._queue.clear()
        self._embedding_queue.clear()
        self._embedding_fn = bag_of_words_vector
        self.requests.clear()
        self._responder = None

    # ----------------------------------------------------------------- inspection
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def embedding_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/embeddings")]

    def embedded_texts(self) -> list[str]:
        """Every text sent to the embeddings route, in order."""
        texts: list[str] = []
        for body in self.embedding_requests():
            given = body.get("input") if isinstance(body, dict) else None
            texts += [given] if isinstance(given, str) else list(given or [])
        return texts

    def last_messages(self) -> list[dict[str, Any]]:
        bodies = self.chat_requests()
        if not bodies:
            raise AssertionError("no chat completion request was recorded")
        return list(bodies[-1].get("messages", []))

    # ----------------------------------------------------------------- handlers
    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = RecordedRequest(
            request.path, CIMultiDictProxy(CIMultiDict(request.headers)), body, request.method
        )
        if self.record:
            self.requests.append(rec)
        return rec

    def _auth_error(self, rec: RecordedRequest) -> web.Response | None:
        if self.api_key is None or rec.bearer == self.api_key:
            return None
        return web.json_response(_error_body(401, "Incorrect API key provided"), status=401)

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self._closing is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), seconds)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        rec = await self._record(request)
        if (denied := self._auth_error(rec)) is not None:
            return denied
        body = rec.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return web.json_response(_error_body(400, "'messages' is required"), status=400)
        # No await since recording: concurrent requests take script items in arrival order.
        reply: Reply | str | None = self._queue.popleft() if self._queue else None
        if reply is None and self._responder is not None:
            answer = self._responder(body)
            reply = await answer if inspect.isawaitable(answer) else answer
        if not isinstance(reply, Reply):
            reply = Reply(text=reply)
        await self._sleep(self.latency + reply.delay)
        if reply.status >= 400:
            headers = {}
            if reply.retry_after is not None:
                # openai prefers retry-after-ms and treats 0 as "unset" (then backs off
                # 0.5 s, 1 s, ...), so send at least 1 ms to keep retries instant.
                headers["Retry-After"] = str(math.ceil(reply.retry_after))
                headers["retry-after-ms"] = str(max(1, round(reply.retry_after * 1000)))
            error = _error_body(reply.status, reply.error_message)
            return web.json_response(error, status=reply.status, headers=headers)

        n = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        if not reply.tool_calls and reply.text is None:
            message["content"] = self.default_text
        if reply.tool_calls:
            message["tool_calls"] = [
                _tool_call_json(tc, f"call_{n}_{i}") for i, tc in enumerate(reply.tool_calls)
            ]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        prompt, completion = (
            _count_tokens(body["messages"]),
            len((message["content"] or "").split()),
        )
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        head = {
            "id": f"chatcmpl-fake{n}",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
        }
        if body.get("stream"):
            with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, head, message, finish, usage if with_usage else None)
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        return web.json_response(
            {**head, "object": "chat.completion", "choices": [choice], "usage": usage},
            headers={"x-request-id": f"req_fake{n}"},
        )

    @staticmethod
    async def _stream(
        request: web.Request,
        head: dict[str, Any],
        message: dict[str, Any],
        finish: str,
        usage: dict[str, int] | None,
    ) -> web.StreamResponse:
        """SSE like OpenAI: role, content in small pieces, tool calls, finish, usage, [DONE]."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        text: str = message["content"] or ""
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": text[i : i + 8]} for i in range(0, len(text), 8)]
        deltas += [
            {"tool_calls": [{"index": i, **tc}]}
            for i, tc in enumerate(message.get("tool_calls", []))
        ]
        chunks: list[dict[str, Any]] = [
            {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
        ]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if usage is not None:
            chunks.append({"choices": [], "usage": usage})
        for chunk in chunks:
            data = json.dumps({**head, "object": "chat.completion.chunk", **chunk})
            await resp.write(f"data: {data}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _embeddings(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        if (denied := self._auth_error(rec)) is not None:
            return denied
        body = rec.body
        given = body.get("input") if isinstance(body, dict) else None
        texts = [given] if isinstance(given, str) else given
        if (
            not isinstance(body, dict)
            or not isinstance(texts, list)
            or not texts
            or not all(isinstance(t, str) and t for t in texts)
        ):
            # OpenAI refuses an empty list, an empty string and (here) token arrays.
            return web.json_response(_error_body(400, "'input' is invalid"), status=400)
        scripted = self._embedding_queue.popleft() if self._embedding_queue else Reply()
        await self._sleep(self.latency + scripted.delay)
        if scripted.status >= 400:
            headers = {}
            if scripted.retry_after is not None:
                headers["retry-after-ms"] = str(max(1, round(scripted.retry_after * 1000)))
            error = _error_body(scripted.status, scripted.error_message)
            return web.json_response(error, status=scripted.status, headers=headers)
        dim = body.get("dimensions") or self.embedding_dim
        base64_out = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = [float(v) for v in self._embedding_fn(text, int(dim))]
            encoded: Any = vector
            if base64_out:
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(text.split()) for text in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or self.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        if (denied := self._auth_error(rec)) is not None:
            return denied
        model = {"id": self.model, "object": "model", "created": 0, "owned_by": "chatmem-tests"}
        return web.json_response({"object": "list", "data": [model]})

    async def _not_found(self, request: web.Request) -> web.Response:
        """Recorded too, so a test can see which unsupported endpoint the code tried."""
        await self._record(request)
        msg = f"FakeOpenAI does not implement {request.method} {request.path}"
        return web.json_response(_error_body(404, msg), status=404)


async def fake_openai_fixture() -> AsyncIterator[FakeOpenAI]:
    """Body for a pytest-asyncio fixture: `fake_openai = pytest_asyncio.fixture(...)`."""
    async with FakeOpenAI() as fake:
        yield fake
