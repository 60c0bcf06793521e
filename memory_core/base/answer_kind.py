"""Pure: what kind of answer a question wants, and whether a text holds one.

"When is the wedding?" is answered by a turn with a date in it ("moved to saturday 5
September"), "how old is he?" by one with a number ("he'll be six on March 8th"), "who is
the cardiologist?" by one with a name. The answer often shares no word with the question,
so BM25 alone ranks the asking turn, or a turn that merely mentions the topic, above it.
Question answering has matched expected answer types since its earliest systems; here it
is a small lift for a candidate that holds something of the wanted shape, never a filter.

Both sides are cheap regular expressions in English and Chinese. A question without one of
these shapes ("what did the physio say?") gets no lift at all.
"""

from __future__ import annotations

import re
from enum import StrEnum

from memory_core.base.patterns import LazyPattern

__all__ = ["AnswerKind", "holds_answer", "wanted_answer"]


class AnswerKind(StrEnum):
    DATE = "date"
    NUMBER = "number"
    NAME = "name"
    PLACE = "place"


_ASK_EN: tuple[tuple[AnswerKind, str], ...] = (
    (
        AnswerKind.DATE,
        r"\bwhen(?:'s|s)?\b|\bwhat (?:day|date|time|month|year|week)\b"
        r"|\bwhich (?:day|date|month|year|week|weekend)\b|\bhow soon\b",
    ),
    (
        AnswerKind.NUMBER,
        r"\bhow (?:much|many|long|old|far|often|big|tall|heavy|fast|early|late)\b"
        r"|\bwhat (?:size|price|score|age|number|percentage|grade)\b",
    ),
    (
        AnswerKind.NAME,
        r"\bwho(?:'s|se|m)?\b|\bwhat(?:'s| is| was| are) (?:\w+ )?(?:\w+'s )?name\b"
        r"|\bcalled\b|\bwhich (?:doctor|person|friend|teacher|company|brand|app|restaurant"
        r"|hotel|shop|store|school|book|film|movie|show|band|game)\b",
    ),
    (
        AnswerKind.PLACE,
        r"\bwhere(?:'s| is| are| did| do| does| was| were| will)?\b"
        r"|\bwhich (?:city|country|town|place|area|airport|station|street|neighbourhood"
        r"|neighborhood)\b",
    ),
)
_ASK_ZH: tuple[tuple[AnswerKind, str], ...] = (
    (
        AnswerKind.DATE,
        r"什么时候|啥时候|哪天|哪一天|几号|几月|哪个月|哪年|几点|哪周|星期几|周几|礼拜几",
    ),
    (
        AnswerKind.NUMBER,
        r"多少|几个|几岁|多大|多久|多长|几年|几次|多远|多重|几斤|几公里|几天|几小时|几分|多高",
    ),
    (AnswerKind.NAME, r"谁|哪位|叫什么|叫啥|什么名字|名字是|哪家|哪个牌子|什么牌子|哪款"),
    (AnswerKind.PLACE, r"哪里|哪儿|在哪|去哪|哪个城市|哪个国家|什么地方|啥地方"),
)
_ASK = tuple((kind, LazyPattern(pattern, re.IGNORECASE)) for kind, pattern in (*_ASK_EN, *_ASK_ZH))

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
)
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|tues|wed|thu|thurs|fri|sat|sun"
_HAN_DIGIT = "[0-9一二两三四五六七八九十百千万半]"
_CAPITALISED = r"(?<=[a-z,;] )(?!I\b|I'm\b|I'll\b|I've\b|I'd\b)[A-Z][\w'.-]+"
"""A capitalised word after the first of its sentence ("I" and its contractions aside):
in Latin script, a person's or a place's name."""
_HOLD: dict[AnswerKind, LazyPattern] = {
    AnswerKind.DATE: LazyPattern(
        rf"\b(?:{_MONTHS})\b|\b(?:{_DAYS})s?\b|\b\d{{1,2}}(?:st|nd|rd|th)\b"
        r"|\b\d{1,2}[/.-]\d{1,2}(?:[/.-]\d{2,4})?\b|\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b"
        r"|\b(?:tomorrow|tonight|yesterday|weekend|fortnight|next (?:week|month|year))\b"
        r"|\b(?:19|20)\d{2}\b"
        rf"|{_HAN_DIGIT}+\s*(?:月|号|日|点)|周[一二三四五六日天末]|星期|礼拜"
        r"|明天|后天|昨天|前天|下周|下个月|月底|月初|月中|年底|年初|春节|国庆|中秋|元旦",
        re.IGNORECASE,
    ),
    AnswerKind.NUMBER: LazyPattern(
        r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen"
        r"|twenty|thirty|forty|fifty|sixty|hundred|thousand|half|dozen|couple|once|twice)\b"
        rf"|{_HAN_DIGIT}",
        re.IGNORECASE,
    ),
    # Or Han text that names someone or something by title, brand quotes or a name verb.
    AnswerKind.NAME: LazyPattern(
        rf"{_CAPITALISED}"
        r"|叫|姓|老师|医生|大夫|先生|女士|阿姨|叔叔|师傅|教练|同事|《|“|「"
        r"|(?<=[\u4e00-\u9fff])\s?[A-Za-z]{2,}|[A-Za-z]{2,}\s?(?=[\u4e00-\u9fff])",
    ),
    AnswerKind.PLACE: LazyPattern(
        rf"{_CAPITALISED}"
        r"|[市省县区镇村路街道巷店馆园院站港岛山湖海国]|机场|酒店|餐厅|商场|公司|学校|医院",
    ),
}


def wanted_answer(question: str) -> AnswerKind | None:
    """The kind of answer the question asks for, by its earliest question word ("how long
    had I been there when I left?" wants a number, not a date), or None."""
    best: tuple[int, AnswerKind] | None = None
    for kind, pattern in _ASK:
        m = pattern.search(question)
        if m is not None and (best is None or m.start() < best[0]):
            best = (m.start(), kind)
    return best[1] if best else None


def holds_answer(kind: AnswerKind, text: str, *, dated: bool = False) -> bool:
    """Whether the text holds something of that shape (a date, a number, a name…).

    `dated`: the index resolved a day the text speaks of (memory_core/base/turn_dates.py), so
    it answers "when" even in words this pattern does not know ("two weeks ago", "上个
    月", or the start of "two years now": "when did she start?")."""
    if dated and kind is AnswerKind.DATE:
        return True
    return _HOLD[kind].search(text) is not None
