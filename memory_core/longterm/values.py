"""One writing for every value, so that a restatement is recognised as one.

"wake up at 7" and "wake up at 07:00", "grade 3" and "grade ３", "2026-12-24" and
"24.12.2026 (Thursday)", "555-1234" and "5551234", "5 000" and "5000", "1,5" and "1.5",
"3pm" and "15:00", "七点" and "7:00", "twice" and "2 times", "Mon" and "Monday",
"I am not" and "I'm not" say the same: `canonical` writes each the same way, so the
merge compares values, not spellings (`fact_keys.relation`, `fact_keys.skeleton`).

`canonical` only drops characters or writes a value as digits or as a date or number word
(which a skeleton masks), never adds other letters: what `fact_keys.kept_characters`
relies on. `codes` are the tokens that identify (qz000mk, z0007q, r1): texts that differ
in one are different facts. `slots` are the values of single-valued attributes (where
one lives or works, a password): another one there is an update, not another person.

Pure and cheap: patterns compile at first use, results are cached per text.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from datetime import date

from memory_core.base.patterns import LazyPattern
from memory_core.longterm.coded_slots import coded_slots

ZH_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
ZH_BIG_UNITS = {"万": 10_000, "亿": 100_000_000}
ZH_NUMERAL = LazyPattern("[零〇一二两三四五六七八九十百千万亿]+")
ZH_NOT_NUMBERS = LazyPattern(
    "一起|一直|一样|一些|一下|一定|一般|一切|一致|一边|一向|一旦|一再|一会儿?|一点儿?|"
    "统一|唯一|万一|十分|千万|不一|同一|一起|三明治|一路|一律|七八糟"
)
"""Words that hold a numeral and count nothing."""


def chinese_number(run: str) -> str:
    """一 -> 1, 十二 -> 12, 两千三百 -> 2300, 二〇二四 -> 2024 (digit by digit)."""
    if not any(ch in ZH_UNITS or ch in ZH_BIG_UNITS for ch in run):
        # Not int(): a hostile run of thousands of numerals is past int()'s digit limit.
        return "".join(str(ZH_DIGITS[ch]) for ch in run).lstrip("0") or "0"
    total = section = digit = 0
    for ch in run:
        if ch in ZH_DIGITS:
            digit = ZH_DIGITS[ch]
        elif ch in ZH_UNITS:
            section += (digit or 1) * ZH_UNITS[ch]
            digit = 0
        else:
            total += (section + digit) * ZH_BIG_UNITS[ch]
            section = digit = 0
    return str(total + section + digit)


def _split(words: str) -> list[str]:
    return words.split()


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = _split(
    "january february march april may june july august september october november december"
)
_ABBREVIATIONS = {
    "Mon": "monday", "Tue": "tuesday", "Tues": "tuesday", "Wed": "wednesday",
    "Thu": "thursday", "Thur": "thursday", "Thurs": "thursday", "Fri": "friday",
    "Sat": "saturday", "Sun": "sunday", "Jan": "january", "Feb": "february",
    "Mar": "march", "Apr": "april", "Jun": "june", "Jul": "july", "Aug": "august",
    "Sep": "september", "Sept": "september", "Oct": "october", "Nov": "november",
    "Dec": "december",
}  # fmt: skip
_ABBREVIATED = LazyPattern(r"\b(?:" + "|".join(_ABBREVIATIONS) + r")\b\.?")
"""Capitalised only: "sat" and "sun" are words too."""
_ZH_WEEKDAY = LazyPattern("(?:周|星期|礼拜)([一二三四五六日天1-7])")
_ZH_WEEKDAY_INDEX = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_ZH_NUMBER_OR_WORD = LazyPattern(
    f"(?P<word>{ZH_NOT_NUMBERS.pattern})|(?P<num>{ZH_NUMERAL.pattern})"
)
_ZH_DATE = LazyPattern(r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})[日号]")
_ZH_TIME = LazyPattern(
    r"(早上|上午|中午|下午|晚上|凌晨)?(\d{1,2})[点點](?:钟)?(?:(\d{1,2})分?|(半))?"
)
_ZH_FINAL_PARTICLE = LazyPattern("[了啊呀呢吧哦嘛啦](?=[。！!？?，,;；\\s]*$)")
"""A particle that ends a sentence adds tone, not a fact ("我不喜欢喝咖啡了")."""
_ZH_PM = frozenset({"下午", "晚上"})
_ZH_PART_CLOCK = LazyPattern(r"(早上|上午|中午|下午|晚上|凌晨)\s*(\d{1,2}):(\d{2})")
_ZH_TEN_THOUSANDS = LazyPattern(r"(?<![\d.])(\d{1,12})(?:\.(\d{1,8}))?([万亿])")

_ISO_DATE = LazyPattern(r"(?<![\d.])(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?![\d])")
_NUMERIC_DATE = LazyPattern(r"(?<![\d.])(\d{1,2})([./-])(\d{1,2})\2(\d{4})(?!\d)")
_MONTH = "|".join(MONTHS)
_MONTH_DAY = LazyPattern(
    rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?"
    rf"|\b(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\b(?:,?\s+(\d{{4}})\b)?"
)
_WEEKDAY = "|".join(WEEKDAYS)
_DATED_WEEKDAY = LazyPattern(
    rf"(?P<date>(?<!\d)\d{{8}}(?!\d))\s*[,(（]?\s*(?P<day>{_WEEKDAY})\s*[)）]?"
    rf"|(?P<day2>{_WEEKDAY})\s*,?\s*(?P<date2>(?<!\d)\d{{8}}(?!\d))"
)
_HALF_DAY = (
    r"(?:(?P<am>a\.?m\.?|in the morning)|(?P<pm>p\.?m\.?|in the (?:afternoon|evening)|at night))"
)
_CLOCK_HALF = LazyPattern(rf"(?<![\d:.])(\d{{1,2}})(?::(\d{{2}}))?\s*{_HALF_DAY}(?![a-z])")
_CLOCK = LazyPattern(r"(?<![\d:.])(\d{1,2}):(\d{2})(?![\d:])")
_AT_HOUR = LazyPattern(
    r"\b(at|around|by|until|till|before|after|from|to)\s+(\d{1,2})(?!\d|[:.,]\d)(?:\s*o'clock)?"
    r"(?=\s*(?:$|[^\w\s]|(?:every|each|on|in|at|and|or|daily|sharp|tomorrow|today|tonight|"
    r"then|to|until|till)\b|[\u4e00-\u9fff]))"
)
_ORDINAL = LazyPattern(r"\b(\d+)(?:st|nd|rd|th)\b")
_THOUSANDS = LazyPattern(
    r"(?<![\d.,])\d{1,3}(?:(?P<sep>[ ,])\d{3})(?:(?P=sep)\d{3})*(?![\d]|[.,]\d)"
)
_DOT_THOUSANDS = LazyPattern(r"(?<![\d.,])\d{1,3}(?:\.\d{3}){2,}(?![\d]|[.,]\d)")
_PHONE = LazyPattern(r"(?<![\d.,:-])\+?\d{2,4}(?:[ .-]\d{2,4}){1,4}(?![\d]|[.,:-]\d)")
_SPELLED_DIGITS = LazyPattern(r"(?<![\d.,:-])\d(?: \d){3,}(?![\d]|[.,:-]\d)")
_DECIMAL_COMMA = LazyPattern(r"(?<![\d,])(\d+),(\d{1,2})(?![\d,])")
EN_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        _split(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
        )
    )
}
EN_NUMBER_WORDS.update(
    {
        w: str(v * 10)
        for v, w in enumerate(_split("thirty forty fifty sixty seventy eighty ninety"), 3)
    }
)
_EN_COMPOUND = LazyPattern(
    r"\b(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[- ]"
    r"(one|two|three|four|five|six|seven|eight|nine)\b"
)
"""forty-five -> 45."""
EN_NUMBER_WORDS.update(
    {
        word: str(value)
        for value, word in enumerate(
            _split(
                "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth"
            ),
            1,
        )
    }
)
EN_NUMBER_WORDS.update({"twice": "2", "thrice": "3"})
"""English number words and ordinals as digits (fact keys read them as numbers too)."""
_EN_CARDINAL = LazyPattern(r"\b(?:" + "|".join(EN_NUMBER_WORDS) + r")\b")
_TIMES = LazyPattern(r"\b(\d+) times?\b")
_ARTICLE = LazyPattern(r"\b(?:a|an|the) ")
_PERIOD = LazyPattern(r"\b(?:every|each|per) (day|week|month|year)\b")
_CONTRACTIONS = {
    "i'm": "i am", "'re": " are", "'ve": " have", "'ll": " will", "won't": "will not",
    "can't": "can not", "cannot": "can not", "n't": " not", "he's": "he is",
    "she's": "she is", "it's": "it is", "that's": "that is", "there's": "there is",
    "never": "not", "do not": "not", "does not": "not", "did not": "not",
}  # fmt: skip
"""Written out, and a negation of an action written "not" alone: "Never call me", "Don't
call me" and "Do not call me" are one wish. Expanding adds characters: `ADDED_LETTERS`."""
_CONTRACTED = LazyPattern(
    r"(?:\b(?:i'm|won't|can't|cannot|he's|she's|it's|that's|there's|never)\b"
    r"|(?<=[a-z])(?:'re|'ve|'ll|n't)\b)"
)
_DO_NOT = LazyPattern(r"\b(?:do|does|did) not\b")
ADDED_LETTERS = frozenset("areihvwlot")
"""Letters `canonical` may write that the text did not hold (an expanded contraction,
"never" as "not"): a text's normalised form need not hold these of its skeleton."""
_PLURAL = LazyPattern(r"\b([a-z]{2,}[a-hj-rtv-z])s\b")
"""A plural -s (not of -ss, -us, -is): "mornings" is "morning"."""


