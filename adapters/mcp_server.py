"""chatmem over the Model Context Protocol: the chat bots' memory tools for any agent.

A front end like the bots: thin over `MemoryCore`, with the same tool functions the chat
model calls (`memory_core.conversation.tools`), so an agent gets the same scopes, scores
and isolation as a chat. Built on the official SDK (`mcp`, the optional `mcp` extra).

The scope is never an argument: each MCP server object serves exactly one scope, fixed
when it is built. Over stdio that is the process's `--scope`; over HTTP each configured
bearer token leads to the server of its own scope (`ScopedApps`), chosen before the SDK
sees the request. So a client cannot name another scope: no tool, resource or prompt has
a parameter that could, and no server object holds a second scope to reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message as PromptMessage
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    ToolAnnotations,
)
from pydantic import BaseModel, ConfigDict, Field

from adapters.mcp_envelope import CheckedLines, check
from adapters.settings import AppConfig
from memory_core import __version__
from memory_core.base.clock import system_sleep
from memory_core.base.entries import CATEGORIES, Importance, MemoryEntry
from memory_core.base.errors import ChatmemError, ToolRefused, refusal
from memory_core.base.scope import ScopeKey

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)

MAX_RESULTS = 20
MAX_LINES = 300
"""The chat tools' own bounds (the core clamps to them too); a test keeps them equal."""

GUIDE = """You have a long-term memory of this user, shared with their chat bots, through
the chatmem tools.

- Before answering a question about the past (earlier decisions, preferences, plans,
  dates, what was said before; 之前/上次/昨天/还记得吗), call memory_search with a few
  keywords in the user's language. Read exact wording with memory_get (path:line from a
  hit) before you quote dates, numbers or names.
- If nothing is found, say you searched and did not find it. Never invent memories.
- When the user asks you to remember something, or states a durable preference, fact or
  decision, call memory_save with target long-term; day-to-day notes go to target daily.
- memory_list shows what is remembered, best first; memory_forget removes an entry when
  the user asks you to forget it (it stays restorable for a while)."""


