"""Which chunks of a long-term file move to new lines after a write, as runs: chunks next
to each other in the old file that all shift by the same amounts. One entry added near
the top shifts every entry below it alike: one statement then moves them all instead of
one per chunk (`writes.move_kept`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, compress, filterfalse, islice, pairwise, repeat
from operator import attrgetter, eq, itemgetter, ne, or_, sub
from typing import NamedTuple

from memory_core.base.entries import MemoryEntry

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


def shift_runs(
    placed: Sequence[tuple[str, int, int]], lines: Lines, most: int | None = None
) -> list[Run] | None:
    """The runs that move the chunks `placed` ((ref, line_from, line_to) of every chunk
    the file keeps, one ref per first line) to `lines` (ref → new lines); None when there
    are more than `most`. A chunk that stays, or whose ref has no new lines (left where
    it is), ends a run: no run's range covers a chunk it must not move.

    Each chunk's shift is found by C-level passes over whole lists; Python code runs only
    where the shift changes (a capture makes one or two runs, a re-sort thousands)."""
    ordered = sorted(placed, key=itemgetter(1))
    starts = list(map(itemgetter(1), ordered))
    repeats = list(compress(range(1, len(ordered)), map(eq, islice(starts, 1, None), starts)))
    refused: tuple[int, int] | None = None
    if repeats:  # more pieces of one chunk, each moved by its line's range
        ordered, refused = _one_per_line(ordered, repeats)
        starts = list(map(itemgetter(1), ordered))
    refs = list(map(itemgetter(0), ordered))
    # A ref with no new lines is given its own: it stays, as one whose lines are the same.
    new = list(map(lines.get, refs, map(itemgetter(1, 2), ordered)))
    by_from = list(map(sub, map(itemgetter(0), new), starts))
    by_to = list(map(sub, map(itemgetter(1), new), map(itemgetter(2), ordered)))
    changes = compress(
        range(1, len(ordered)),
        map(
            or_, map(ne, islice(by_from, 1, None), by_from), map(ne, islice(by_to, 1, None), by_to)
        ),
    )
    bounds = [0, *changes, len(ordered)] if ordered else []
    moving = [(first, stop) for first, stop in pairwise(bounds) if by_from[first] or by_to[first]]
    if refused is not None:
        # The chunks are gone through in line order: the runs that ended before the
        # refused line may already have been too many.
        cut, line = refused
        if most is not None and sum(stop < cut for _, stop in moving) > most:
            return None
        raise ValueError(f"two entries' chunks start on line {line}")
    if most is not None and len(moving) > most:
        return None
    return [Run(starts[f], starts[s - 1], by_from[f], by_to[f]) for f, s in moving]


def _one_per_line(
    ordered: list[tuple[str, int, int]], repeats: list[int]
) -> tuple[list[tuple[str, int, int]], tuple[int, int] | None]:
    """The chunks in line order without the places `repeats` (another chunk of the
    same line before each), and, when one of them has another ref than the first of
    its line, (how many chunks of distinct lines precede it, its line)."""
    refused = None
    first = 0
    for dropped, place in enumerate(repeats):
        if dropped == 0 or repeats[dropped - 1] != place - 1:
            first = place - 1
        if ordered[place][0] != ordered[first][0]:
            refused = (place - dropped, ordered[place][1])
            break
    bounds = [-1, *repeats, len(ordered)]
    parts = (ordered[a + 1 : b] for a, b in pairwise(bounds))
    return list(chain.from_iterable(parts)), refused


RANGED_RUNS = 16
"""Up to this many runs move in one statement (each row tests every run's range, so only
a few: an entry added or removed above the rest makes one or two); more (a re-sort by
score: at 100 000 entries, 97 425 chunks in 9 606 runs) move row by row."""


def kept_lines(
    before: Sequence[MemoryEntry], before_lines: Lines, stale: Sequence[str]
) -> Kept | None:
    """The chunks a write keeps, at their lines in the version it replaced
    (whose chunks the index holds when it is in step with it): every entry of `before`
    not in `stale`. None when that version's lines do not cover them all (the index's
    own rows are read instead). Whole-list passes: a large file keeps 100 000 chunks."""
    refs = list(map(attrgetter("id"), before))
    if stale:
        refs = list(filterfalse(set(stale).__contains__, refs))
    try:
        at = list(map(before_lines.__getitem__, refs))
    except KeyError:
        return None
    return list(zip(refs, map(itemgetter(0), at), map(itemgetter(1), at), strict=True))


def moved_rows(
    kept: Sequence[tuple[str, int, int]],
    lines: Mapping[str, tuple[int, int]],
    sid: int,
    path: str,
) -> list[tuple[int, int, int, str, str]]:
    """(line_from, line_to, sid, path, ref) of each kept chunk whose entry has other
    lines now, in `kept`'s order: whole-list passes (a re-sort moves most of 100 000)."""
    refs = list(map(itemgetter(0), kept))
    was = list(map(itemgetter(1, 2), kept))
    now = list(map(lines.get, refs, was))  # no new lines: left where it is
    moved = list(map(ne, now, was))
    placed = list(compress(now, moved))
    return list(
        zip(
            map(itemgetter(0), placed),
            map(itemgetter(1), placed),
            repeat(sid),
            repeat(path),
            compress(refs, moved),
        )
    )