def _iso(year: int | None, month: int, day: int) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{year:04d}{month:02d}{day:02d}" if year is not None else f"{month:02d}{day:02d}"


def _zh_weekday(match: re.Match[str]) -> str:
    day = match.group(1)
    return f" {WEEKDAYS[int(day) - 1 if day.isdigit() else _ZH_WEEKDAY_INDEX[day]]} "


def _chinese_values(text: str) -> str:
    """Chinese weekdays, numerals, dates and clock times; each pass only when a
    character it needs is there (this runs for every entry a cache is built of)."""
    if "周" in text or "星期" in text or "礼拜" in text:
        text = _ZH_WEEKDAY.sub(_zh_weekday, text)
    text = _ZH_FINAL_PARTICLE.sub("", text)
    if "万" in text or "亿" in text:
        text = _ZH_TEN_THOUSANDS.sub(_zh_ten_thousands, text)
    text = _ZH_NUMBER_OR_WORD.sub(lambda m: m.group("word") or chinese_number(m.group("num")), text)
    if "月" in text:
        text = _ZH_DATE.sub(_zh_date, text)
    if "点" in text or "點" in text:
        text = _ZH_TIME.sub(_zh_time, text)
    if ":" in text:
        text = _ZH_PART_CLOCK.sub(_zh_part_clock, text)
    return text