def build_server(core: MemoryCore, scope: ScopeKey) -> MCPServer:
    """The MCP server of one scope of the workspace: tools, resources and a prompt."""

    async def use(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        given = {key: value for key, value in arguments.items() if value is not None}
        return await _answer(name, core.memory_tool(scope, name, given))

    registered: list[Tool] = []

    def tool(
        name: str, description: str, *, read_only: bool = False, destructive: bool = False
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        hints = ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive)

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            made = Tool.from_function(fn, name=name, description=description, annotations=hints)
            registered.append(_strict(made))
            return fn

        return register

    @tool(
        "memory_search",
        description=(
            "Search the user's memories (long-term memories, daily notes, archived chat "
            "history, summaries) by keywords, Chinese or English. Use it before answering "
            "anything about the past. Returns hits with path:line, score, kind, date and "
            "text; read more around a hit with memory_get."
        ),
        read_only=True,
    )
    async def memory_search(
        query: Annotated[str, Field(min_length=1, description="keywords, Chinese or English")],
        max_results: Annotated[int, Field(ge=1, le=MAX_RESULTS, description="hits to return")] = 5,
    ) -> dict[str, Any]:
        return await use("memory_search", {"query": query, "max_results": max_results})

    @tool(
        "memory_get",
        description=(
            "Read lines of a memory file named by a memory_search hit ('path' or "
            "'path:line'), to quote exact dates, numbers or wording."
        ),
        read_only=True,
    )
    async def memory_get(
        path: Annotated[str, Field(min_length=1, description="a hit's path or path:line")],
        start: Annotated[
            int | None, Field(ge=1, description="first line, 1-based (default: the hit's)")
        ] = None,
        lines: Annotated[int | None, Field(ge=1, le=MAX_LINES, description="how many")] = None,
    ) -> dict[str, Any]:
        return await use("memory_get", {"path": path, "from": start, "lines": lines})

    @tool(
        "memory_save",
        description=(
            "Save something worth remembering, as one self-contained sentence. "
            "target=long-term stores a scored long-term memory (what the user asks you to "
            "remember; durable preferences, facts, decisions); target=daily appends to "
            "today's notes. Saving a memory again reinforces it instead of duplicating it; "
            "one that changes a number, date or negation of an alike memory updates it. "
            "The answer's action says which: saved, updated (with the replaced id) or "
            "reinforced."
        ),
    )
    async def memory_save(
        content: Annotated[str, Field(min_length=1, description="one self-contained sentence")],
        target: Literal["daily", "long-term"] = "daily",
        category: Annotated[str, Field(json_schema_extra={"enum": list(CATEGORIES)})] = "fact",
        importance: Importance = Importance.MEDIUM,
    ) -> dict[str, Any]:
        if category not in CATEGORIES:
            raise ToolError(f"category must be one of: {', '.join(CATEGORIES)}")
        arguments = {
            "content": content,
            "target": target,
            "category": category,
            "importance": importance.value,
        }
        return await use("memory_save", arguments)

    @tool(
        "memory_forget",
        description=(
            "Forget one long-term memory the user wants gone, by its id (from memory_list; "
            "a unique prefix is enough). It leaves the rankings at once and stays "
            "restorable for a while."
        ),
        destructive=True,
    )
    async def memory_forget(
        id: Annotated[str, Field(min_length=1, description="entry id or a unique prefix")],
    ) -> dict[str, Any]:
        async def forgetting() -> dict[str, Any]:
            entry_id = await core.memories.match_id(scope, id)
            entry = await core.memories.forget(scope, entry_id, source="mcp")
            keep = core.config.long_term.forgotten_keep_days
            return {"forgotten": entry.id, "content": entry.content, "restorable_days": keep}

        return await _answer("memory_forget", forgetting())

    @tool(
        "memory_list",
        description=(
            "The user's long-term memories, best first, with their scores (importance, "
            "use and age make the score; low ones fade into the archive). Use it to see "
            "what is remembered or to find an id for memory_forget."
        ),
        read_only=True,
    )
    async def memory_list(
        limit: Annotated[int, Field(ge=1, le=200, description="entries to return")] = 20,
        archived: Annotated[bool, Field(description="list the archive instead")] = False,
    ) -> dict[str, Any]:
        async def listing() -> dict[str, Any]:
            status = await core.memories.status(scope)
            entries = status.archived if archived else status.active
            return {
                "total": len(entries),
                "entries": [_entry(entry) for entry in entries[:limit]],
            }

        return await _answer("memory_list", listing())

    server = MCPServer(
        "chatmem",
        version=__version__,
        instructions=GUIDE,
        log_level="WARNING",
        tools=registered,
    )

    memory_path = core.memories.relative_path(scope)

    @server.resource(
        "chatmem://memory",
        name="long-term memory",
        description=f"{memory_path}: this scope's long-term memories, as chatmem keeps them.",
        mime_type="text/markdown",
    )
    async def memory_file() -> str:
        return await core.long_term_text(scope)

    @server.resource(
        "chatmem://snapshot",
        name="snapshot",
        description=(
            "What every prompt of this scope carries: its SNAPSHOT.md when snapshots are "
            "on, else its best long-term memories, ranked and token-capped."
        ),
        mime_type="text/markdown",
    )
    async def snapshot() -> str:
        return await core.snapshots.prompt_block(scope)

    def when_to_search() -> str:
        return GUIDE

    server.add_prompt(
        _NoArguments.from_function(
            when_to_search,
            name="when_to_search",
            description="How and when to use the memory tools.",
        )
    )
    return server


class _NoArguments(Prompt):
    """A prompt that takes no arguments refuses any it is given with INVALID_PARAMS, in
    one line: the SDK's own refusal (any error while rendering) is logged with three
    chained tracebacks for what is only a client's mistake."""

    async def render(
        self, arguments: dict[str, Any] | None, context: Context[Any, Any]
    ) -> list[PromptMessage] | InputRequiredResult:
        if arguments:
            given = ", ".join(sorted(arguments))
            raise MCPError(
                INVALID_PARAMS, f"prompt {self.name} takes no arguments (given: {given})"
            )
        return await super().render(arguments, context)


async def serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport (which keeps stray output off the wire) with each line
    checked first: a malformed request is answered with its JSON-RPC error instead of
    being dropped without a word (adapters/mcp_envelope.py)."""
    lines = CheckedLines(anyio.wrap_file(sys.stdin.buffer))
    # The SDK's MCPServer has no public way to run on given streams: its own
    # run_stdio_async is these lines, without the checked input.
    lowlevel = server._lowlevel_server
    stdin = cast("anyio.AsyncFile[str]", lines)
    async with (
        stdio_server(stdin=stdin) as (read_stream, write_stream),
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(_send_refusals, lines, write_stream)
        options = lowlevel.create_initialization_options()
        await lowlevel.run(read_stream, write_stream, options)


async def _send_refusals(lines: CheckedLines, write_stream: Any) -> None:
    async with lines.refusals:
        async for refusal in lines.refusals:
            try:
                await write_stream.send(SessionMessage(refusal))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return


def _strict(tool: Tool) -> Tool:
    """The tool with arguments it does not know refused, not ignored: an agent that passes
    `scope` (or misspells `query`) learns so, instead of reading an answer it takes for
    what it asked."""
    loose = tool.fn_metadata.arg_model
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    strict: type[BaseModel] = type(
        loose.__name__, (loose,), {"model_config": config, "__module__": __name__}
    )
    metadata = tool.fn_metadata.model_copy(update={"arg_model": strict})
    schema = strict.model_json_schema(by_alias=True)
    return tool.model_copy(update={"fn_metadata": metadata, "parameters": schema})


def _entry(entry: MemoryEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "content": entry.content,
        "category": entry.category,
        "score": round(entry.score, 3),
        "hits": entry.hits,
        "last_activated": _day(entry.last_activated),
        "created_at": _day(entry.created_at),
        "pinned": entry.pinned,
    }


def _day(when: datetime) -> str:
    return when.date().isoformat()


async def _answer(name: str, call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """The tool's result, or an MCP tool error with the line the chat model would read
    (a bug stays an exception: the SDK reports it without its text, and logs it)."""
    try:
        return await call
    except ToolRefused as exc:  # said and logged by the core already
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        message = refusal(name, exc)
        if message is None:
            raise
        raise ToolError(message) from exc


# --- HTTP -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopedApps:
    """ASGI front of the HTTP transport: the bearer token picks the MCP app of its scope;
    a request without a known token is refused (401) before any app sees it. Tokens are
    compared in constant time. With no token configured (`open_app`), every request goes
    to the one app of the server's own scope."""

    apps: Mapping[str, ASGIApp]
    open_app: ASGIApp | None = None

    def app_for(self, header: str) -> ASGIApp | None:
        kind, _, token = header.partition(" ")
        token = token.strip()
        if kind.lower() != "bearer" or not token:
            return None
        found = None
        for known, app in self.apps.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = app
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.open_app is not None:
            await checked(self.open_app, scope, receive, send)
            return
        header = dict(scope.get("headers", ())).get(b"authorization", b"")
        app = self.app_for(header.decode("latin-1"))
        if app is None:
            from starlette.responses import JSONResponse

            denied = JSONResponse(
                {"error": "a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="chatmem"'},
            )
            await denied(scope, receive, send)
            return
        await checked(app, scope, receive, send)


async def checked(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """`app` with each POSTed message checked first (adapters/mcp_envelope.py): a malformed
    one is answered 400 with its JSON-RPC error here, in one plain sentence, instead of the
    SDK's validation text. The body is read once and handed on unchanged; one larger than
    the SDK accepts goes on unread, for the SDK's own 413."""
    if scope["type"] != "http" or scope["method"] != "POST":
        await app(scope, receive, send)
        return
    body, rest = await _read_body(receive, DEFAULT_MAX_REQUEST_BODY_SIZE)
    if rest is None:
        refused = check(body)
        if refused is not None:
            from starlette.responses import Response

            reply = refused.reply or JSONRPCError(
                jsonrpc="2.0",
                id=None,
                error=ErrorData(code=INVALID_REQUEST, message="not a valid JSON-RPC message"),
            )
            content = reply.model_dump_json(by_alias=True, exclude_none=False)
            await Response(content, 400, media_type="application/json")(scope, receive, send)
            return
    await app(scope, _replaying(body, rest, receive), send)


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Message | None]:
    """The request body, whole; or, past `limit`, what was read and the message that
    crossed it (`rest`), for the app to read on from."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), message
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replaying(body: bytes, rest: Message | None, receive: Receive) -> Receive:
    """A `receive` that gives the app the body already read, then whatever follows."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": rest is not None}]
    if rest is not None:
        pending.append(rest)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


