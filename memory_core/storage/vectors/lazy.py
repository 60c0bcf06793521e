"""Dense recall for a process that runs one command and exits: the vectors a scope
already has, and none made for what the command writes.

A command (`chatmem capture`, `status`, `search`, ...) lives a fraction of a second; the
vector index costs it numpy (~0.1 s to import) and the model (its weights) before it
could embed a thing. So a command's index (`SearchIndex.vectors`) is this object
instead, which imports neither until a search meets a scope that has vectors of the
model (one indexed row looked up): then the real index (index.py, or pgvector's) is
built and does the rest exactly as in a bot, `settle` included, so the command ranks
with the same vectors a bot would, the chunks its own writes added embedded first.

Its writes are not embedded here (`schedule` does nothing): the chunks wait, as they
would for a bot whose embedder is failing, for the next backfill of the scope: a
serving process (bot, TUI, MCP server) backfills every scope when it starts, and a
scope at its own next write there (the backfill's look for new chunks finds the
command's too), and a command's search of a scope with vectors catches the scope up
before it compares (`settle`). Until then recall finds them by
their words. A scope that has no vectors at all (a workspace only ever used from the
command line) is ranked by words alone, as it would be without an embedder.

This is the one part built on first use (services.py builds every other part when the
workspace opens): building it at the open is what costs the command its start-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from memory_core.base.sql import Db
from memory_core.embedding.base import Embedder
from memory_core.storage.interfaces import VectorSearch
from memory_core.storage.vectors import rows


class LazyVectors:
    """A `VectorSearch` that builds the real one (`build()`) at the first search of a
    scope with vectors; until then it holds only the embedder, unloaded."""

    def __init__(
        self, db: Db, embedder: Embedder, build: Callable[[], Awaitable[VectorSearch]]
    ) -> None:
        """`build` makes the real index over the same database and embedder (which it
        then owns and closes)."""
        self._db = db
        self._embedder = embedder
        self._build = build
        self._index: VectorSearch | None = None
        self._has_vectors: dict[int, bool] = {}

    @property
    def built(self) -> bool:
        """Whether a search has built the real index (tests, benches)."""
        return self._index is not None

    async def searches(self, scope_id: int) -> bool:
        """Only a scope that has vectors of this model (found once per process)."""
        known = self._has_vectors.get(scope_id)
        if known is None:
            check = partial(rows.has_any, sid=scope_id, model=self._embedder.name)
            known = self._has_vectors[scope_id] = await self._db.call(check)
        return known

    async def _real(self) -> VectorSearch:
        if self._index is None:
            self._index = await self._build()
        return self._index

    async def embed_query(self, text: str) -> Any:
        return await (await self._real()).embed_query(text)

    async def search(
        self,
        scope_id: int,
        query: Any,
        k: int,
        *,
        kinds: Sequence[str] | None = None,
        exclude_paths: Sequence[str] = (),
    ) -> list[tuple[int, float]]:
        index = await self._real()
        return await index.search(scope_id, query, k, kinds=kinds, exclude_paths=exclude_paths)

    async def similarities(self, scope_id: int, query: Any, ids: Sequence[int]) -> dict[int, float]:
        return await (await self._real()).similarities(scope_id, query, ids)

    async def moved_toward(
        self, scope_id: int, query: Any, ids: Sequence[int], weight: float
    ) -> Any:
        return await (await self._real()).moved_toward(scope_id, query, ids, weight)

    def schedule(self, scope_id: int) -> None:
        """Nothing: a command leaves its writes' vectors to the next backfill (above)."""

    async def settle(self, scope_id: int, within: float) -> bool:
        if not await self.searches(scope_id):
            return True  # nothing to compare with, and nothing this process would make
        return await (await self._real()).settle(scope_id, within)

    def invalidate(self, scope_id: int | None = None) -> None:
        if scope_id is None:
            self._has_vectors.clear()
        else:
            self._has_vectors.pop(scope_id, None)
        if self._index is not None:
            self._index.invalidate(scope_id)

    async def forget(self) -> None:
        # A purge must drop the stored vectors and graph files whether or not this
        # command searched: the real index is built for it (purges are rare).
        await (await self._real()).forget()

    async def drain(self) -> None:
        if self._index is not None:
            await self._index.drain()

    async def close(self) -> None:
        if self._index is not None:
            await self._index.close()  # closes the embedder too
        else:
            await self._embedder.close()