def _zh_part_clock(match: re.Match[str]) -> str:
    hour, minute = int(match[2]), int(match[3])
    if match[1] in _ZH_PM and hour < 12:
        hour += 12
    return f" {hour:02d}:{minute:02d} " if hour <= 24 and minute <= 59 else match.group()


def _zh_ten_thousands(match: re.Match[str]) -> str:
    whole, fraction, unit = match[1], match[2] or "", match[3]
    zeros = 4 if unit == "万" else 8
    if len(fraction) > zeros:
        return match.group()
    return (whole + fraction.ljust(zeros, "0")).lstrip("0") or "0"


def _zh_date(match: re.Match[str]) -> str:
    year, month, day = match.groups()
    found = _iso(int(year) if year else None, int(month), int(day))
    return match.group() if found is None else f" {found} "


def _zh_time(match: re.Match[str]) -> str:
    part, hour_text, minute_text, half = match.groups()
    hour = int(hour_text)
    minute = 30 if half else int(minute_text or 0)
    if part in _ZH_PM and hour < 12:
        hour += 12
    if hour > 24 or minute > 59:
        return match.group()
    return f" {hour:02d}:{minute:02d} "


def _dates(text: str, grouped: bool) -> str:
    if grouped:
        text = _ISO_DATE.sub(lambda m: _iso(int(m[1]), int(m[2]), int(m[3])) or m.group(), text)
        text = _NUMERIC_DATE.sub(_numeric_date, text)
    text = _MONTH_DAY.sub(_month_day, text)
    return _DATED_WEEKDAY.sub(_dated_weekday, text) if "day" in text else text


