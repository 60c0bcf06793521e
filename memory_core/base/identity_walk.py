"""Two versions of a list walked by object identity: which places of each hold no object
paired with the same object in the other. A write keeps nearly every entry of a large
file as the very same object, in the same order, so the runs of kept objects are passed
in C and only the few places a write changed are looked at (the index's version
comparison, the entity tracker). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from operator import indexOf, is_

_END_OLD = object()
_END_NEW = object()


def unpaired(
    old: Sequence[object], new: Sequence[object], window: int, most_stops: int
) -> tuple[list[int], list[int]] | None:
    """(places of `old`, places of `new`) outside a common subsequence of the same
    objects in the same order; None after more than `most_stops` stops (the versions are
    not aligned: comparing by id is then cheaper).

    At each stop an entry was removed or put in (the other side's entry is found within
    `window` places on), or else both entries are taken as replaced. An entry kept as the
    same object but moved is unpaired on both sides. Any common subsequence serves the
    callers; a longer one leaves them fewer places to look at."""
    gone: list[int] = []
    came: list[int] = []
    olds = [*old, _END_OLD]
    news = [*new, _END_NEW]
    it_old, it_new = iter(olds), iter(news)
    same = map(is_, it_old, it_new)
    i = j = stops = 0
    while True:
        step = indexOf(same, False)  # olds[i + step] and news[j + step] differ (taken)
        i += step
        j += step
        x, y = olds[i], news[j]
        if x is _END_OLD or y is _END_NEW:
            gone.extend(range(i, len(old)))
            came.extend(range(j, len(new)))
            return gone, came
        stops += 1
        if stops > most_stops:
            return None
        for ahead in range(1, window + 1):
            if i + ahead < len(olds) and olds[i + ahead] is y:
                gone.extend(range(i, i + ahead))
                for _ in range(ahead):
                    next(it_old)
                i, j = i + ahead + 1, j + 1
                break
            if j + ahead < len(news) and news[j + ahead] is x:
                came.extend(range(j, j + ahead))
                for _ in range(ahead):
                    next(it_new)
                i, j = i + 1, j + ahead + 1
                break
        else:  # both replaced (or moved)
            gone.append(i)
            came.append(j)
            i, j = i + 1, j + 1
