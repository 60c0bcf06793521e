"""The order in which a file's chunks move to their new lines, each once.

The schema keeps one chunk per (scope, path, line, piece) at every row. Moving chunks
through lines no file has (park, then place) updates each row and both of its line
indexes twice; a write of a 100 000-entry file whose scores re-sorted it moves tens of
thousands of chunks. Moved in an order where each target is already free, a chunk is
updated once; only a cycle of chunks taking each other's lines parks one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Move = tuple[int, int, int]
"""(line_from, line_to, chunk id): one UPDATE, in order."""


def ordered_moves(
    placed: Iterable[tuple[int, object, int, int, int]], lines: Mapping[str, tuple[int, int]]
) -> list[Move]:
    """The updates that bring every chunk of one file `placed` ((id, ref, line_from,
    line_to, piece)) to its entry's `lines`, ordered so that no update meets a line a
    chunk still holds. A chunk whose ref `lines` lacks, or that stays, is not moved (its
    line stays held). A parked chunk goes to `-1 - id`, a line no file has."""
    holder: dict[tuple[int, int], int] = {}
    wanted: dict[int, tuple[tuple[int, int], int, int]] = {}
    for chunk_id, ref, line_from, line_to, piece in placed:
        holder[(line_from, piece)] = chunk_id
        target = lines.get(str(ref))
        if target is not None and target != (line_from, line_to):
            wanted[chunk_id] = ((line_from, piece), target[0], target[1])
    waiting: dict[tuple[int, int], int] = {}
    ready: list[int] = []
    for chunk_id, (_, new_from, _) in wanted.items():
        goal = (new_from, wanted[chunk_id][0][1])
        if goal in holder:
            waiting[goal] = chunk_id
        else:
            ready.append(chunk_id)
    out: list[Move] = []
    parked: set[int] = set()
    done: set[int] = set()

    def place(chunk_id: int) -> None:
        # Moves it and, one after the other, every chunk that waited for a line freed.
        follower: int | None = chunk_id
        while follower is not None:
            old, new_from, new_to = wanted[follower]
            out.append((new_from, new_to, follower))
            done.add(follower)
            if follower not in parked:
                del holder[old]
            holder[(new_from, old[1])] = follower
            follower = waiting.pop(old, None)

    for chunk_id in ready:
        place(chunk_id)
    for chunk_id, (old, new_from, new_to) in wanted.items():
        if chunk_id in done:
            continue
        # A cycle of chunks taking each other's lines: this one parks, the others follow
        # into the line it frees, and it takes the last line freed.
        out.append((-1 - chunk_id, new_to, chunk_id))
        parked.add(chunk_id)
        del holder[old]
        waiting.pop((new_from, old[1]), None)
        follower = waiting.pop(old, None)
        if follower is not None:
            place(follower)
        place(chunk_id)
    return out