def _numeric_date(match: re.Match[str]) -> str:
    first, sep, second, year = int(match[1]), match[2], int(match[3]), int(match[4])
    if sep == "." or first > 12 or first == second:
        day, month = first, second
    elif second > 12:
        month, day = first, second
    else:
        return match.group()  # 03/04/2026: which is the month is not written
    return _iso(year, month, day) or match.group()


def _month_day(match: re.Match[str]) -> str:
    if match[1]:
        month, day, year = match[1], match[2], match[3]
    else:
        day, month, year = match[4], match[5], match[6]
    return _iso(int(year) if year else None, MONTHS.index(month) + 1, int(day)) or match.group()


def _dated_weekday(match: re.Match[str]) -> str:
    """A date's added weekday is dropped when it is the date's own."""
    written = match["date"] or match["date2"]
    day = match["day"] or match["day2"]
    year, month, mday = int(written[:4]), int(written[4:6]), int(written[6:])
    try:
        own = WEEKDAYS[date(year, month, mday).weekday()]
    except ValueError:
        return match.group()
    return written if own == day else match.group()


def _clock_half(match: re.Match[str]) -> str:
    hour, minute = int(match[1]), int(match[2] or 0)
    if not (1 <= hour <= 12 and minute <= 59):
        return match.group()
    hour = hour % 12 + (12 if match["pm"] else 0)
    return f"{hour:02d}:{minute:02d}"


def _clock(match: re.Match[str]) -> str:
    hour, minute = int(match[1]), int(match[2])
    return f"{hour:02d}:{minute:02d}" if hour <= 24 and minute <= 59 else match.group()


def _at_hour(match: re.Match[str]) -> str:
    hour = int(match[2])
    return f"{match[1]} {hour:02d}:00" if hour <= 24 else match.group()


_DOT_AFTER_WORD = LazyPattern(
    r"\b(at|around|by|until|till|before|after|from)\s+(\d{1,2})\.(\d{2})(?![\d]|[.,]\d)"
    r"(?=\s*(?:$|[^\w\s$€¥%]|h\b|(?:a\.?m\.?|p\.?m\.?|every|each|on|in|at|and|or|daily|sharp|"
    r"tomorrow|today|tonight|then|to|until|till)\b|[\u4e00-\u9fff]))"
)
"""8.30 after a word that asks for a time ("at 8.30"): "1.5 years", "version 2.10", "at
2.50 dollars" are not times."""
_DOT_HALF_DAY = LazyPattern(r"(?<![\w.,:])(\d{1,2})\.(\d{2})(?=\s*[ap]\.?m\b)")
_HOURS_MARK = LazyPattern(r"(?<![\w.,:])(\d{1,2})(?:h(\d{2})|[.:](\d{2})h)(?!\w)")
"""8h30 and 18.45h."""
_PAST_TO = LazyPattern(r"\b(?:a )?(half|quarter) (past|after|to) (\d{1,2})\b(?![:.]\d)")
"""half past 8 (the number words are digits by now), quarter to 8."""


def _hours_minutes(hour: int, minute: int, written: str) -> str:
    return f"{hour}:{minute:02d}" if hour <= 24 and minute <= 59 else written


def _past_to(match: re.Match[str]) -> str:
    hour = int(match[3])
    if not 1 <= hour <= 12:
        return match.group()
    minutes = 30 if match[1] == "half" else 15
    if match[2] == "to":
        return f"{hour - 1 or 12}:{60 - minutes:02d}"
    return f"{hour}:{minutes:02d}"


def _spoken_times(text: str) -> str:
    """Times written with a dot, an h, or in words, written H:MM for `_times`."""
    if "." in text:
        text = _DOT_AFTER_WORD.sub(
            lambda m: f"{m[1]} " + _hours_minutes(int(m[2]), int(m[3]), f"{m[2]}.{m[3]}"), text
        )
        text = _DOT_HALF_DAY.sub(lambda m: _hours_minutes(int(m[1]), int(m[2]), m.group()), text)
    if "h" in text:
        text = _HOURS_MARK.sub(
            lambda m: _hours_minutes(int(m[1]), int(m[2] or m[3]), m.group()), text
        )
    if "past" in text or " to " in text or "after" in text:
        text = _PAST_TO.sub(_past_to, text)
    return text


