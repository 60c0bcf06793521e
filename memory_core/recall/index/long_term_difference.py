"""Which entries of a long-term file the index must tokenize again, and which of its
chunks go: pure, and run in a worker thread (on a 100 000-entry file the comparison
alone is most of a second of CPU, which a bot's event loop must not wait through)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memory_core.base.chunks import Chunk
from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.longterm.claims import shown
from memory_core.recall.index.files import tokenize_chunks

Lines = Mapping[str, tuple[int, int]]


def between_versions(
    before: Sequence[MemoryEntry], after: Sequence[MemoryEntry]
) -> tuple[list[str], list[MemoryEntry]]:
    """(ids whose chunks go: entries removed or shown differently, in `before`'s order;
    entries to tokenize: added or shown differently, in `after`'s order). An entry a
    write kept as the same object is unchanged without comparing its text."""
    old = {e.id: e for e in before}
    new = {e.id: e for e in after}
    stale = [i for i, e in old.items() if _changed(e, new.get(i))]
    fresh = [e for i, e in new.items() if _changed(e, old.get(i))]
    return stale, fresh


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
