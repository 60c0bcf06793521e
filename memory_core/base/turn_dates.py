"""Pure: the days a turn speaks of ("last Friday", "two weeks ago", "上周五", "去年五月").

"I went there last Friday", said on Monday 13 February 2023, is about 10 February; a
question about 10 February should find it, though the turn was stored on the 13th. So when
a turn is stored (a message, a line of an archive file, a daily note), its time
expressions are resolved against its own local date (`when.time_mentions`, the parsers
that read questions, plus times to come, and the starts its durations point at:
`durations.starts`) and kept with its chunk as a few ranges of local dates. Ranking then
treats the turn as of those days too (`rerank.time_factor`).

Only what names a day, a week or a month is kept, and a point counted back from the turn
("three years ago", "two years now", "三年前", "已经两年了"), as wide as its unit:
"recently", "these days", "the last three months", a bare year or "去年" / "last year" as
the whole year would put a turn inside nearly every question's window (kept, they gained
nothing on the quality bench).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime, tzinfo

from memory_core.base.durations import starts
from memory_core.base.when import time_mentions

__all__ = ["DayRanges", "decode_days", "encode_days", "mentioned_days", "merged", "overlaps"]

DayRanges = tuple[tuple[date, date], ...]
"""Inclusive (first, last) local dates, sorted, none overlapping another."""

MAX_RANGES = 4
"""Ranges kept per chunk, the narrowest first: a long text naming many dates is a list,
not a turn about each of them."""
WIDEST_DAYS = 31
"""A range wider than a month says too little to lift a turn into a question's window."""
WIDEST_POINT_DAYS = 366
"""A point counted back in years ("three years ago", "已经两年了") is a year wide: it names
one time, only less precisely, and answers "when did she start?"."""
_POINT_KINDS = frozenset({"en_ago", "zh_ago"})
MAX_CHARS = 4000
"""A turn is read from its first this many characters (a pasted document is no turn)."""
_VAGUE_KINDS = frozenset({"en_span", "zh_span"})
"""'The last two weeks', '最近三个月': everything up to now."""
_VAGUE_WORDS = frozenset(
    {
        "recently",
        "lately",
        "the other day",
        "these days",
        "最近",
        "刚才",
        "这几天",
        "前几天",
        "这阵子",
        "这段时间",
        "近来",
        "这些天",
    }
)


def mentioned_days(text: str, at: datetime, zone: tzinfo) -> DayRanges:
    """The days `text`, written at `at`, speaks of, as local dates in `zone`: at most
    `MAX_RANGES` ranges, each at most `WIDEST_DAYS` wide before merging; the turn's own
    day alone ("today", "tonight") is left out, it is the turn's date already."""
    today = at.astimezone(zone).date()
    head = text[:MAX_CHARS]
    found: list[tuple[date, date]] = []
    mentions = time_mentions(head, today, ahead=True)
    for mention in mentions:
        first, last = mention.first, mention.last
        start, end = mention.span
        words = head[start:end].lower()
        widest = WIDEST_POINT_DAYS if mention.kind in _POINT_KINDS else WIDEST_DAYS
        if mention.kind in _VAGUE_KINDS or (last - first).days >= widest:
            continue
        if first == last == today or words in _VAGUE_WORDS:
            continue
        found.append((first, last))
    for begun in starts(head, today):
        a, b = begun.span
        if not any(a < m.span[1] and m.span[0] < b for m in mentions):
            found.append((begun.first, begun.last))
    found.sort(key=lambda r: ((r[1] - r[0]).days, r[0]))
    return merged(found[:MAX_RANGES])


def merged(ranges: Iterable[tuple[date, date]]) -> DayRanges:
    """Sorted, with overlapping or adjacent ranges joined."""
    out: list[tuple[date, date]] = []
    for first, last in sorted(ranges):
        if out and first.toordinal() <= out[-1][1].toordinal() + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return tuple(out)


def encode_days(ranges: DayRanges) -> str:
    """'2023-02-10..2023-02-10 2023-05-01..2023-05-31' ('' for none).

    Sorted and disjoint, so the first ten characters are the earliest day named and the
    last ten the latest: the index selects by them in SQL (`search.MENTIONS_WINDOW`)."""
    return " ".join(f"{first.isoformat()}..{last.isoformat()}" for first, last in ranges)


def decode_days(text: str | None) -> DayRanges:
    """`encode_days` read back; a malformed part is skipped (a row is never a failure)."""
    if not text:
        return ()
    out: list[tuple[date, date]] = []
    for part in text.split():
        first, _, last = part.partition("..")
        try:
            out.append((date.fromisoformat(first), date.fromisoformat(last)))
        except ValueError:
            continue
    return tuple(out)


def overlaps(ranges: Sequence[tuple[date, date]], first: date, last: date) -> bool:
    """Whether any range shares a day with `first`..`last`."""
    return any(a <= last and first <= b for a, b in ranges)
