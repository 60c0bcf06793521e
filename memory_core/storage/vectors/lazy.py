"""Dense recall for a process that runs one command and exits: the vectors a scope
already has, and those its search makes first when that is cheap.

A command (`chatmem capture`, `status`, `search`, ...) lives a fraction of a second; the
vector index costs it numpy (~0.1 s to import) and the model (its weights) before it
could embed a thing. So a command's index (`SearchIndex.vectors`) is this object
instead, which imports neither until a search needs vectors: then the real index
(index.py, or pgvector's) is built and does the rest exactly as in a bot, `settle`
included, so the command ranks with the same vectors a bot would.

Its writes are not embedded here (`schedule` does nothing): `capture` and the like end
without loading a model. A search makes what is missing first (`catch_up`, which the
command calls before it searches): the scope's chunks and vectors are counted (one
indexed count), and where chunks lack vectors the real index is built, the scope
surveyed, and the missing vectors made, unless the model would have to make more than
the command allows (`embedding.command_backfill_max`). Then, or when the model fails,
the scope is ranked by words alone for the rest of the command (`searches`), which says
so; a serving process (bot, TUI, MCP server), or `chatmem vectors`, makes them. So a
workspace only ever used from the command line ranks as a bot's would, and a search's
top hits do not depend on which process ran last.

It is built on first use, by services.py (whose docstring lists what is, and why):
building it at the open is what costs the command its start-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from memory_core.base.errors import DatabaseBusy, DatabaseUnwritable
from memory_core.base.sql import Db
from memory_core.embedding.base import Embedder
from memory_core.storage.interfaces import CatchUp, Progress, VectorSearch
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
        self._by_words: set[int] = set()
        """Scopes this command ranks by words alone (`catch_up` made none)."""

    @property
    def built(self) -> bool:
        """Whether a search has built the real index (tests, benches)."""
        return self._index is not None

    async def searches(self, scope_id: int) -> bool:
        """Only a scope that has vectors of this model (found once per process), unless
        `catch_up` left it to words."""
        if scope_id in self._by_words:
            return False
        known = self._has_vectors.get(scope_id)
        if known is None:
            check = partial(rows.has_any, sid=scope_id, model=self._embedder.name)
            known = self._has_vectors[scope_id] = await self._db.read(check)
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

    async def catch_up(
        self, scope_id: int, *, most: int | None, progress: Progress | None = None
    ) -> CatchUp:
        """Make the scope's missing vectors before a search, within `most` (the module
        docstring); a scope whose count shows none missing costs one indexed count and
        loads nothing."""
        check = partial(rows.coverage, sid=scope_id, model=self._embedder.name)
        chunks, vectors = await self._db.read(check)
        if vectors >= chunks:  # a drift the count cannot see is the search's `settle`'s
            return CatchUp(missing=0, made=0, done=True)
        try:
            result = await (await self._real()).catch_up(scope_id, most=most, progress=progress)
        except (DatabaseBusy, DatabaseUnwritable) as exc:  # the index is sound: words answer
            result = CatchUp(missing=chunks - vectors, made=0, done=False, failure=str(exc))
        if result.done:
            self._has_vectors[scope_id] = True
            self._by_words.discard(scope_id)
        else:
            self._by_words.add(scope_id)
        return result

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
