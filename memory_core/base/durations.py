"""Pure: when something began, read from how long it has lasted ("two years now", "已经两年了").

"I've had them for 3 years now", said on 23 January 2022, is about something that began
around January 2019: "when did Nate get his turtles?" wants that turn, and a question about
2019 may too. Only the present perfect and its cues ("now", "already", "since", "已经",
"…了") say that the thing still lasts up to the turn's day; "I'm going to Paris for two
weeks" or "worked there for three years" name no start and are left alone.

The start is a range as wide as the unit counted, centred on the turn's day less the
duration (people round: "two years" is a year's precision, "six months" a month's). Read
at write time only (`turn_dates.mentioned_days`), never in questions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from memory_core.base.patterns import LazyPattern, ascii_key

__all__ = ["Start", "starts"]

UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_HALF_WIDTH = {"day": 1, "week": 3, "month": 15, "year": 182}
"""Half the precision of a start counted in each unit."""
_EN_COUNT = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "a couple of": 2,
    "couple of": 2,
}
_ZH_DIGIT = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8}
_ZH_DIGIT |= {"九": 9, "十": 10}
_ZH_UNIT = {"年": "year", "月": "month", "周": "week", "星期": "week", "礼拜": "week", "天": "day"}

_NUM_EN = (
    r"(\d{1,2}|a couple of|couple of|an|a|one|two|three|four|five|six|seven|eight|nine|ten"
    r"|eleven|twelve|fifteen|twenty)"
)
_HEDGE_EN = r"(?:\w+\s+){0,2}?"
"""'about', 'just under', 'more than': any two words between 'for' and the count."""
_UNIT_EN = r"(day|week|month|year)s?"
_PERFECT = (
    r"(?:\bbeen|(?:'ve|’ve|\bhave|\bhas|'s|’s)\s+(?:\w+\s+)?(?:had|known|owned|kept|lived"
    r"|worked|run|taught|studied|played|practi[cs]ed|used|done|volunteered|dated|loved))\b"
)
"""'I've been …', 'Been playing it …', "I've had him …", "she's known them …"."""
_ZH_NUM = r"([0-9一二两三四五六七八九十]+|半)"
_ZH_UNITS = r"(年|个多?月|个?多?(?:星期|礼拜)|周|天)"

