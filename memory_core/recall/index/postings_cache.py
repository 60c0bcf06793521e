"""Decoded term postings kept in the process between searches, per SQLite connection.

Reading a term's postings out of FTS5 (`fts5vocab` row by row, with each chunk's length)
is most of an exact top N's cost, and the costly terms are the common ones every other
question shares. This keeps what was read, as arrays, for the next search on the same
connection, and keeps it true:

* *this connection's writes* pass through `Fts5Postings.added` / `removed` / `reset`:
  a chunk added is appended to the cached terms it holds (ids only grow, so a chunk is
  new to them); a term of a chunk removed is dropped (read again when asked), and so is
  everything on a reset. A write rolled back can leave only postings of chunks that do
  not exist, or a chunk listed twice: each only raises a chunk's bound, never lowers it,
  and every result is scored from its own tokens, so the top N stays exact.
* *every other connection's commits* (another process, another core of this one) move
  SQLite's `PRAGMA data_version`, and any change of the tables themselves (an FTS table
  dropped or made again, on this connection too) moves `PRAGMA schema_version`; a
  search that sees either moved drops the whole cache.

The cache holds at most `BUDGET` postings, the least recently used terms going first.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from memory_core.base.sql import Connection, data_version

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Arrays = tuple["NDArray[np.int64]", "NDArray[np.int64]", "NDArray[np.int64]"]
"""A term's postings: chunk ids, term frequencies, chunk lengths (see `topk.Postings`)."""
BUDGET = 2_000_000
"""Most postings kept per connection (24 bytes each, three int64 arrays: ~48 MB at
most; a question's common terms at 100 000 chunks hold a few thousand each)."""


class PostingsCache:
    """One connection's decoded postings, by scope and term."""

    def __init__(self) -> None:
        self._terms: OrderedDict[tuple[int, str], Arrays] = OrderedDict()
        self._held = 0
        self._version: tuple[int, int] | None = None

    def __len__(self) -> int:
        return len(self._terms)

    def check(self, version: tuple[int, int]) -> None:
        """Another connection committed, or the schema changed, since the last look
        (`version` moved): forget all."""
        if version != self._version:
            self.clear()
            self._version = version

    def clear(self) -> None:
        self._terms.clear()
        self._held = 0

    def get(self, sid: int, term: str, read: Callable[[str], Arrays]) -> Arrays:
        """The term's postings, read by `read` when not kept."""
        key = (sid, term)
        found = self._terms.get(key)
        if found is not None:
            self._terms.move_to_end(key)
            return found
        found = read(term)
        self._put(key, found)
        return found

    def added(self, sid: int, rows: Iterable[tuple[int, str]]) -> None:
        """(chunk id, tokens) just written to the scope: appended to its kept terms."""
        import numpy as np

        extra: dict[str, tuple[list[int], list[int], list[int]]] = {}
        for chunk_id, tokens in rows:
            words = tokens.split()
            counts: dict[str, int] = {}
            for word in words:
                counts[word] = counts.get(word, 0) + 1
            for word, tf in counts.items():
                if (sid, word) in self._terms:
                    ids, tfs, lengths = extra.setdefault(word, ([], [], []))
                    ids.append(chunk_id)
                    tfs.append(tf)
                    lengths.append(len(words))
        for word, (ids, tfs, lengths) in extra.items():
            key = (sid, word)
            old = self._terms.pop(key)
            self._held -= len(old[0])
            grown: Arrays = (
                np.concatenate([old[0], np.array(ids, dtype=np.int64)]),
                np.concatenate([old[1], np.array(tfs, dtype=np.int64)]),
                np.concatenate([old[2], np.array(lengths, dtype=np.int64)]),
            )
            self._put(key, grown)

    def removed(self, sid: int, tokens: Iterable[str]) -> None:
        """Tokens of chunks about to leave the scope: their terms are read again."""
        for text in tokens:
            for word in set(text.split()):
                old = self._terms.pop((sid, word), None)
                if old is not None:
                    self._held -= len(old[0])

    def _put(self, key: tuple[int, str], arrays: Arrays) -> None:
        size = len(arrays[0])
        if size > BUDGET:
            return
        self._terms[key] = arrays
        self._held += size
        while self._held > BUDGET:
            _, dropped = self._terms.popitem(last=False)
            self._held -= len(dropped[0])


_CACHES: weakref.WeakKeyDictionary[Connection, PostingsCache] = weakref.WeakKeyDictionary()


def cache_of(conn: Connection) -> PostingsCache:
    """The connection's cache, as it is after other connections' commits."""
    cache = _CACHES.get(conn)
    if cache is None:
        cache = _CACHES[conn] = PostingsCache()
    schema = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    cache.check((data_version(conn), schema))
    return cache


def known_cache(conn: Connection) -> PostingsCache | None:
    """The connection's cache if it has one (a write keeps it true; none: nothing to do)."""
    return _CACHES.get(conn)
