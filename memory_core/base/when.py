"""Pure: the days a question points at ("in May 2023", "上个月", "去年五月", "last Friday").

Recall turns a time reference into a window of local dates: turns inside it rank higher,
and the words that named the time leave the lexical query ("may" the month is not "may"
the verb, and "上个月" is in no memory's text). A reference that cannot be read yields
no window; the question is then ranked on its words alone. Month names without a year
mean their latest occurrence not after today, the way people speak.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from memory_core.base.patterns import LATIN_LOOK_ALIKES, LazyPattern, ascii_key

__all__ = ["Mention", "TimeReference", "day_bounds", "find_time_reference", "time_mentions"]


@dataclass(frozen=True, slots=True)
class TimeReference:
    first: date
    last: date
    """Inclusive local dates."""
    spans: tuple[tuple[int, int], ...]
    """Where in the text the reference was named (to drop from the lexical query)."""


_MONTHS_EN = {
    name: number
    for number in range(1, 13)
    for name in (calendar.month_name[number].lower(), calendar.month_abbr[number].lower())
}
_MONTHS_EN["sept"] = 9
_VERBS = frozenset({"may", "march"})
"""Month names that are also common words: a month only after 'in', 'of', … or with a
day, a year or 'early'/'late'."""
_WEEKDAYS_EN = {calendar.day_name[n].lower(): n for n in range(7)}
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}
_ZH_DIGITS |= {"八": 8, "九": 9, "十": 10}
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_EN_NUMBERS |= {"a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4}
_ZH_UNITS = {"天": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}

_MONTH_EN = "|".join(sorted(_MONTHS_EN, key=len, reverse=True))
_WEEKDAY_EN = "|".join(_WEEKDAYS_EN)
_ZH_NUM = "[0-9零一二两三四五六七八九十]+"
_PART_EN = r"(?:(early|mid|middle of|late|end of|beginning of|the start of|start of)(?:\s+|-))?"

_PATTERNS: list[tuple[str, LazyPattern]] = [
    ("iso", LazyPattern(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("iso_month", LazyPattern(r"\b(\d{4})-(\d{1,2})\b")),
    ("zh_ymd", LazyPattern(rf"(\d{{4}}|去年|今年|前年)年?({_ZH_NUM})月(?:({_ZH_NUM})[日号])?")),
    ("zh_md", LazyPattern(rf"({_ZH_NUM})月({_ZH_NUM})[日号]")),
    ("zh_month", LazyPattern(rf"(去年|今年|前年)?({_ZH_NUM})月(初|中旬|中|底|末|下旬|上旬)?")),
    ("zh_year", LazyPattern(r"(\d{4})年|(去年|今年|前年)")),
    ("zh_ago", LazyPattern(rf"({_ZH_NUM}|几|两|半)(?:个)?(天|周|星期|礼拜|月|年)(?:以)?前")),
    (
        # "一周一次", "每周一" are "once a week", "every Monday": no day.
        "zh_weekday",
        LazyPattern(
            r"(?:(上上|上|这|本)(?:个)?|(?<![0-9零一二两三四五六七八九十几每个]))"
            r"(?:周|星期|礼拜)([一二三四五六日天])"
        ),
    ),
    ("zh_weekend", LazyPattern(r"(上|这|本)?(?:个)?周末")),
    ("zh_week", LazyPattern(r"(上上|上|这|本)(?:个)?(?:周|星期|礼拜)")),
    ("zh_month_rel", LazyPattern(r"(上上|上|这|本)(?:个)?月")),
    ("zh_span", LazyPattern(rf"(?:过去|最近|近|这)({_ZH_NUM}|几|两)(?:个)?(天|周|星期|礼拜|月)")),
    (
        "zh_day",
        LazyPattern(
            r"大前天|前天|昨天|昨晚|昨夜|今天|今早|今晚|刚才|最近|这几天|前几天|这阵子|这段时间|近来|这些天"
        ),
    ),
    (
        "en_day_month",
        LazyPattern(
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_EN})\b(?:,?\s+(\d{{4}}))?",
            re.IGNORECASE,
        ),
    ),
    (
        "en_month",
        LazyPattern(
            rf"\b{_PART_EN}(?:in\s+|on\s+)?({_MONTH_EN})\.?(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?\b)?"
            rf"(?:,?\s+(\d{{4}}))?\b",
            re.IGNORECASE,
        ),
    ),
    ("en_year", LazyPattern(r"\b(?:in\s+)?((?:19|20)\d{2})\b")),
    (
        "en_ago",
        LazyPattern(
            r"\b(\d+|a|an|one|two|three|four|five|six|a couple of|couple of|a few|few|several)"
            r"\s+(day|week|month|year)s?\s+ago\b",
            re.IGNORECASE,
        ),
    ),
    (
        "en_span",
        LazyPattern(
            r"\b(?:the\s+)?(?:last|past)\s+(\d+|two|three|four|five|six|a couple of|couple of"
            r"|a few|few|several)\s+(day|week|month|year)s\b",
            re.IGNORECASE,
        ),
    ),
    (
        "en_weekday",
        LazyPattern(rf"\b(last|this|on|past)\s+({_WEEKDAY_EN})\b", re.IGNORECASE),
    ),
    (
        "en_rel",
        LazyPattern(r"\b(last|this|past|previous)\s+(weekend|week|month|year)\b", re.IGNORECASE),
    ),
    (
        "en_day",
        LazyPattern(
            r"\b(the day before yesterday|yesterday|last night|today|earlier today|tonight|this morning"
            r"|recently|lately|the other day|these days)\b",
            re.IGNORECASE,
        ),
    ),
]


_NEXT_ZH = r"(?<![一以剩])下(?:个)?"
"""'下' of 'next', not of '看一下' ('a look'), '以下' ('below') or '剩下' ('the rest')."""
_AHEAD_PATTERNS: list[tuple[str, LazyPattern]] = [
    ("zh_next_weekday", LazyPattern(rf"{_NEXT_ZH}(?:周|星期|礼拜)([一二三四五六日天])")),
    ("zh_next_weekend", LazyPattern(rf"{_NEXT_ZH}周末")),
    ("zh_next", LazyPattern(rf"{_NEXT_ZH}(周|星期|礼拜|月)")),
    ("zh_tomorrow", LazyPattern(r"大后天|后天|明天")),
    ("en_next_weekday", LazyPattern(rf"\bnext\s+({_WEEKDAY_EN})\b", re.IGNORECASE)),
    ("en_next_month", LazyPattern(rf"\bnext\s+({_MONTH_EN})\b", re.IGNORECASE)),
    ("en_next", LazyPattern(r"\bnext\s+(weekend|week|month)\b", re.IGNORECASE)),
    ("en_tomorrow", LazyPattern(r"\b(?:the day after )?tomorrow\b", re.IGNORECASE)),
]
"""Times to come, read in a turn's text only (`time_mentions(ahead=True)`): "next May" is
the coming May, not the last one the month pattern would read."""


def _zh_number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text == "几":
        return 3
    if text == "十":
        return 10
    if text.startswith("十"):
        return 10 + _ZH_DIGITS.get(text[1:], 0)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_DIGITS.get(tens, 0) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    if len(text) == 1:
        return _ZH_DIGITS.get(text)
    return None


def _month_window(year: int, month: int, part: str | None = None) -> tuple[date, date] | None:
    if not 1 <= month <= 12 or not 1900 <= year <= 2200:
        return None
    days = calendar.monthrange(year, month)[1]
    first, last = date(year, month, 1), date(year, month, days)
    if part in ("初", "上旬", "early", "beginning of", "the start of", "start of"):
        return first, date(year, month, 10)
    if part in ("中", "中旬", "mid", "middle of"):
        return date(year, month, 10), date(year, month, 20)
    if part in ("底", "末", "下旬", "late", "end of"):
        return date(year, month, 20), last
    return first, last


def _latest_year(month: int, today: date, day: int = 1) -> int:
    """The year of the latest `month` (and `day`) not after today."""
    return today.year if (month, day) <= (today.month, today.day) else today.year - 1


def _relative_year(word: str | None, today: date) -> int | None:
    return {"去年": today.year - 1, "今年": today.year, "前年": today.year - 2}.get(word or "")


def _day(year: int, month: int, day: int) -> tuple[date, date] | None:
    try:
        moment = date(year, month, day)
    except ValueError:
        return None
    return moment, moment


def _week_of(day: date, weeks_back: int) -> tuple[date, date]:
    monday = day - timedelta(days=day.weekday() + 7 * weeks_back)
    return monday, monday + timedelta(days=6)


def _month_back(today: date, months: int) -> tuple[date, date] | None:
    index = today.year * 12 + today.month - 1 - months
    return _month_window(index // 12, index % 12 + 1)


def _previous_weekday(today: date, weekday: int, *, this_week: bool = False) -> date:
    if this_week:
        return today - timedelta(days=today.weekday() - weekday)
    back = (today.weekday() - weekday) % 7 or 7
    return today - timedelta(days=back)


def _ago(count: int, unit: str, today: date) -> tuple[date, date]:
    """'3 weeks ago' is a span around that point, as wide as the unit (people round)."""
    span = _UNIT_DAYS[unit]
    centre = today - timedelta(days=count * span)
    half = max(span // 2, 1) if unit != "day" else 1
    return centre - timedelta(days=half), min(centre + timedelta(days=half), today)


def _en_count(word: str) -> int:
    """'3', 'two', 'a couple of' → a count (2 when the word is vague)."""
    return int(word) if word.isdigit() else _EN_NUMBERS.get(ascii_key(word), 2)


def _span(count: int, unit: str, today: date) -> tuple[date, date]:
    """'the last two months', '最近三个月': every day from that far back up to today."""
    days = _UNIT_DAYS[unit] * count
    return today - timedelta(days=days), today


def _resolve(kind: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    g = m.groups()
    if kind in _AHEAD_KINDS:
        return _resolve_ahead(kind, m, today)
    if kind == "iso":
        return _day(int(g[0]), int(g[1]), int(g[2]))
    if kind == "iso_month":
        return _month_window(int(g[0]), int(g[1]))
    if kind == "zh_ymd":
        year = _relative_year(g[0], today) or int(g[0])
        month = _zh_number(g[1])
        if month is None:
            return None
        if g[2]:
            day = _zh_number(g[2])
            return _day(year, month, day) if day else None
        return _month_window(year, month)
    if kind == "zh_md":
        month, day = _zh_number(g[0]), _zh_number(g[1])
        if not month or not day:
            return None
        return _day(_latest_year(month, today, day), month, day)
    if kind == "zh_month":
        month = _zh_number(g[1])
        if month is None:
            return None
        year = _relative_year(g[0], today) or _latest_year(month, today)
        return _month_window(year, month, g[2])
    if kind == "zh_year":
        found = int(g[0]) if g[0] else _relative_year(g[1], today)
        return (date(found, 1, 1), date(found, 12, 31)) if found else None
    if kind == "zh_ago":
        unit = _ZH_UNITS[g[1]]
        if g[0] == "几":
            widest = {"day": 6, "week": 35, "month": 150, "year": 5 * 365}[unit]
            return today - timedelta(days=widest), today
        if g[0] == "半":  # "半年前": six months ago, "半个月前": two weeks ago
            half = {"year": (6, "month"), "month": (2, "week")}.get(unit)
            return _ago(*half, today) if half else None
        return _ago(_zh_number(g[0]) or 2, unit, today)
    if kind == "zh_span":
        count = _zh_number(g[0]) or 3
        unit = _ZH_UNITS[g[1]]
        return _span(count, unit, today)
    if kind == "zh_weekday":
        weekday = _ZH_WEEKDAY[g[1]]
        if g[0] in ("这", "本"):
            moment = _previous_weekday(today, weekday, this_week=True)
        elif g[0] == "上上":
            moment = _week_of(today, 2)[0] + timedelta(days=weekday)
        elif g[0] == "上":
            moment = _week_of(today, 1)[0] + timedelta(days=weekday)
        else:
            moment = _previous_weekday(today, weekday)
        return moment, moment
    if kind == "zh_weekend":
        monday = _week_of(today, 0 if g[0] in ("这", "本") else 1)[0]
        return monday + timedelta(days=5), monday + timedelta(days=6)
    if kind == "zh_week":
        return _week_of(today, {"上上": 2, "上": 1}.get(g[0], 0))
    if kind == "zh_month_rel":
        return _month_back(today, {"上上": 2, "上": 1}.get(g[0], 0))
    if kind == "zh_day":
        word = m.group(0)
        back = {
            "大前天": 3,
            "前天": 2,
            "昨天": 1,
            "昨晚": 1,
            "昨夜": 1,
            "今天": 0,
            "今早": 0,
            "今晚": 0,
            "刚才": 0,
        }.get(word)
        if back is not None:
            moment = today - timedelta(days=back)
            return moment, moment
        if word in ("这阵子", "这段时间", "近来"):
            return today - timedelta(days=21), today
        return today - timedelta(days=14 if word == "最近" else 6), today
    if kind == "en_month":
        month = _MONTHS_EN[ascii_key(g[1])]
        if ascii_key(g[1]) in _VERBS and not (g[0] or g[2] or g[3]) and not _month_context(m):
            return None  # "may" the verb, "the march of time"
        if g[2]:
            day = int(g[2])
            year = int(g[3]) if g[3] else _latest_year(month, today, day)
            return _day(year, month, day)
        year = int(g[3]) if g[3] else _latest_year(month, today)
        part = ascii_key(g[0] or "").rstrip("-") or None
        return _month_window(year, month, part)
    if kind == "en_day_month":
        month = _MONTHS_EN[ascii_key(g[1])]
        year = int(g[2]) if g[2] else _latest_year(month, today, int(g[0]))
        return _day(year, month, int(g[0]))
    if kind == "en_year":
        return date(int(g[0]), 1, 1), date(int(g[0]), 12, 31)
    if kind == "en_ago":
        count = _en_count(g[0])
        return _ago(count, ascii_key(g[1]), today)
    if kind == "en_span":
        count = _en_count(g[0])
        return _span(count, ascii_key(g[1]), today)
    if kind == "en_weekday":
        weekday = _WEEKDAYS_EN[ascii_key(g[1])]
        moment = _previous_weekday(today, weekday, this_week=ascii_key(g[0]) == "this")
        return moment, moment
    if kind == "en_rel":
        which, unit = ascii_key(g[0]), ascii_key(g[1])
        back = 0 if which == "this" else 1
        if unit == "week":
            return _week_of(today, back)
        if unit == "weekend":
            monday = _week_of(today, back if today.weekday() < 5 or back else 0)[0]
            return monday + timedelta(days=5), monday + timedelta(days=6)
        if unit == "month":
            return _month_back(today, back)
        return date(today.year - back, 1, 1), date(today.year - back, 12, 31)
    if kind == "en_day":
        word = ascii_key(m.group(0))
        if word == "the day before yesterday":
            moment = today - timedelta(days=2)
        elif word in ("yesterday", "last night"):
            moment = today - timedelta(days=1)
        elif word in ("today", "earlier today", "tonight", "this morning"):
            moment = today
        else:
            return today - timedelta(days=14 if word in ("recently", "lately") else 10), today
        return moment, moment
    return None


_DIGIT = LazyPattern(r"\d")
_LATIN_WORD = LazyPattern(r"[a-z]+")
_DAY_WORDS = (
    "yesterday",
    "today",
    "tonight",
    "morning",
    "night",
    "recently",
    "lately",
    "day",
    "days",
)
_GATES: dict[str, frozenset[str]] = {
    kind: frozenset(words)
    for kind, words in {
        "iso": ("0-",),
        "iso_month": ("0-",),
        "zh_ymd": ("月",),
        "zh_md": ("月",),
        "zh_month": ("月",),
        "zh_year": ("年",),
        "zh_ago": ("前",),
        "zh_weekday": ("周", "期", "拜"),
        "zh_weekend": ("周",),
        "zh_week": ("周", "期", "拜"),
        "zh_month_rel": ("月",),
        "zh_span": ("天", "周", "期", "拜", "月"),
        "zh_day": ("天", "才", "近", "阵", "段", "晚", "夜", "早"),
        "en_day_month": ("0m",),
        "en_month": tuple(_MONTHS_EN),
        "en_year": ("019",),
        "en_ago": ("ago",),
        "en_span": ("last", "past"),
        "en_weekday": tuple(_WEEKDAYS_EN),
        "en_rel": ("week", "weekend", "month", "year"),
        "en_day": _DAY_WORDS,
        "zh_next_weekday": ("下",),
        "zh_next_weekend": ("下",),
        "zh_next": ("下",),
        "zh_tomorrow": ("天",),
        "en_next_weekday": ("next",),
        "en_next_month": ("next",),
        "en_next": ("next",),
        "en_tomorrow": ("tomorrow",),
    }.items()
}
"""What a text must hold for a pattern to be worth running: a Han character, a whole
latin word (casefolded), or a digit with what its pattern needs beside it ("0-": a "-",
"019": "19" or "20", "0m": a month's name). Most texts name no time, and thirty regular
expressions cost 80 µs where these tests cost a few; half of a chat's texts hold a digit
(a time, an amount), and the four patterns of numbered dates ran on each of them."""
_GATE_HAN = frozenset(w for gate in _GATES.values() for w in gate if not w.isascii())
_GATE_LATIN = frozenset(w for gate in _GATES.values() for w in gate if w.isalpha() and w.isascii())


def _gate_keys(text: str) -> set[str]:
    """The gate words `text` holds (see `_GATES`)."""
    present = {ch for ch in _GATE_HAN if ch in text}
    latin = _GATE_LATIN.intersection(
        _LATIN_WORD.findall(text.translate(LATIN_LOOK_ALIKES).casefold())
    )
    present.update(latin)
    if _DIGIT.search(text) is not None:
        # Each a literal its pattern cannot match without: `iso`'s "-", `en_year`'s
        # "19"/"20", `en_day_month`'s month.
        if "-" in text:
            present.add("0-")
        if "19" in text or "20" in text:
            present.add("019")
        if not latin.isdisjoint(_MONTHS_EN):
            present.add("0m")
    return present


_AHEAD_KINDS = frozenset(kind for kind, _ in _AHEAD_PATTERNS)


def _resolve_ahead(kind: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    g = m.groups()
    if kind == "zh_next_weekday":
        moment = _week_of(today, -1)[0] + timedelta(days=_ZH_WEEKDAY[g[0]])
        return moment, moment
    if kind == "zh_next_weekend":
        monday = _week_of(today, -1)[0]
        return monday + timedelta(days=5), monday + timedelta(days=6)
    if kind == "zh_next":
        return _month_back(today, -1) if g[0] == "月" else _week_of(today, -1)
    if kind == "zh_tomorrow":
        moment = today + timedelta(days={"明天": 1, "后天": 2, "大后天": 3}[m.group(0)])
        return moment, moment
    if kind == "en_next_weekday":
        # The coming one, as "last Friday" is the latest past one.
        moment = today + timedelta(days=(_WEEKDAYS_EN[ascii_key(g[0])] - today.weekday()) % 7 or 7)
        return moment, moment
    if kind == "en_next_month":
        month = _MONTHS_EN[ascii_key(g[0])]
        return _month_window(today.year + (month <= today.month), month)
    if kind == "en_next":
        unit = ascii_key(g[0])
        if unit == "month":
            return _month_back(today, -1)
        monday = _week_of(today, -1)[0]
        return (
            (monday + timedelta(days=5), monday + timedelta(days=6))
            if unit == "weekend"
            else (monday, monday + timedelta(days=6))
        )
    if kind == "en_tomorrow":
        moment = today + timedelta(days=2 if ascii_key(m.group(0)).startswith("the") else 1)
        return moment, moment
    return None


def _month_context(m: re.Match[str]) -> bool:
    """'in May', 'May 3' are the month; 'I may go' is not."""
    before = m.string[: m.start(2)]
    return bool(
        re.search(r"\b(?:in|since|until|during|of|last|this|next)\s+$", before, re.IGNORECASE)
    )


@dataclass(frozen=True, slots=True)
class Mention:
    """One time expression of a text, resolved."""

    kind: str
    """The pattern that read it ("en_weekday", "zh_day", ...)."""
    first: date
    last: date
    span: tuple[int, int]


_ORDER = tuple(_PATTERNS)
_AHEAD_ORDER = (*_AHEAD_PATTERNS, *_PATTERNS)


def _opened(order: Sequence[tuple[str, LazyPattern]]) -> dict[str, tuple[int, ...]]:
    """Gate key -> the places in `order` of the patterns it opens (`_GATES`)."""
    opens: dict[str, list[int]] = {}
    for place, (kind, _) in enumerate(order):
        for key in _GATES[kind]:
            opens.setdefault(key, []).append(place)
    return {key: tuple(places) for key, places in opens.items()}


_OPENS = _opened(_ORDER)
_OPENS_AHEAD = _opened(_AHEAD_ORDER)


def time_mentions(text: str, today: date, *, ahead: bool = False) -> list[Mention]:
    """Every time expression of the text, resolved against `today`, in the order the
    patterns read them (a span read once is not read again by a later pattern).

    `ahead` also reads the future ("tomorrow", "next Friday", "下周五", "下个月"): a turn
    speaks of plans as often as of the past, while a question asks about the past."""
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []
    present = _gate_keys(text)
    if not present:
        return found
    opens = _OPENS_AHEAD if ahead else _OPENS
    # The patterns some present key opens, in the patterns' order.
    places = {place for key in present for place in opens.get(key, ())}
    patterns = _AHEAD_ORDER if ahead else _ORDER
    for place in sorted(places):
        kind, pattern = patterns[place]
        for m in pattern.finditer(text):
            span = m.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            window = _resolve(kind, m, today)
            if window is None or window[0] > window[1]:
                continue
            taken.append(span)
            found.append(Mention(kind, window[0], window[1], span))
    return found


def find_time_reference(text: str, today: date) -> TimeReference | None:
    """The window the text names, the narrowest when it names several (`去年五月`
    is May, not the whole year), or None."""
    found = time_mentions(text, today)
    if not found:
        return None
    best = min(found, key=lambda f: (f.last - f.first).days)
    return TimeReference(best.first, best.last, tuple(sorted(f.span for f in found)))


def day_bounds(first: date, last: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """Instants bounding local days `first`..`last` inclusive."""
    start = datetime.combine(first, time(0, 0), tzinfo=zone)
    end = datetime.combine(last + timedelta(days=1), time(0, 0), tzinfo=zone)
    return start, end
