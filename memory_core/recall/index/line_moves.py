"""Which chunks of a long-term file move to new lines after a write, as runs: chunks next
to each other in the old file that all shift by the same amounts. One entry added near
the top shifts every entry below it alike: one statement then moves them all by their
range, and a re-sort by score moves them by thousands of runs, not row by row
(`long_term_lines.move_kept`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import NamedTuple

from memory_core.base.entries import MemoryEntry
from memory_core.longterm.memory_md_bytes import Segment

Lines = Mapping[str, tuple[int, int]]
Kept = list[tuple[str, int, int]]
"""(ref, line_from, line_to) of the chunks a write keeps."""


class Run(NamedTuple):
    """Chunks whose old first lines lie in `first..last`, every other chunk of the file
    outside that range; each moves by `by_from` (its first line) and `by_to` (its last)."""

    first: int
    last: int
    by_from: int
    by_to: int


def shift_runs(placed: Sequence[tuple[str, int, int]], lines: Lines) -> list[Run]:
    """The runs that move the chunks `placed` ((ref, line_from, line_to) of every chunk
    the file keeps, one ref per first line) to `lines` (ref → new lines), in the order of
    their ranges. A chunk that stays, or whose ref has no new lines (left where it is),
    ends a run: no run's range covers a chunk it must not move."""
    runs: list[Run] = []
    first = last = 0
    shift: tuple[int, int] | None = None
    seen: tuple[int, str] | None = None
    for ref, line_from, line_to in sorted(placed, key=itemgetter(1)):
        if seen is not None and seen[0] == line_from:
            if seen[1] != ref:
                raise ValueError(f"two entries' chunks start on line {line_from}")
            continue  # another piece of the same chunk, moved by its line's range
        seen = (line_from, ref)
        new = lines.get(ref)
        now = None if new is None else (new[0] - line_from, new[1] - line_to)
        if now == (0, 0):
            now = None
        if now is not None and now == shift:
            last = line_from
            continue
        if shift is not None:
            runs.append(Run(first, last, *shift))
        first = last = line_from
        shift = now
    if shift is not None:
        runs.append(Run(first, last, *shift))
    return runs


RANGED_RUNS = 16
"""Up to this many runs are written into the moving statement (each row tests every run's
range, so only a few: an entry added or removed above the rest makes one or two); more (a
re-sort by score: at 100 000 entries, 97 277 chunks in 7 518 runs) go to a table of runs
that each row seeks its own in."""


def kept_lines(
    before: Sequence[MemoryEntry], before_lines: Lines, stale: Sequence[str]
) -> Kept | None:
    """The chunks a write keeps, at their lines in the version it replaced
    (whose chunks the index holds when it is in step with it): every entry of `before`
    not in `stale`. None when that version's lines do not cover them all (the index's
    own rows are read instead)."""
    gone = set(stale)
    kept: Kept = []
    for entry in before:
        if entry.id in gone:
            continue
        at = before_lines.get(entry.id)
        if at is None:
            return None
        kept.append((entry.id, at[0], at[1]))
    return kept


def segment_runs(
    before: Sequence[MemoryEntry],
    before_lines: Lines,
    after_lines: Lines,
    segments: Sequence[Segment],
    stale: Sequence[str],
) -> list[Run] | None:
    """What `shift_runs(kept_lines(before, before_lines, stale), after_lines)` moves, told
    by how the write made the new version (`memory_md_bytes.Segment`) instead of by every
    entry: each range of `before` copied to new lines is one run (adjacent blocks: no other
    chunk starts inside it), and each entry made anew whose chunk stays (its text
    unchanged: a rescore) a run of its own. None when a line is not known (the entries'
    own lines decide then)."""
    gone = set(stale)
    runs: list[Run] = []
    for segment in segments:
        if isinstance(segment, tuple):
            start, stop, shift = segment
            if shift == 0:
                continue
            first = before_lines.get(before[start].id)
            last = before_lines.get(before[stop - 1].id)
            if first is None or last is None:
                return None
            runs.append(Run(first[0], last[0], shift, shift))
            continue
        if segment.id in gone:
            continue
        old = before_lines.get(segment.id)
        if old is None:  # added: its chunk is stored anew
            continue
        new = after_lines.get(segment.id)
        if new is None:
            return None
        if new != old:
            runs.append(Run(old[0], old[0], new[0] - old[0], new[1] - old[1]))
    runs.sort()
    return runs