def token_scopes(token: str, clients: Mapping[str, str], own: ScopeKey) -> dict[str, ScopeKey]:
    """Every configured token with its scope: the server's own token serves `--scope`."""
    scopes = {known: ScopeKey.parse(scope) for known, scope in clients.items()}
    if token:
        scopes[token] = own
    return scopes


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""The hosts served without a token: exactly those for which the SDK checks the Host and
Origin headers (DNS rebinding), which the rest of 127.0.0.0/8 would not get."""


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT (or :PORT, or PORT) for --http; the host defaults to loopback."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ChatmemError(f"--http wants HOST:PORT, not {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


async def serve_http(
    core: MemoryCore,
    own: ScopeKey,
    host: str,
    port: int,
    stop: asyncio.Event,
    ready: Callable[[int], None] | None = None,
) -> None:
    """Streamable HTTP until `stop`. With tokens configured every request needs one; with
    none, only loopback is served and every client gets `own`."""
    import uvicorn

    settings = AppConfig.of(core.config).mcp
    scopes = token_scopes(settings.token, settings.clients, own)
    if not scopes and not is_loopback(host):
        raise ChatmemError(
            f"no bearer token configured (CHATMEM_MCP_TOKEN or mcp.clients): refusing to "
            f"listen on {host}; without a token the MCP server listens on loopback only "
            f"({', '.join(LOOPBACK_HOSTS)})"
        )
    servers = {scope: build_server(core, scope) for scope in {*scopes.values(), own}}
    apps = {
        scope: server.streamable_http_app(streamable_http_path=settings.path, host=host)
        for scope, server in servers.items()
    }
    front = ScopedApps(
        {token: apps[scope] for token, scope in scopes.items()},
        open_app=None if scopes else apps[own],
    )
    # The apps' own lifespans each run their session manager; one server runs them all.
    web = uvicorn.Server(
        uvicorn.Config(front, host=host, port=port, lifespan="off", log_level="warning")
    )
    async with contextlib.AsyncExitStack() as running:
        for server in servers.values():
            await running.enter_async_context(server.session_manager.run())
        serving = asyncio.create_task(web.serve())
        try:
            while not web.started:
                if serving.done():
                    serving.result()
                    raise ChatmemError(f"cannot listen on {host}:{port}")
                await system_sleep(0.02)  # until uvicorn listens
            bound = web.servers[0].sockets[0].getsockname()[1] if web.servers else port
            auth = (
                f"{len(scopes)} bearer token(s), each bound to its scope"
                if scopes
                else f"no bearer token configured: loopback only, every client in scope {own}"
            )
            log.info("MCP server on http://%s:%s%s (%s)", host, bound, settings.path, auth)
            if ready is not None:
                ready(bound)
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if serving.done():
                serving.result()
                raise ChatmemError("the MCP HTTP server stopped on its own")
        finally:
            web.should_exit = True
            await serving