def _times(text: str) -> str:
    text = _CLOCK_HALF.sub(_clock_half, _spoken_times(text))
    if ":" in text:
        text = _CLOCK.sub(_clock, text)
    return _AT_HOUR.sub(_at_hour, text)


def _digits_only(match: re.Match[str]) -> str:
    return re.sub(r"\D", "", match.group())


def _phone(match: re.Match[str]) -> str:
    written = match.group()
    digits = re.sub(r"\D", "", written)
    return digits if len(digits) >= 7 else written


def _numbers(text: str, grouped: bool) -> str:
    text = _ORDINAL.sub(r"\1", text)
    if not grouped:
        return text
    text = _THOUSANDS.sub(_digits_only, text)
    text = _DOT_THOUSANDS.sub(_digits_only, text)
    text = _PHONE.sub(_phone, text)
    text = _SPELLED_DIGITS.sub(_digits_only, text)
    return _DECIMAL_COMMA.sub(r"\1.\2", text)


_MAGNITUDE = LazyPattern(
    r"(?<![\d.,])(?:(\d{1,12})(?:\.(\d{1,9}))?|\ba) (hundred|thousand|million|billion)\b"
)
_MAGNITUDE_ZEROS = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9}
_CURRENCY_WORD = LazyPattern(
    r"(?<![a-z0-9_.,:])(\d+(?:\.\d+)?)\s*"
    r"(?:(dollars?|bucks?|usd)|(euros?|eur)|(yuan|rmb|元|块钱|块(?![\u4e00-\u9fff])))(?![a-z])"
)
_CURRENCY_AFTER = LazyPattern(r"(?<![a-z0-9_.,:])(\d+(?:\.\d+)?)\s*([$€¥])|([$€¥])\s+(?=\d)")
"""A currency named by a word or written after the amount: one writing, the symbol before
it ($ dollars, € euros, ¥ yuan), which drops letters and adds none."""


def _magnitude(match: re.Match[str]) -> str:
    whole, fraction, zeros = match[1] or "1", match[2] or "", _MAGNITUDE_ZEROS[match[3]]
    if len(fraction) > zeros:
        return match.group()
    return (whole + fraction.ljust(zeros, "0")).lstrip("0") or "0"


def _currency(match: re.Match[str]) -> str:
    symbol = "$" if match[2] else "€" if match[3] else "¥"
    return f"{symbol}{match[1]}"


def _currencies(text: str) -> str:
    text = _CURRENCY_AFTER.sub(lambda m: m[3] or f"{m[2]}{m[1]}", text)
    return _CURRENCY_WORD.sub(_currency, text)


def _cardinals(text: str) -> str:
    if "ty" in text:
        text = _EN_COMPOUND.sub(
            lambda m: str(int(EN_NUMBER_WORDS[m[1]]) + int(EN_NUMBER_WORDS[m[2]])), text
        )
    text = _EN_CARDINAL.sub(lambda m: EN_NUMBER_WORDS[m.group()], text)
    if "illion" in text or "hundred" in text or "thousand" in text:
        text = _MAGNITUDE.sub(_magnitude, text)
    return text


def _words(text: str) -> str:
    if "time" in text:
        text = _TIMES.sub(r"\1", text)
    if "'" in text or "never" in text or "cannot" in text:
        text = _CONTRACTED.sub(lambda m: _CONTRACTIONS[m.group()], text)
    if " not" in text:
        text = _DO_NOT.sub("not", text)
    text = _ARTICLE.sub("", text)
    if "every" in text or "each" in text or "per " in text:
        text = _PERIOD.sub(r"\1", text)
    return _PLURAL.sub(r"\1", text)


