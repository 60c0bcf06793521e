"""The session-level recall cache (TTL 30 minutes).

A chat turn, the TUI's refresh and a tool call may ask the same recall again within
moments; the answer only changes when the scope is written to, so an entry stands while
its `mark` (the index's write marks) is unchanged and it is younger than the TTL.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from memory_core.base.clock import Monotonic

T = TypeVar("T")

MAX_ENTRIES = 512


class RecallCache(Generic[T]):
    def __init__(
        self,
        ttl_seconds: float,
        max_entries: int = MAX_ENTRIES,
        *,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self._ttl = ttl_seconds
        self._max = max_entries
        self._monotonic = monotonic
        self._entries: OrderedDict[Hashable, tuple[float, Hashable, T]] = OrderedDict()

    def get(self, key: Hashable, mark: Hashable | None) -> T | None:
        """The cached value, if its mark is `mark` and it has not expired."""
        if mark is None or self._ttl <= 0:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, stored_mark, value = entry
        if stored_mark != mark or self._monotonic() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, mark: Hashable | None, value: T) -> None:
        if mark is None or self._ttl <= 0:
            return
        self._entries[key] = (self._monotonic() + self._ttl, mark, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
