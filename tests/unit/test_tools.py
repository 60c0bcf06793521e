"""The memory tools: OpenAI function schemas, and dispatch that answers JSON, keeps saves in
the caller's scope and turns every bad call into {"error": ...}."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.entries import CATEGORIES, Importance
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.conversation.tools import TOOL_SCHEMAS, dispatch
from memory_core.engine import MemoryCore

PEER = ScopeKey("peer:42")
JSON_TYPES = {"string", "integer", "number", "boolean", "object", "array", "null"}


# --- schemas ----------------------------------------------------------------------------


def check_schema(node: dict[str, Any], where: str) -> None:
    """The JSON-schema subset OpenAI function parameters use, checked recursively."""
    assert node.get("type") in JSON_TYPES, where
    if node["type"] == "object":
        properties = node.get("properties", {})
        assert isinstance(properties, dict), where
        for name, child in properties.items():
            assert isinstance(child, dict), f"{where}.{name}"
            check_schema(child, f"{where}.{name}")
        required = node.get("required", [])
        assert isinstance(required, list) and set(required) <= set(properties), where
    if "enum" in node:
        assert node["enum"] and len(set(node["enum"])) == len(node["enum"]), where
        assert "default" not in node or node["default"] in node["enum"], where
    if "description" in node:
        assert isinstance(node["description"], str) and node["description"].strip(), where
    if node["type"] == "integer":
        low, high = node.get("minimum", -(10**9)), node.get("maximum", 10**9)
        assert low <= node.get("default", low) <= high, where


def test_schemas_are_openai_functions() -> None:
    names = []
    for tool in TOOL_SCHEMAS:
        assert set(tool) == {"type", "function"}
        assert tool["type"] == "function"
        function = tool["function"]
        assert set(function) >= {"name", "description", "parameters"}
        assert set(function) <= {"name", "description", "parameters", "strict"}
        assert function["name"].replace("_", "").isalnum() and len(function["name"]) <= 64
        assert isinstance(function["description"], str) and len(function["description"]) > 20
        params = function["parameters"]
        assert params["type"] == "object"
        assert params["required"], function["name"]
        check_schema(params, function["name"])
        json.dumps(tool)  # serialisable as sent to the API
        names.append(function["name"])
    assert names == ["memory_search", "memory_get", "memory_save"]
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOL_SCHEMAS}
    assert by_name["memory_search"]["required"] == ["query"]
    assert by_name["memory_get"]["required"] == ["path"]
    assert by_name["memory_get"]["properties"]["lines"]["maximum"] == 300
    assert by_name["memory_save"]["required"] == ["content"]
    save = by_name["memory_save"]["properties"]
    assert save["target"]["enum"] == ["daily", "long-term"]
    assert set(save["category"]["enum"]) == set(CATEGORIES)
    assert set(save["importance"]["enum"]) == {i.value for i in Importance}


def test_schemas_accept_what_dispatch_accepts() -> None:
    """Every property a schema declares is one dispatch takes, and no other."""
    import inspect

    from memory_core.conversation import tools

    for tool in TOOL_SCHEMAS:
        name = tool["function"]["name"]
        declared = set(tool["function"]["parameters"]["properties"])
        handler = getattr(tools, name)
        accepted = {
            "from" if p == "start" else p for p in inspect.signature(handler).parameters
        } - {"ctx"}
        assert declared == accepted, name


# --- dispatch ---------------------------------------------------------------------------


async def call(core: MemoryCore, name: str, args: Any, scope: ScopeKey = MAIN) -> Any:
    raw = await dispatch(core.tool_context(scope, "sess"), name, args)
    assert isinstance(raw, str)
    return json.loads(raw)


async def test_save_long_term_says_what_it_kept(core: MemoryCore) -> None:
    def save(text: str) -> dict[str, Any]:
        return {"content": text, "target": "long-term"}

    first = await call(core, "memory_save", save("我儿子上三年级"))
    assert first["action"] == "saved" and "replaced" not in first
    update = await call(core, "memory_save", save("我儿子上四年级"))
    assert (update["action"], update["replaced"]) == ("updated", first["id"])
    again = await call(core, "memory_save", save("我儿子上四年级。"))
    assert (again["action"], again["id"]) == ("reinforced", update["id"])
    assert sorted(e.content for e in await core.memories.entries(MAIN)) == [
        "我儿子上三年级",
        "我儿子上四年级",
    ]


async def test_save_daily_lands_in_todays_notes_of_the_scope(core: MemoryCore) -> None:
    result = await call(core, "memory_save", {"content": "买了去成都的高铁票"}, PEER)
    assert result["saved"] == "daily"
    path, line = result["path"].rsplit(":", 1)
    assert path == core.workspace.relative(core.workspace.daily_path(PEER, core.notes.today()))
    assert path.startswith("memory/scopes/peer_42/")
    assert int(line) == 3
    text = (core.workspace.root / path).read_text(encoding="utf-8")
    assert "买了去成都的高铁票" in text
    assert not (core.workspace.root / "memory" / f"{core.notes.today().isoformat()}.md").exists()
    assert await core.memories.entries(PEER) == []
    [hit] = await core.finder.search(PEER, "成都 高铁票")
    assert hit.kind is ChunkKind.DAILY and hit.location == result["path"]
    assert await core.finder.search(MAIN, "成都 高铁票") == []


async def test_save_long_term_becomes_a_scored_entry(core: MemoryCore) -> None:
    result = await call(
        core,
        "memory_save",
        json.dumps(
            {
                "content": "User's daughter Emma is allergic to peanuts",
                "target": "long-term",
                "category": "fact",
                "importance": "high",
            }
        ),
        PEER,
    )
    assert result["saved"] == "long-term" and result["score"] == 0.8
    [entry] = await core.memories.entries(PEER)
    assert (entry.id, entry.category, entry.content) == (
        result["id"],
        "fact",
        "User's daughter Emma is allergic to peanuts",
    )
    assert await core.memories.entries(MAIN) == []
    assert not core.workspace.daily_path(PEER, core.notes.today()).exists()
    [hit] = await core.finder.search(PEER, "Emma peanuts")
    assert hit.kind is ChunkKind.LONG_TERM and hit.ref == entry.id
    # Saving it again reinforces the same entry instead of adding a copy.
    again = await call(
        core,
        "memory_save",
        {"content": "User's daughter Emma is allergic to peanuts", "target": "long_term"},
        PEER,
    )
    assert again["id"] == entry.id and again["score"] > 0.8
    assert len(await core.memories.entries(PEER)) == 1
    # An unknown category falls back to fact rather than failing the save.
    odd = await call(
        core,
        "memory_save",
        {"content": "likes green tea", "target": "long-term", "category": "whatever"},
    )
    assert (await core.memories.get_entry(MAIN, odd["id"])).category == "fact"


async def test_search_and_get_round_trip(core: MemoryCore) -> None:
    await call(core, "memory_save", {"content": "Booked flights to Lisbon for May 12"})
    await call(core, "memory_save", {"content": "Prefers window seats", "target": "long-term"})
    result = await call(core, "memory_search", {"query": "Lisbon flight"})
    assert result["note"] == ""
    [hit] = result["results"]
    assert set(hit) == {"path", "score", "kind", "date", "text"}
    assert hit["kind"] == "daily" and hit["date"] == core.notes.today().isoformat()
    assert hit["text"] == "Booked flights to Lisbon for May 12"
    read = await call(core, "memory_get", {"path": hit["path"], "lines": 1})
    assert read["text"].endswith("Booked flights to Lisbon for May 12")
    assert read["from"] == read["to"] == int(hit["path"].rsplit(":", 1)[1])

    none = await call(core, "memory_search", {"query": "volcano"})
    assert none["results"] == [] and "nothing found" in none["note"]
    many = await call(core, "memory_search", {"query": "Lisbon seats", "max_results": 1})
    assert len(many["results"]) == 1
    capped = await call(core, "memory_search", {"query": "Lisbon", "max_results": 10_000})
    assert len(capped["results"]) == 1
    long_text = "x" * 800 + " marathon"
    await call(core, "memory_save", {"content": long_text})
    [long_hit] = (await call(core, "memory_search", {"query": "marathon"}))["results"]
    assert len(long_hit["text"]) == 501 and long_hit["text"].endswith("…")


async def test_get_through_the_tool_defaults_and_caps(core: MemoryCore) -> None:
    await core.notes.append(MAIN, "line 0")
    day = core.workspace.relative(core.workspace.daily_path(MAIN, core.notes.today()))
    with (core.workspace.root / day).open("a", encoding="utf-8") as handle:
        handle.writelines(f"- 12:00:00 line {i}\n" for i in range(1, 350))
    default = await call(core, "memory_get", {"path": day})
    assert (default["from"], default["to"], default["truncated"]) == (1, 40, True)
    capped = await call(core, "memory_get", {"path": day, "lines": 1000})
    assert (capped["from"], capped["to"], capped["truncated"]) == (1, 300, True)
    tail = await call(core, "memory_get", {"path": f"{day}:340"})
    assert (tail["from"], tail["to"], tail["truncated"]) == (340, 352, False)
    explicit = await call(core, "memory_get", {"path": f"[{day}:340]", "from": 3, "lines": 2})
    assert (explicit["from"], explicit["to"]) == (3, 4)
    assert explicit["text"].splitlines()[0].endswith("line 0")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("memory_search", {}, "query"),
        ("memory_search", {"query": ""}, "query"),
        ("memory_search", {"query": "   "}, "query"),
        ("memory_search", {"query": 42}, "query"),
        ("memory_search", {"query": ["a"]}, "query"),
        ("memory_search", {"query": "x", "max_results": "many"}, ""),
        ("memory_search", {"query": "x", "max_results": None}, ""),
        ("memory_search", {"query": "x", "max_results": [1]}, ""),
        ("memory_search", {"query": "x", "scope": "peer:1"}, "unexpected arguments: scope"),
        ("memory_search", {"q": "x"}, "unexpected"),
        ("memory_get", {}, "path"),
        ("memory_get", {"path": 7}, "path"),
        ("memory_get", {"path": None}, "path"),
        ("memory_get", {"path": "MEMORY.md", "lines": "ten"}, ""),
        ("memory_get", {"path": "MEMORY.md", "lines": 0}, "lines"),
        ("memory_get", {"path": "MEMORY.md", "lines": -5}, "lines"),
        ("memory_get", {"path": "MEMORY.md", "from": "first"}, ""),
        ("memory_get", {"path": "MEMORY.md", "from": {"a": 1}}, ""),
        ("memory_get", {"path": "MEMORY.md", "start": 1}, "unexpected arguments: start"),
        ("memory_get", {"path": "../secret.md"}, "refused"),
        ("memory_get", {"path": "memory/2000-01-01.md"}, "no such memory file"),
        ("memory_get", {"path": "sessions/nope:1"}, "no messages"),
        ("memory_save", {}, "content"),
        ("memory_save", {"content": ""}, "content"),
        ("memory_save", {"content": 3.5}, "content"),
        ("memory_save", {"content": "x", "target": "somewhere"}, "target"),
        ("memory_save", {"content": "x", "target": None}, "target"),
        ("memory_save", {"content": "x", "target": "long-term", "importance": "huge"}, ""),
        ("memory_save", {"content": "x", "scope": "main"}, "unexpected"),
        ("memory_delete", {"id": "abc"}, "unknown tool"),
        ("", {}, "unknown tool"),
    ],
)
async def test_bad_calls_return_errors(
    core: MemoryCore, name: str, args: dict[str, Any], message: str
) -> None:
    await core.memories.capture(MAIN, "something to read")
    result = await call(core, name, args)
    assert set(result) == {"error"}, result
    assert isinstance(result["error"], str) and result["error"]
    assert message in result["error"]
    for text_args in (json.dumps(args),):
        assert set(await call(core, name, text_args)) == {"error"}
    assert len(await core.memories.entries(MAIN)) == 1  # nothing saved by a refused call


@pytest.mark.parametrize(
    "raw", ["{", "not json", "[1, 2]", '"a string"', "42", "null", '{"query": }', "\x00"]
)
async def test_non_object_arguments_return_errors(core: MemoryCore, raw: str) -> None:
    for name in ("memory_search", "memory_get", "memory_save"):
        result = await call(core, name, raw)
        assert set(result) == {"error"}, (name, raw, result)


async def test_empty_arguments_mean_no_arguments(core: MemoryCore) -> None:
    result = await call(core, "memory_search", "")
    assert "query" in result["error"]


async def test_tools_never_see_another_scope(core: MemoryCore) -> None:
    await call(core, "memory_save", {"content": "main secret zanzibar", "target": "long-term"})
    await call(core, "memory_save", {"content": "daily secret zanzibar"})
    result = await call(core, "memory_search", {"query": "zanzibar"}, PEER)
    assert result["results"] == []
    for path in ("MEMORY.md", f"memory/{core.notes.today().isoformat()}.md"):
        read = await call(core, "memory_get", {"path": path}, PEER)
        assert "zanzibar" not in json.dumps(read, ensure_ascii=False)
