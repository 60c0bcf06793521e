"""A serving process that opens on many scopes without their vectors backfills them all;
the scope a search waits on goes to the model first (storage/vectors/precedence.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from memory_core import services
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.storage.vectors.precedence import Precedence
from testkit.embedder import ConceptEmbedder
from testkit.waiting import until
from tests.support import sql

pytestmark = pytest.mark.storage

OTHERS = [ScopeKey(f"peer:user{n}") for n in range(6)]
WANTED = ScopeKey("peer:wanted")
NOTES = 6


class GatedEmbedder(ConceptEmbedder):
    """Chunks wait at a gate the test opens; `calls` counts the calls that reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.calls = 0

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> npt.NDArray[np.float32]:
        if not query:
            self.calls += 1
            await self.gate.wait()
        return await super().embed(texts, query=query)


def owner(text: str) -> str:
    return text.split()[0]


async def test_the_scope_a_search_waits_on_is_embedded_first(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    words_only = config.model_copy(
        update={"embedding": config.embedding.model_copy(update={"provider": "none"})}
    )
    async with MemoryCore.open(words_only) as core:
        for scope in [*OTHERS, WANTED]:
            for n in range(NOTES):
                await core.notes.append(scope, f"{scope.value} note {n} about the garden")
    embedder = GatedEmbedder()
    monkeypatch.setattr(services, "build_embedder", lambda settings: embedder)
    two_a_call = config.model_copy(
        update={"embedding": config.embedding.model_copy(update={"batch_size": 2})}
    )
    async with MemoryCore.open(two_a_call) as core:
        # Every scope's backfill started at the open; each has its first batch at the gate.
        await until(lambda: embedder.calls >= len(OTHERS) + 1, what="first batches at the gate")
        [(sid,)] = await sql(core, "SELECT id FROM scopes WHERE key = ?", WANTED.value)
        index = core.guard.index
        assert index is not None and index.vectors is not None
        waiting = asyncio.create_task(index.vectors.settle(int(sid), 60.0))
        await asyncio.sleep(0)
        embedder.gate.set()
        assert await waiting
        await core.vectors_ready()
    order = [owner(text) for text in embedder.embedded]
    assert order.count(WANTED.value) == NOTES
    # The first batches were at the gate together; after them, the wanted scope's
    # batches all come before any other scope's second one.
    firsts = 2 * (len(OTHERS) + 1)
    assert set(order[firsts : firsts + NOTES - 2]) == {WANTED.value}, order


async def test_precedence_lets_the_others_go_once_the_waited_scope_is_done() -> None:
    precedence = Precedence()
    precedence.waited_on(7)
    await asyncio.wait_for(precedence.turn(7), 1)  # the waited-on scope goes at once
    other = asyncio.create_task(precedence.turn(3))
    await asyncio.sleep(0)
    assert not other.done()
    precedence.done(7)
    await asyncio.wait_for(other, 1)
    precedence.waited_on(5)
    closing = asyncio.create_task(precedence.turn(3))
    precedence.release()
    await asyncio.wait_for(closing, 1)
