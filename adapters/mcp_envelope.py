"""Every MCP message checked before the SDK sees it, so each malformed request is answered.

The SDK drops a stdio line it cannot validate without a word (the client waits forever)
and answers an HTTP body it cannot validate with pydantic's error text. In front of both
transports, `check` reads one message the way the protocol defines it (one UTF-8 JSON
object, `"jsonrpc": "2.0"`, an integer or string id, object params) and, for anything
else, makes the JSON-RPC error the sender gets: -32700 when it is not JSON, -32600 when it
is no valid request, -32602 when its params are not acceptable. The error names what is
wrong in one plain sentence, never Python's or pydantic's text. A malformed message
without an id is a notification and gets no answer, as JSON-RPC wants.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)

MAX_DEPTH = 64
"""Nesting a message may have. MCP's own messages need a handful of levels; the SDK's
parser gives up somewhere in the hundreds, and Python's in the thousands."""

RequestId = int | str
NO_BATCHES = "batches are not supported: send each message alone"


@dataclass(frozen=True)
class Refused:
    """A message not passed on; `reply` is None when it had no id (a notification)."""

    reply: JSONRPCError | None


def check(raw: bytes | str) -> Refused | None:
    """None when `raw` is one message the SDK can take; else what to answer."""
    text = _decoded(raw)
    if text is None:
        return _refuse(_id_of(_lenient(raw)), PARSE_ERROR, "the message is not valid UTF-8")
    try:
        message = json.loads(text)
    except RecursionError:
        return _refuse(_top_level_id(text), INVALID_REQUEST, _too_deep())
    except ValueError:
        return _refuse(None, PARSE_ERROR, "the message is not valid JSON")
    if isinstance(message, list):
        return _refuse_batch(message)
    if not isinstance(message, dict):
        return _refuse(None, INVALID_REQUEST, "a message must be a JSON object")
    return _check_object(message)


def _check_object(message: dict[str, Any]) -> Refused | None:
    has_id = "id" in message
    request_id = message.get("id")
    if has_id and not _valid_id(request_id):
        return _refuse(None, INVALID_REQUEST, "the id must be a string or an integer")
    answer_to = request_id if has_id else None

    def refused(code: int, text: str) -> Refused:
        return Refused(_error(answer_to, code, text) if has_id else None)

    if message.get("jsonrpc") != "2.0":
        return refused(INVALID_REQUEST, 'the message must say "jsonrpc": "2.0"')
    if "method" in message and not isinstance(message["method"], str):
        return refused(INVALID_REQUEST, "the method must be a string")
    if "params" in message and not isinstance(message["params"], dict):
        return refused(INVALID_PARAMS, "params must be a JSON object")
    if _depth(message) > MAX_DEPTH:
        return refused(INVALID_REQUEST, _too_deep())
    if not _encodable(message):
        code = INVALID_PARAMS if _encodable(_without_params(message)) else INVALID_REQUEST
        return refused(code, "the message holds text that is not valid Unicode (a lone surrogate)")
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValueError:
        return refused(INVALID_REQUEST, "not a JSON-RPC request, notification or response")
    return None


def _refuse_batch(batch: list[Any]) -> Refused:
    """MCP has no batches (JSON-RPC's arrays): the first request in one with an id gets
    the error; the others would need a line each, and one answer tells the client."""
    for item in batch:
        if isinstance(item, dict) and _valid_id(item.get("id")):
            return _refuse(item["id"], INVALID_REQUEST, NO_BATCHES)
    return _refuse(None, INVALID_REQUEST, NO_BATCHES)


def batch_ids(raw: bytes | str) -> list[RequestId]:
    """The ids of every request of a batch, each owed an answer (empty for anything else)."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    if not isinstance(message, list):
        return []
    return [item["id"] for item in message if isinstance(item, dict) and _valid_id(item.get("id"))]


def refusals_of(raw: bytes | str) -> Iterator[JSONRPCError]:
    """Every error `raw` is owed: one per request of a batch, else at most one."""
    refused = check(raw)
    if refused is None:
        return
    ids = batch_ids(raw)
    if len(ids) > 1:
        for request_id in ids:
            yield _error(request_id, INVALID_REQUEST, NO_BATCHES)
    elif refused.reply is not None:
        yield refused.reply


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _error(request_id: RequestId | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _refuse(request_id: RequestId | None, code: int, message: str) -> Refused:
    return Refused(_error(request_id, code, message))


def _too_deep() -> str:
    return f"the message is nested deeper than {MAX_DEPTH} levels"


def _decoded(raw: bytes | str) -> str | None:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _lenient(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _id_of(text: str) -> RequestId | None:
    """The id of a message that could not be taken as it is, when it can be read at all."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return _top_level_id(text)
    if isinstance(message, dict) and _valid_id(message.get("id")):
        value: RequestId = message["id"]
        return value
    return None


def _top_level_id(text: str) -> RequestId | None:
    """The id of a JSON object too deep for the parser: its top-level members are read
    one by one with the nested ones skipped, so an "id" inside params is never taken."""
    decoder = json.JSONDecoder()
    depth, index, in_string, escaped = 0, 0, False, False
    start_of_key = -1
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
            if depth == 1:
                start_of_key = index
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif char == ":" and depth == 1 and start_of_key >= 0:
            if text[start_of_key:index].strip() == '"id"':
                try:
                    value, _ = decoder.raw_decode(text[index + 1 :].lstrip())
                except ValueError:
                    return None
                return value if _valid_id(value) else None
            start_of_key = -1
    return None


def _depth(value: Any) -> int:
    """How deeply `value` nests (without recursion: the value may be deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def _encodable(value: Any) -> bool:
    """No lone surrogate in any string or key (JSON's "\\ud800" escapes decode to one)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _without_params(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key != "params"}


class CheckedLines:
    """Standard input for the SDK's stdio transport: the lines that are one message each
    pass on; for the others, the errors they are owed wait in `refusals` for the writer.
    Lines are read as bytes and decoded strictly, so a line that is not UTF-8 is refused
    rather than passed on with its bytes replaced."""

    def __init__(self, lines: AsyncIterable[bytes]) -> None:
        self._lines = lines
        self._send, self.refusals = anyio.create_memory_object_stream[JSONRPCError](64)

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._send:
            async for raw in self._lines:
                line = raw.rstrip(b"\r\n")
                if not line.strip():
                    continue
                if check(line) is None:
                    yield line.decode("utf-8")
                    continue
                for refusal in refusals_of(line):
                    await self._send.send(refusal)
