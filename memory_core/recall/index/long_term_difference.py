"""Which entries of a long-term file the index must tokenize again, and which of its
chunks go: pure, and run in a worker thread (on a 100 000-entry file the comparison
alone is most of a second of CPU, which a bot's event loop must not wait through)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import compress, islice, repeat
from operator import attrgetter, indexOf, is_, is_not

from memory_core.base.chunks import Chunk
from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.longterm.claims import shown
from memory_core.recall.index.files import tokenize_chunks

Lines = Mapping[str, tuple[int, int]]

_FEWEST_GAPS = 64
"""Gaps in the walk by identity before `between_versions` compares entry by entry: one
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
    by identity in C (`_unkept`) finds the few it did not keep. The entries of an id none
    of those carry are the same objects in the same order in both versions, so its last
    entry is the same object in both: unchanged. Only the entries of the other ids are
    compared, as `_between` compares all, which gives the same answer in the same order
    (ids twice and objects twice included).
    """
    ahead = before if isinstance(before, list) else list(before)
    behind = after if isinstance(after, list) else list(after)
    unkept = _unkept(ahead, behind, max(_FEWEST_GAPS, (len(ahead) + len(behind)) // 100))
    if unkept is None:  # far apart: the plain comparison is as cheap
        return _between(ahead, behind)
    gone, added = unkept
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


def _unkept(
    before: list[MemoryEntry], after: list[MemoryEntry], budget: int
) -> tuple[list[MemoryEntry], list[MemoryEntry]] | None:
    """(entries of `before`, of `after`) outside a common subsequence of the same objects
    in the same order; None after more than `budget` gaps. Any common subsequence will
    do for `between_versions`; a longer one leaves fewer entries to compare."""
    gone: list[MemoryEntry] = []
    added: list[MemoryEntry] = []
    i = j = 0
    while True:
        try:
            step = indexOf(map(is_not, _from(before, i), _from(after, j)), True)
        except ValueError:  # one ran out: the rest of the other is not kept
            step = min(len(before) - i, len(after) - j)
            gone += before[i + step :]
            added += after[j + step :]
            return gone, added
        i += step
        j += step
        budget -= 1
        if budget < 0:
            return None
        in_before = _find(before, after[j], i + 1)
        in_after = _find(after, before[i], j + 1)
        if in_before is not None and (in_after is None or in_before - i <= in_after - j):
            gone += before[i:in_before]
            i = in_before
        elif in_after is not None:
            added += after[j:in_after]
            j = in_after
        else:
            gone.append(before[i])
            added.append(after[j])
            i += 1
            j += 1


def _from(items: list[MemoryEntry], start: int) -> Iterator[MemoryEntry]:
    """The items from `start` on, without a copy (a list iterator set to `start`)."""
    it = iter(items)
    it.__setstate__(start)  # type: ignore[attr-defined]
    return it


def _find(items: list[MemoryEntry], entry: MemoryEntry, start: int) -> int | None:
    """Where `entry` itself is among the `_WINDOW` items from `start`, if it is."""
    try:
        return start + indexOf(map(is_, islice(_from(items, start), _WINDOW), repeat(entry)), True)
    except ValueError:
        return None


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
