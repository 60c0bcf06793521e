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

from memory_core.base.patterns import LazyPattern

__all__ = ["Start", "starts", "units_back"]

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
_HEDGE_EN = (
    r"(?:(?:about|around|almost|nearly|over|roughly|like|more than|less than|close to"
    r"|just under|just over|at least)\s+)?"
)
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
    ("en", LazyPattern(rf"\b{_HEDGE_EN}{_NUM_EN}\s+{_UNIT_EN}\s+(?:now|already)\b", re.I)),
    # "I've had them for 3 years", "been doing it for six months"
    (
        "en",
        LazyPattern(
            rf"{_PERFECT}[^.!?\n]{{0,50}}?\bfor\s+{_HEDGE_EN}{_NUM_EN}\s+{_UNIT_EN}\b", re.I
        ),
    ),
    # "it's been two years since …", "since three years"
    (
        "en",
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


def units_back(count: float, unit: str, today: date) -> tuple[date, date]:
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


def _resolve(script: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    parts = [g for g in m.groups() if g is not None]
    if len(parts) != 2:
        return None
    number, unit_text = parts
    if script == "en":
        count = float(number) if number.isdigit() else float(_EN_COUNT[number.lower()])
        unit = unit_text.lower()
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
    return units_back(count, unit, today)


_HALF = {"year": (6, "month"), "month": (2, "week"), "week": (3, "day")}
"""'半年' is six months back (a month's precision), '半个月' two weeks."""
_UNIT_WORDS = ("day", "week", "month", "year")
_HAN_UNITS = ("年", "月", "周", "星期", "礼拜", "天")


def starts(text: str, today: date) -> list[Start]:
    """The starts `text`, said on `today`, names by a duration that lasts up to then."""
    found: list[Start] = []
    folded = text.casefold()
    latin = any(word in folded for word in _UNIT_WORDS)
    han = any(word in text for word in _HAN_UNITS) and ("了" in text or "已经" in text)
    if not (latin or han):
        return found
    for script, pattern in _PATTERNS:
        if not (latin if script == "en" else han):
            continue
        for m in pattern.finditer(text):
            span = m.span()
            if any(span[0] < s.span[1] and s.span[0] < span[1] for s in found):
                continue
            window = _resolve(script, m, today)
            if window is not None:
                found.append(Start(window[0], window[1], m.span()))
    return found