@functools.lru_cache(maxsize=1 << 15)
def canonical(text: str) -> str:
    """`text` casefolded (NFKC) with every value written one way: numbers as ASCII digits
    without separators (a decimal point, not a comma), times as HH:MM (24 h), dates as
    YYYYMMDD or MMDD without the weekday they fall on, digit groups of a phone number
    or PIN joined, weekdays and months spelled out, English contractions written short,
    plural -s dropped."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    if not text.islower():
        text = _ABBREVIATED.sub(lambda m: _ABBREVIATIONS[m.group().rstrip(".")], text)
    text = _cardinals(text.casefold())
    if _HAS_HAN.search(text):
        text = _chinese_values(text)
    if _HAS_DIGIT.search(text):
        grouped = _DIGIT_GROUPS.search(text) is not None
        text = _currencies(_numbers(_times(_dates(text, grouped)), grouped))
    return _words(text)


_HAS_HAN = LazyPattern("[\u4e00-\u9fff]")
_HAS_DIGIT = LazyPattern("[0-9]")
_DIGIT_GROUPS = LazyPattern(r"[0-9][-/., ][0-9]")
"""Digits a separator splits: a numeric date, a phone number, thousands, a decimal comma."""
_SQUASH = LazyPattern(r"(?:(?![$€¥])(?!(?<=\d)[.:](?=\d))[\s\W_])+", re.UNICODE)
"""Spaces and punctuation, but not the point of 1.5, the colon of 7:30 or a currency."""


def squashed(text: str) -> str:
    """`canonical(text)` without spaces and punctuation: equal for two writings of a text."""
    return _SQUASH.sub("", canonical(text))


_CODE = LazyPattern(r"(?<![a-z0-9])[a-z0-9]*(?:[a-z]-?[0-9]|[0-9][a-z]+[0-9])[a-z0-9]*(?![a-z0-9])")


_CLOCK_CODE = LazyPattern(r"(?:[01]?\d|2[0-4])h[0-5]\d")
"""8h30: a time, not a code."""


def codes(text: str) -> frozenset[str]:
    """Tokens that identify rather than count (qz000mk, z0007q, r1, ab12, jira-4521): letters
    before digits somewhere in one ASCII word. "3pm", "5km", "2nd" are a number and its unit,
    "8h30" a time."""
    found = _CODE.findall(unicodedata.normalize("NFKC", text).casefold())
    return frozenset(token for token in found if not _CLOCK_CODE.fullmatch(token))


_EN_SLOT_WORD = r"[a-z][a-z'\-]*"
_EN_SLOT_STOPS = frozenset(
    _split(
        "a an the my our his her their with and or but for since now near at on in to from of by "
        "as because when while so then too also again still"
    )
)
_EN_SLOT = LazyPattern(
    r"\b(?:(?:live|lives|living|lived|moved|move|moving|relocated|based)\s+(?:in|to)"
    r"|(?:work|works|working|worked|employed)\s+(?:at|for|by)"
    r"|favou?rite\s+[a-z]+\s+is)"
    rf"\s+(?:the\s+)?(?P<value>{_EN_SLOT_WORD}(?:\s+{_EN_SLOT_WORD}){{0,2}})"
)
_ZH_SLOT = LazyPattern(
    "(?:住在|住|搬到|搬去|搬家到|定居在|定居|来自)(?P<value>[\u4e00-\u9fff]{2,6}?)"
    "(?=$|[^\u4e00-\u9fff]|了|的|和|附近|一带)"
    "|在(?P<work>[\u4e00-\u9fff]{2,6}?)(?:工作|上班|上学|读书|实习)"
    "|最喜欢的[\u4e00-\u9fff]{1,3}?是(?P<liked>[\u4e00-\u9fff]{1,4}?)(?=$|[^\u4e00-\u9fff])"
)


def _english_slot(value: str) -> str:
    words = []
    for word in value.split():
        if word in _EN_SLOT_STOPS:
            break
        words.append(word)
    return " ".join(words)


@functools.lru_cache(maxsize=1 << 12)
def slots(text: str) -> tuple[str, ...]:
    """Values of single-valued attributes in `canonical(text)`: where one lives or works,
    a favourite thing, a password, PIN or phone number (`coded_slots`). A place there is a
    value, not a name: another one updates it."""
    return slots_of_canonical(canonical(text))


def slots_of_canonical(canonical_text: str) -> tuple[str, ...]:
    """`slots` of a text already made `canonical`."""
    values = [_english_slot(m["value"]) for m in _EN_SLOT.finditer(canonical_text)]
    values += [m["value"] or m["work"] or m["liked"] for m in _ZH_SLOT.finditer(canonical_text)]
    values += [value for _, value in coded_slots(canonical_text)]
    return tuple(v for v in values if v)


def mask_slots(canonical_text: str, mask: str) -> str:
    """`canonical_text` with each slot value (`slots_of_canonical`) written as `mask`."""
    for value in slots_of_canonical(canonical_text):
        canonical_text = canonical_text.replace(value, mask, 1)
    return canonical_text
