"""Which chunks of a long-term file move to new lines after a write, as runs: chunks next
to each other in the old file that all shift by the same amounts. One entry added near
the top shifts every entry below it alike: one statement then moves them all instead of
one per chunk (`writes.move_kept`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, compress, filterfalse, islice, pairwise
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
    the file keeps, one ref per first line) to `lines` (ref → new lines); None as soon
    as there are more than `most`. A chunk that stays, or whose ref has no new lines
    (left where it is), ends a run: no run's range covers a chunk it must not move.

    The chunks are gone through in line order, by windows of growing size (a re-sort
    passes `most` within its first thousand chunks), each by C-level passes over whole
    lists; Python code runs only where the shift changes."""
    ordered = sorted(placed, key=itemgetter(1))
    runs: list[Run] = []
    going: list[int] | None = None  # first, last, by_from, by_to of the run going on
    head: tuple[str, int, int] | None = None  # the first chunk of the last line seen
    low, size = 0, len(ordered) if most is None else _FIRST_WINDOW
    while low < len(ordered):
        window = ordered[low : low + size]
        low, size = low + size, size * 4
        segments, refused = _segments(window, head, lines)
        head = window[-1] if head is None or window[-1][1] != head[1] else head
        for first, last, by_from, by_to in segments:
            if going is not None and (by_from, by_to) == (going[2], going[3]):
                going[1] = last
                continue
            if going is not None:
                runs.append(Run(*going))
                if most is not None and len(runs) > most:
                    return None
            going = [first, last, by_from, by_to] if by_from or by_to else None
        if refused is not None:
            raise ValueError(f"two entries' chunks start on line {refused}")
    if going is not None:
        runs.append(Run(*going))
    return None if most is not None and len(runs) > most else runs


_FIRST_WINDOW = 1024
"""Chunks in the first window when at most `most` runs are wanted (each next window is
four times larger): a re-sort is refused after a few, a capture goes through all."""


def _segments(
    window: list[tuple[str, int, int]], head: tuple[str, int, int] | None, lines: Lines
) -> tuple[list[tuple[int, int, int, int]], int | None]:
    """(first line, last line, by_from, by_to) of each stretch of `window`'s chunks
    (in line order, after the chunk `head`) that move alike, up to a line shared by two
    refs (its number, or None when there is none). Another chunk of the line before it
    is left out: a piece of the same chunk, moved by its line's range."""
    starts = list(map(itemgetter(1), window))
    repeats = list(
        compress(range(len(window)), map(eq, starts, [None if head is None else head[1], *starts]))
    )
    refused = None
    if repeats:
        window, refused = _one_per_line(window, repeats, head)
        starts = list(map(itemgetter(1), window))
    # A ref with no new lines is given its own: it stays, as one whose lines are the same.
    new = list(map(lines.get, map(itemgetter(0), window), map(itemgetter(1, 2), window)))
    by_from = list(map(sub, map(itemgetter(0), new), starts))
    by_to = list(map(sub, map(itemgetter(1), new), map(itemgetter(2), window)))
    changes = compress(
        range(1, len(window)),
        map(
            or_, map(ne, islice(by_from, 1, None), by_from), map(ne, islice(by_to, 1, None), by_to)
        ),
    )
    bounds = [0, *changes, len(window)] if window else []
    return [
        (starts[first], starts[stop - 1], by_from[first], by_to[first])
        for first, stop in pairwise(bounds)
    ], refused


def _one_per_line(
    window: list[tuple[str, int, int]], repeats: list[int], head: tuple[str, int, int] | None
) -> tuple[list[tuple[str, int, int]], int | None]:
    """The chunks of `window` without the places `repeats` (each on the line of the
    chunk before it, `head` before the first), up to the first chunk with another ref
    than the first of its line; and that chunk's line, or None."""
    refused = None
    end = len(window)
    first = head
    for dropped, place in enumerate(repeats):
        if place > 0 and (dropped == 0 or repeats[dropped - 1] != place - 1):
            first = window[place - 1]
        if first is None or window[place][0] != first[0]:
            refused, end = window[place][1], place
            break
    bounds = [-1, *(r for r in repeats if r < end), end]
    parts = (window[a + 1 : b] for a, b in pairwise(bounds))
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
    kept: Sequence[tuple[str, int, int]], lines: Mapping[str, tuple[int, int]]
) -> list[tuple[str, int, int]]:
    """(ref, line_from, line_to) of each kept chunk whose entry has other lines now, in
    `kept`'s order: whole-list passes (a re-sort moves most of 100 000)."""
    refs = list(map(itemgetter(0), kept))
    was = list(map(itemgetter(1, 2), kept))
    now = list(map(lines.get, refs, was))  # no new lines: left where it is
    moved = list(map(ne, now, was))
    placed = list(compress(now, moved))
    return list(
        zip(
            compress(refs, moved),
            map(itemgetter(0), placed),
            map(itemgetter(1), placed),
            strict=True,
        )
    )
