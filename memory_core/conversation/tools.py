"""The memory tools a model may call: schemas in OpenAI's function format, and dispatch.

Every call runs with the scope of the chat it serves (`ToolContext`); the model can name
paths and queries but never a scope. Errors come back as JSON the model can read, not
exceptions that end the turn: a bad call says what was wrong with it, and a failure of
the storage under it (the database, the disk) says so in one line, so the model can tell
the user instead of the turn ending in a traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memory_core.base.entries import CATEGORIES, Importance
from memory_core.base.errors import ChatmemError, refusal
from memory_core.base.scope import ScopeKey
from memory_core.memory_service import MemoryService
from memory_core.recall.reading import DEFAULT_LINES, MAX_LINES
from memory_core.recall.request import SearchRequest

log = logging.getLogger(__name__)

MAX_RESULTS = 20

MEMORY_SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory_search",
        "description": (
            "Search this chat's memories (long-term memory, daily notes, archived history, "
            "summaries) by keywords. Use it before answering questions about the past: earlier "
            "decisions, preferences, plans, what was said before. Returns path:line hits with "
            "scores; read more with memory_get."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "keywords, Chinese or English"},
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "default": 5,
                },
            },
            "required": ["query"],
        },
    },
}

MEMORY_GET: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory_get",
        "description": (
            "Read lines of a memory file returned by memory_search (accepts 'path' or "
            "'path:line'). Use it to quote exact dates, numbers or wording."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "from": {"type": "integer", "minimum": 1, "description": "first line (1-based)"},
                "lines": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LINES,
                    "default": DEFAULT_LINES,
                },
            },
            "required": ["path"],
        },
    },
}

MEMORY_SAVE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory_save",
        "description": (
            "Save something worth remembering. target=daily appends to today's notes; "
            "target=long-term stores a scored long-term memory (use when the user asks you to "
            "remember, or for durable preferences, facts and decisions). The answer's action "
            "says what was kept: saved (new), updated (replaces the alike entry 'replaced', "
            "e.g. a changed number) or reinforced (said before)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "one self-contained sentence"},
                "target": {"type": "string", "enum": ["daily", "long-term"], "default": "daily"},
                "category": {"type": "string", "enum": list(CATEGORIES), "default": "fact"},
                "importance": {
                    "type": "string",
                    "enum": [i.value for i in Importance],
                    "default": "medium",
                },
            },
            "required": ["content"],
        },
    },
}

TOOL_SCHEMAS: list[dict[str, Any]] = [MEMORY_SEARCH, MEMORY_GET, MEMORY_SAVE]


@dataclass(frozen=True, slots=True)
class ToolContext:
    memory: MemoryService
    scope: ScopeKey
    session_id: str | None = None
    speaker: str | None = None
    """Whose turn the model is answering (a group member); a long-term save is theirs."""
    speaker_id: str | None = None
    """That member's platform id, when the front end gave one."""


async def dispatch(ctx: ToolContext, name: str, arguments: str | dict[str, Any]) -> str:
    """Run one tool call and return its JSON result (errors included, never raised)."""
    try:
        args = json.loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
        if not isinstance(args, dict):
            raise ChatmemError("arguments must be a JSON object")
        result = await run(ctx, name, args)
    except Exception as exc:
        message = refusal(name, exc)
        if message is None:
            raise
        result = {"error": message}
    return json.dumps(result, ensure_ascii=False)


async def run(ctx: ToolContext, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """One tool call with its arguments as the schemas above name them; raises."""
    if name == "memory_search":
        return await memory_search(ctx, **_pick(args, "query", "max_results"))
    if name == "memory_get":
        return await memory_get(ctx, **_pick(args, "path", "from", "lines"))
    if name == "memory_save":
        return await memory_save(ctx, **_pick(args, "content", "target", "category", "importance"))
    raise ChatmemError(f"unknown tool {name!r}")


def _pick(args: Mapping[str, Any], *names: str) -> dict[str, Any]:
    unknown = set(args) - set(names)
    if unknown:
        raise ChatmemError(f"unexpected arguments: {', '.join(sorted(unknown))}")
    return {("start" if k == "from" else k): v for k, v in args.items()}


async def memory_search(ctx: ToolContext, query: str, max_results: int = 5) -> dict[str, Any]:
    if not isinstance(query, str) or not query.strip():
        raise ChatmemError("query must be a non-empty string")
    limit = max(1, min(int(max_results), MAX_RESULTS))
    hits = await ctx.memory.finder.search(ctx.scope, SearchRequest(query, limit=limit))
    return {
        "results": [
            {
                "path": hit.location,
                "score": round(hit.score, 3),
                "kind": hit.kind.value,
                "date": hit.created_at.date().isoformat() if hit.created_at else None,
                "text": hit.text if len(hit.text) <= 500 else hit.text[:500] + "…",
            }
            for hit in hits
        ],
        "note": "" if hits else "searched, nothing found: say so instead of guessing",
    }


async def memory_get(
    ctx: ToolContext, path: str, start: int | None = None, lines: int | None = None
) -> dict[str, Any]:
    if not isinstance(path, str):
        raise ChatmemError("path must be a string")
    read = await ctx.memory.finder.read(
        ctx.scope,
        path,
        int(start) if start is not None else None,
        int(lines) if lines is not None else None,
    )
    return {
        "path": read.path,
        "from": read.start,
        "to": read.end,
        "text": read.text,
        "truncated": read.truncated,
    }


async def memory_save(
    ctx: ToolContext,
    content: str,
    target: str = "daily",
    category: str = "fact",
    importance: str = "medium",
) -> dict[str, Any]:
    if not isinstance(content, str) or not content.strip():
        raise ChatmemError("content must be a non-empty string")
    if target == "daily":
        path, line = await ctx.memory.notes.append(ctx.scope, content)
        return {"saved": "daily", "path": f"{path}:{line}"}
    if target in ("long-term", "long_term", "longterm"):
        entry, result = await ctx.memory.long_term.capture(
            ctx.scope,
            content,
            category=category if category in CATEGORIES else "fact",
            importance=importance,
            source="memory_save",
            speaker=ctx.speaker,
            speaker_id=ctx.speaker_id,
        )
        outcome = result.outcome
        assert outcome is not None  # capture raises when nothing was kept
        return {"saved": "long-term", **outcome.as_json(), "score": round(entry.score, 2)}
    raise ChatmemError("target must be 'daily' or 'long-term'")