_PATTERNS: tuple[tuple[str, LazyPattern], ...] = (
    # "two years now", "for 3 years now", "5 years already!"
    ("en_now", LazyPattern(rf"\b{_NUM_EN}\s+{_UNIT_EN}\s+(?:now|already)\b", re.I)),
    # "I've had them for 3 years", "been doing it for six months"
    (
        "en_for",
        LazyPattern(
            rf"{_PERFECT}[^.!?\n]{{0,50}}?\bfor\s+{_HEDGE_EN}{_NUM_EN}\s+{_UNIT_EN}\b", re.I
        ),
    ),
    # "it's been two years since …", "since three years"
    (
        "en_since",
        LazyPattern(
            rf"(?:\bit(?:'s|’s| has) been|\bsince)\s+{_HEDGE_EN}{_NUM_EN}\s+{_UNIT_EN}\b"
            r"(?!\s+ago)",
            re.I,
        ),
    ),
    # "已经两年了", "已经半年多", "做了六个月", "学了三年了"
    (
        "zh",
        LazyPattern(
            rf"已经(?:快|近|将近|差不多|大概|大约|有)?{_ZH_NUM}{_ZH_UNITS}"
            rf"|(?<=[\u4e00-\u9fff])了(?:快|近|将近|差不多|大概|大约)?{_ZH_NUM}(年|个多?月)(?![的后])"
            rf"|{_ZH_NUM}(年|个多?月|个?多?(?:星期|礼拜))多?了"
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Start:
    """When something that still lasts began, as a range of local dates."""

    first: date
    last: date
    span: tuple[int, int]


def _units_back(count: float, unit: str, today: date) -> tuple[date, date]:
    """`count` `unit`s before `today`, as a range as wide as the unit (not after today)."""
    centre = today - timedelta(days=round(count * UNIT_DAYS[unit]))
    half = timedelta(days=_HALF_WIDTH[unit])
    return centre - half, min(centre + half, today)


def _zh_count(text: str) -> float | None:
    if text.isdigit():
        return float(text)
    if text == "半":
        return 0.5
    tens, ten, ones = text.partition("十")
    if ten:
        return float(_ZH_DIGIT.get(tens, 1) * 10 + (_ZH_DIGIT.get(ones, 0) if ones else 0))
    return float(_ZH_DIGIT[text]) if len(text) == 1 and text in _ZH_DIGIT else None


def _zh_unit(text: str) -> str:
    for word, unit in _ZH_UNIT.items():
        if word in text:
            return unit
    return "day"


def _resolve(kind: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    parts = [g for g in m.groups() if g is not None]
    if len(parts) != 2:
        return None
    number, unit_text = parts
    if kind != "zh":
        count = float(number) if number.isdigit() else float(_EN_COUNT[ascii_key(number)])
        unit = ascii_key(unit_text)
    else:
        parsed = _zh_count(number)
        if parsed is None:
            return None
        count, unit = parsed, _zh_unit(unit_text)
    if count <= 0 or count * UNIT_DAYS[unit] > 60 * 365:
        return None
    if count < 1:
        if unit not in _HALF:
            return None
        count, unit = _HALF[unit]
    return _units_back(count, unit, today)


_HALF = {"year": (6, "month"), "month": (2, "week"), "week": (3, "day")}
"""'半年' is six months back (a month's precision), '半个月' two weeks."""
_UNIT_FORMS = frozenset({"day", "days", "week", "weeks", "month", "months", "year", "years"})
_PERFECT_WORDS = frozenset(
    [
        "been",
        "had",
        "known",
        "owned",
        "kept",
        "lived",
        "worked",
        "run",
        "taught",
        "studied",
        "played",
        "practiced",
        "practised",
        "used",
        "done",
        "volunteered",
        "dated",
        "loved",
    ]
)
_GATES: dict[str, tuple[frozenset[str], ...]] = {
    "en_now": (frozenset({"now", "already"}),),
    "en_for": (frozenset({"for"}), _PERFECT_WORDS),
    "en_since": (frozenset({"since", "been"}),),
}
"""The words a text must hold for a pattern to be worth running (each set: one of
them): most turns name no duration, and these tests cost a few µs where the patterns
cost tens."""
_LATIN_WORD = LazyPattern(r"[a-z]+")
_HAN_UNITS = ("年", "月", "周", "星期", "礼拜", "天")


_LEFT_ZH = ("剩", "还有", "不到", "离", "还差", "再过", "只有")
"""'离比赛不到两个月了', '只剩一个月了': the time left, not the time since."""


def _left(text: str, start: int) -> bool:
    """Whether the clause before `start` counts down rather than back."""
    before = text[max(0, start - 8) : start]
    clause = re.split(r"[，。！？,.!?\s]", before)[-1]
    return any(cue in clause for cue in _LEFT_ZH)


def starts(text: str, today: date) -> list[Start]:
    """The starts `text`, said on `today`, names by a duration that lasts up to then."""
    found: list[Start] = []
    folded = text.casefold()
    words: set[str] = set()
    if any(unit in folded for unit in ("day", "week", "month", "year")):
        words = set(_LATIN_WORD.findall(folded))
        if words.isdisjoint(_UNIT_FORMS):
            words = set()
    han = ("了" in text or "已经" in text) and any(unit in text for unit in _HAN_UNITS)
    for kind, pattern in _PATTERNS:
        if kind == "zh":
            if not han:
                continue
        elif not words or any(words.isdisjoint(gate) for gate in _GATES[kind]):
            continue
        for m in pattern.finditer(text):
            span = m.span()
            if any(span[0] < s.span[1] and s.span[0] < span[1] for s in found):
                continue
            if kind == "zh" and _left(text, span[0]):
                continue
            window = _resolve(kind, m, today)
            if window is not None:
                found.append(Start(window[0], window[1], m.span()))
    return found
