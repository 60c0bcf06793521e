"""What a command's core skips at its start and a serving core does not
(docs/architecture.md, "Start-up"); what a command imports is test_cli's
`test_commands_import_no_tokenizer_numpy_or_model`, its times bench/cli_bench.py's."""

from __future__ import annotations

import pytest

from memory_core import services
from memory_core.base import text
from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.entities import Entity
from testkit.embedder import ConceptEmbedder

HOME = "我住在杭州，在阿里巴巴做数据工程师"


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each load of the tokenizer's dictionary, from a state where none was made yet."""
    text.warm_up()
    segmenter = text._STATE.segmenter
    made: list[str] = []

    def load() -> text._Segmenter:
        made.append("dictionary")
        assert segmenter is not None
        return segmenter

    monkeypatch.setattr(text, "_STATE", text._LoaderState())
    monkeypatch.setattr(text, "_load_segmenter", load)
    return made


async def test_only_a_serving_core_loads_the_dictionary_at_its_open(
    config: Config, clock: ManualClock, loads: list[str]
) -> None:
    async with MemoryCore.open(config, clock=clock, serving=False) as core:
        await core.memories.capture(MAIN, "the staging server is called Bluebird")
        assert [h.text for h in await core.finder.search(MAIN, "staging server")] == [
            "the staging server is called Bluebird"
        ]
        assert loads == []  # English only: a command never needs it
        await core.memories.capture(MAIN, "我住在杭州")
        await core.memories.flush(MAIN)
        assert loads == ["dictionary"]  # the first Han text, where it was indexed
    async with MemoryCore.open(config, clock=clock, serving=False) as core:
        await core.finder.search(MAIN, "Bluebird")
    assert loads == ["dictionary"]  # once per process
    loads.clear()
    text._STATE.segmenter = None
    async with MemoryCore.open(config, clock=clock) as core:
        assert loads == ["dictionary"]  # at the open: nothing on its loop waits for it


async def test_a_running_bot_embeds_what_a_command_wrote_at_its_next_write(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command leaves its capture's vector to the next backfill: a bot that is running
    makes it at its own next write to the scope (its look for new chunks finds it)."""
    embedder = ConceptEmbedder()
    monkeypatch.setattr(services, "build_embedder", lambda settings: embedder)
    async with MemoryCore.open(config, clock=clock) as bot:
        await bot.vectors_ready()
        async with MemoryCore.open(config, clock=clock, serving=False) as command:
            await command.memories.capture(MAIN, HOME)
            index = command.guard.index
            assert index is not None and index.vectors is not None
        assert HOME not in embedder.embedded
        await bot.memories.capture(MAIN, "We had dumplings for dinner")
        await bot.memories.flush(MAIN)
        index = bot.guard.index
        assert index is not None and index.vectors is not None
        await index.vectors.drain()
        assert HOME in embedder.embedded
        hits = await bot.finder.search(MAIN, "where do I live")
        assert [h.text for h in hits] == [HOME]  # by its vector alone


async def test_a_serving_open_makes_the_first_search_ready_before_it_returns(
    config: Config, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranking's numpy and the rules of reading a question, which a first search would
    load (a tenth of a second and ~20 ms), and the main scope's entities for query
    expansion are ready when a serving core's open returns, so its first search costs
    what a later one does; a command's core leaves them to the search that needs them."""
    from memory_core.longterm.long_term import LongTermMemory
    from memory_core.recall import query
    from memory_core.recall.index import topk

    warmed: list[str] = []
    monkeypatch.setattr(topk, "warm_up", lambda: warmed.append("numpy"))
    entities = LongTermMemory.entities
    build_query = query.build_query

    def read_question(question: str, **kwargs: object) -> object:
        warmed.append(f"question {query.WARM_QUESTIONS.index(question)}")
        return build_query(question, **kwargs)

    async def read(self: LongTermMemory, scope: ScopeKey) -> list[Entity]:
        warmed.append(f"entities of {scope.value}")
        return await entities(self, scope)

    monkeypatch.setattr(LongTermMemory, "entities", read)
    monkeypatch.setattr(query, "build_query", read_question)
    async with MemoryCore.open(config, clock=clock, serving=False):
        pass
    assert warmed == []
    async with MemoryCore.open(config, clock=clock):
        assert warmed == ["numpy", "question 0", "question 1", f"entities of {MAIN.value}"]
