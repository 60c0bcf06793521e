"""One ranking for one memory: `core.finder.search` (`chatmem search`, `/search`, the TUI), the
chat tool `memory_search`, MCP `memory_search` and the automatic recall of a chat turn
give the same hits in the same order for the same scope and question, vectors included
whenever an embedder is configured, in a process that just started too.

Vectors come from `testkit.embedder.ConceptEmbedder`: "where do I live" shares no
word with "我住在杭州…" and only its vector finds it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from adapters.mcp_server import build_server
from memory_core import services
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from testkit.embedder import ConceptEmbedder
from tests.unit.cli_support import Run, _clean_env, cli_fixture, ws_fixture  # noqa: F401  (fixtures)

HOME = "我住在杭州，在阿里巴巴做数据工程师"
QUESTIONS = ("where do I live", "staging server", "deploy failed again", "杭州", "dinner")


@pytest.fixture
async def dense_core(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[MemoryCore]:
    """A core whose embedder is the concept table (and whose search waits for it)."""
    monkeypatch.setattr(services, "build_embedder", lambda settings: ConceptEmbedder(delay=0.05))
    async with MemoryCore.open(config, clock=clock) as core:
        yield core


async def seeded(core: MemoryCore) -> None:
    """Two entries and a conversation (no model: the turns are stored, not answered)."""
    await core.memories.capture(MAIN, HOME)
    await core.memories.capture(MAIN, "The staging server is at 10.0.0.7")
    for text in (
        "My flat has a small balcony with tomatoes",
        "The deploy to the test box failed again",
        "We had dumplings for dinner, the staging team came too",
        "Remember that my bike lock code is 4711",
    ):
        await core.conversation.turn(MAIN, text)


async def mcp_paths(core: MemoryCore, question: str) -> list[str]:
    async with Client(build_server(core, MAIN)) as client:
        result = await client.call_tool("memory_search", {"query": question, "max_results": 10})
    assert not result.is_error, result
    found: Any = result.structured_content
    return [hit["path"] for hit in found["results"]]


async def test_search_tool_mcp_and_recall_rank_alike(dense_core: MemoryCore) -> None:
    core = dense_core
    await seeded(core)
    for question in QUESTIONS:
        searched = [
            h.location for h in await core.finder.search(MAIN, SearchRequest(question, limit=10))
        ]
        tool = await core.memory_tool(MAIN, "memory_search", {"query": question, "max_results": 10})
        recalled = [h.location for h in (await core.finder.recall(MAIN, question)).hits]
        assert searched, question
        assert [hit["path"] for hit in tool["results"]] == searched, question
        assert await mcp_paths(core, question) == searched, question
        # Recall injects fewer (and leaves weak matches out): the first of the same list.
        assert recalled and recalled == searched[: len(recalled)], question
    # "where do I live" shares no word with any memory: vectors took part on every path.
    where = await core.finder.search(MAIN, SearchRequest("where do I live", limit=10))
    assert HOME in [h.text for h in where]


async def test_search_reads_entity_names_as_recall_does(config: Config, clock: ManualClock) -> None:
    """A question naming an entity by one name finds what names it by another, in a
    search as in a recall ("my cat" and 小橘): the query is built once, for both."""
    async with MemoryCore.open(config, clock=clock) as core:
        await core.memories.capture(MAIN, "My cat is called Mochi")
        await core.memories.capture(MAIN, "Mochi sleeps on the radiator")
        await core.memories.capture(MAIN, "The radiator in the hall is broken")
        question = "is my cat warm at night"
        searched = [h.text for h in await core.finder.search(MAIN, question)]
        recalled = [h.text for h in (await core.finder.recall(MAIN, question)).hits]
    assert "Mochi sleeps on the radiator" in searched  # found by the cat's name alone
    assert recalled == searched[: len(recalled)]


def test_cli_search_ranks_with_vectors_where_the_scope_has_them(
    cli: Run,
    ws: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`chatmem capture` makes no vectors (docs/architecture.md, "Start-up"): it leaves
    its chunk to the next backfill, which `chatmem search` of a scope without vectors
    makes first (tests/unit/test_search_vectors_first.py has the rest). Once a serving
    process has made the scope's vectors, `chatmem search` makes those of what commands
    wrote since before it ranks (it used to rank by words alone: its backfill had only
    just started), and finds what only vectors find."""
    embedder = ConceptEmbedder(delay=0.2)
    monkeypatch.setattr(services, "build_embedder", lambda settings: embedder)
    cli.capture("We had dumplings for dinner")
    assert embedder.embedded == []
    assert cli.json("search", "where do I live") == []  # nothing near in meaning
    assert embedder.embedded == ["We had dumplings for dinner"]
    asyncio.run(_bot_starts(ws))  # a serving process has nothing left to make
    cli.capture(HOME)
    assert HOME not in embedder.embedded
    hits = cli.json("search", "where do I live")
    assert [h["text"] for h in hits] == [HOME]
    assert HOME in embedder.embedded


async def _bot_starts(workspace: Path) -> None:
    async with MemoryCore.open(Config(workspace=str(workspace))) as core:
        await core.vectors_ready()


@pytest.mark.sqlite_only  # on PostgreSQL no backfill was pending here: not yet understood
async def test_a_search_waits_once_for_a_backfill_that_lags(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search waits for the scope's vectors once; while that same backfill is still
    running (a long one, or an embedder that backs off), later searches do not wait
    again: a chat turn must not pay the wait on every message."""
    monkeypatch.setattr(services, "build_embedder", lambda settings: ConceptEmbedder(delay=3600))
    async with MemoryCore.open(config, clock=clock) as core:
        await core.conversation.turn(MAIN, "My flat has a small balcony with tomatoes")
        index = core.guard.index
        assert index is not None and index.vectors is not None
        sid = await index.scope_id(MAIN)
        assert sid is not None
        assert await index.vectors.settle(sid, 0.01) is False  # waited, still behind

        async def no_wait(*args: object, **kwargs: object) -> object:
            raise AssertionError("a second wait for the same backfill")

        with monkeypatch.context() as patch:
            patch.setattr(asyncio, "wait", no_wait)
            assert await index.vectors.settle(sid, 60.0) is False
        assert [h.text for h in await core.finder.search(MAIN, "balcony")]  # words still answer
