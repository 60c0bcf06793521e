"""Which entries of a long-term file the index must tokenize again, and which of its
chunks go: pure, and run in a worker thread (on a 100 000-entry file the comparison
alone is most of a second of CPU, which a bot's event loop must not wait through)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from operator import attrgetter

from memory_core.base.chunks import Chunk
from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.base.identity_walk import unpaired
from memory_core.longterm.claims import shown
from memory_core.recall.index.files import tokenize_chunks

Lines = Mapping[str, tuple[int, int]]

_FEWEST_GAPS = 64
"""Stops of the walk by identity before `between_versions` compares entry by entry: one
costs a few microseconds, a hundredth of the entries is ~10 ms on 100 000."""
_WINDOW = 48
"""How far ahead a resync looks for the entry it lost (a moved entry's old and new
places are apart, but each shifts the others by one only)."""


def between_versions(
    before: Sequence[MemoryEntry], after: Sequence[MemoryEntry]
) -> tuple[list[str], list[MemoryEntry]]:
    """(ids whose chunks go: entries removed or shown differently, in `before`'s order;
    entries to tokenize: added or shown differently, in `after`'s order). An entry a
    write kept as the same object is unchanged without comparing its text.

    A write keeps nearly every entry as the very same object, in the same order: a walk
    by identity in C (`identity_walk.unpaired`) finds the few it did not keep. The entries of an id none
    of those carry are the same objects in the same order in both versions, so its last
    entry is the same object in both: unchanged. Only the entries of the other ids are
    compared, as `_between` compares all, which gives the same answer in the same order
    (ids twice and objects twice included).
    """
    ahead = before if isinstance(before, list) else list(before)
    behind = after if isinstance(after, list) else list(after)
    budget = max(_FEWEST_GAPS, (len(ahead) + len(behind)) // 100)
    walked = unpaired(ahead, behind, _WINDOW, budget)
    if walked is None:  # far apart: the plain comparison is as cheap
        return _between(ahead, behind)
    gone = [ahead[place] for place in walked[0]]
    added = [behind[place] for place in walked[1]]
    if not gone and not added:
        return [], []
    ids = {e.id for e in gone}
    ids.update(e.id for e in added)
    carried = list(compress(ahead, map(ids.__contains__, map(_id_of, ahead))))
    if len(carried) == len(gone):
        # No kept entry carries one of those ids in `before`, nor then in `after`: a
        # kept entry is the same object at its place in both.
        return _between(gone, added)
    return _between(carried, list(compress(behind, map(ids.__contains__, map(_id_of, behind)))))


def _between(
    before: Sequence[MemoryEntry], after: Sequence[MemoryEntry]
) -> tuple[list[str], list[MemoryEntry]]:
    """`between_versions`, entry by entry."""
    old = {e.id: e for e in before}
    new = {e.id: e for e in after}
    stale = [i for i, e in old.items() if _changed(e, new.get(i))]
    fresh = [e for i, e in new.items() if _changed(e, old.get(i))]
    return stale, fresh


_id_of = attrgetter("id")


def against_chunks(
    held: Mapping[str, tuple[str, str]], entries: Sequence[MemoryEntry]
) -> tuple[list[str], list[MemoryEntry]]:
    """The same against what the index holds (ref → (text, created_at) of each chunk):
    chunks whose entry is gone or differs, and entries with no chunk or a stale one."""
    now = {e.id: (shown(e), format_when(e.created_at)) for e in entries}
    stale = [ref for ref, was in held.items() if now.get(ref) != was]
    changed = set(stale)
    return stale, [e for e in entries if e.id not in held or e.id in changed]


def prepared(fresh: Sequence[MemoryEntry], lines: Lines) -> list[tuple[Chunk, str]]:
    """The chunks of `fresh` at their lines in the new version, tokenized."""
    return tokenize_chunks(
        [Chunk(*lines.get(e.id, (0, 0)), shown(e), e.created_at, ref=e.id) for e in fresh]
    )


def _changed(entry: MemoryEntry, other: MemoryEntry | None) -> bool:
    return other is None or (other is not entry and shown(other) != shown(entry))
