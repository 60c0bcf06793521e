"""The postings cache's own rules, without a database (postings_cache.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core.recall.index import postings_cache
from memory_core.recall.index.postings_cache import Arrays, PostingsCache


def arrays(*ids: int) -> Arrays:
    held = np.array(ids, dtype=np.int64)
    return held, np.ones_like(held), np.full_like(held, 3)


def test_a_chunk_added_joins_its_kept_terms_and_a_removed_ones_are_read_again() -> None:
    cache = PostingsCache()
    reads: list[str] = []

    def read(term: str) -> Arrays:
        reads.append(term)
        return arrays(1, 2)

    cache.get(7, "tea", read)
    cache.get(7, "oak", read)
    cache.added(7, [(9, "tea tea green")])  # green is not kept: nothing to add to
    ids, tf, length = cache.get(7, "tea", read)
    assert ids.tolist() == [1, 2, 9] and tf.tolist() == [1, 1, 2] and length.tolist()[-1] == 3
    cache.added(8, [(10, "oak")])  # another scope's chunk
    assert cache.get(7, "oak", read)[0].tolist() == [1, 2]
    cache.removed(7, ["oak kayak"])
    cache.get(7, "oak", read)
    assert reads == ["tea", "oak", "oak"]


def test_another_commit_or_a_schema_change_forgets_everything() -> None:
    cache = PostingsCache()
    cache.check((1, 1))
    cache.get(7, "tea", lambda term: arrays(1))
    cache.check((1, 1))
    assert len(cache) == 1
    cache.check((2, 1))
    assert len(cache) == 0
    cache.get(7, "tea", lambda term: arrays(1))
    cache.check((2, 5))
    assert len(cache) == 0


def test_the_least_recently_used_terms_leave_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postings_cache, "BUDGET", 5)
    cache = PostingsCache()
    cache.get(1, "a", lambda term: arrays(1, 2))
    cache.get(1, "b", lambda term: arrays(1, 2))
    cache.get(1, "a", lambda term: arrays(1, 2))  # a used last
    cache.get(1, "c", lambda term: arrays(1, 2))
    assert len(cache) == 2
    cache.get(1, "huge", lambda term: arrays(*range(9)))  # never kept: over the budget
    assert len(cache) == 2
    reads: list[str] = []

    def read(term: str) -> Arrays:
        reads.append(term)
        return arrays(1)

    cache.get(1, "a", read)
    cache.get(1, "b", read)  # the least recently used when c came
    assert reads == ["b"]
