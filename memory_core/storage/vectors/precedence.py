"""Which scopes' backfills go to the model first: the ones a search is waiting on.

A serving process that opens on many scopes without their vectors (a new model, vectors
just turned on) starts a backfill for every scope. Without an order, the scope a person
is searching waits behind all the others' batches, and its searches rank with the few
vectors made so far for as long as the whole workspace takes. Here a backfill nobody
waits for gives way, before each model call, while any scope a search waits on still has
one under way; among themselves the waited-on scopes, and the others, go as they come.
"""

from __future__ import annotations

import asyncio


class Precedence:
    def __init__(self) -> None:
        self._waited: set[int] = set()
        self._none_waited = asyncio.Event()
        self._none_waited.set()

    def waited_on(self, scope_id: int) -> None:
        """A search waits for the scope's backfill under way."""
        self._waited.add(scope_id)
        self._none_waited.clear()

    def done(self, scope_id: int) -> None:
        """The scope's backfill ended (caught up, failed, or closing)."""
        self._waited.discard(scope_id)
        if not self._waited:
            self._none_waited.set()

    def release(self) -> None:
        """Closing: nobody gives way any more."""
        self._waited.clear()
        self._none_waited.set()

    async def turn(self, scope_id: int) -> None:
        """Return when the scope's next batch may use the model."""
        while self._waited and scope_id not in self._waited:
            await self._none_waited.wait()
