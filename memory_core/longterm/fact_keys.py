"""What makes two nearly identical texts two facts: numbers, dates, codes, names, negation.

The merge takes two texts whose bigrams are at least 85 % alike for one memory said again
(`matching.SIMILAR`). That holds for "My son Leo is in grade 3" and "... grade 4 ...", for
two phone numbers, for 喜欢 and 不喜欢: the texts differ in exactly the part that matters.
`relation` tells such a pair apart by the keys a fact turns on, found by offline rules on
the values' one writing (`values.canonical`: "at 7" = "at 07:00", 三 = 3 = three):

* the same canonical text RESTATES the old one, however its values were written;
* another code or id (`values.codes`: qz000mk, z0007q; unless it is the value of one
  attribute both give one, `coded_slots`: another wifi password) or another name (a capitalised
  word, or a Chinese name after 叫/姓/a relation word or with a common surname) makes them
  DIFFERENT facts: both are kept, neither loses score;
* otherwise different numbers, dates (month, weekday and day words), a different count of
  negations or another value of a single-valued attribute (`values.slots`: where one
  lives or works) make the new text an UPDATE of the old one: it is added and the old one
  is contradicted (score × 0.5);
* otherwise it RESTATES the old one, which is reinforced.

Texts too short for their bigrams to be alike ("我儿子上三年级" / "四年级") are paired by
their `skeleton` instead: the canonical text with values masked and negations dropped.

Pure. `fact_keys` is not cached: the merge asks only about pairs already alike, which is
rare. `skeleton` is (the merge computes it for every short entry of a category).
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from memory_core.base.patterns import LazyPattern
from memory_core.longterm.coded_slots import coded_slots
from memory_core.longterm.values import (
    ADDED_LETTERS,
    EN_NUMBER_WORDS,
    ZH_NOT_NUMBERS,
    ZH_NUMERAL,
    canonical,
    chinese_number,
    codes,
    mask_slots,
    slots_of_canonical,
    squashed,
)


class Relation(StrEnum):
    RESTATES = "restates"
    """The same fact said again: reinforce the old entry."""
    UPDATES = "updates"
    """The same subject with a changed number, date or negation: the new text replaces it."""
    DIFFERENT = "different"
    """Another person, pet or place: a memory of its own."""


@dataclass(frozen=True, slots=True)
class FactKeys:
    numbers: tuple[str, ...]
    """Every number as a value (digits as written, numerals converted), sorted."""
    dates: frozenset[str]
    """Month, weekday and day words, casefolded."""
    names: frozenset[str]
    """Capitalised English words and Chinese names, casefolded."""
    negations: int
    """How many negations the text holds (not, n't, never, 不, 没, ...)."""
    slots: tuple[str, ...] = ()
    """Values of single-valued attributes (`values.slots`: where one lives or works)."""


def _words(text: str) -> list[str]:
    return text.split()


# Lowercase "may" is a verb: only "May" is the month (with the abbreviations below).
_MONTHS = "january february march april june july august september october november december"
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
_EN_DATES = frozenset(
    _words(
        f"{_MONTHS} {_WEEKDAYS} today tomorrow yesterday tonight weekend weekday morning "
        "afternoon evening night noon midnight am pm"
    )
)
_EN_DATE_ABBREVIATIONS = frozenset(
    _words(
        "Jan Feb Mar Apr May Jun Jul Aug Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thurs Fri Sat "
        "Sun"
    )
)
_EN_NOT_NAMES = frozenset(
    _words(
        "i a an the my our your his her its their this that these those he she it they we "
        "you me him them us user users and or but so if when while because since also then "
        "now there here what which who whom whose where why how in on at to for from of by "
        "with about after before as is are was were be been am do does did has have had will "
        "would can could should shall must may might please yes no not never every each all "
        "some any both either neither one dear hi hello ok okay mr mrs ms dr"
    )
)
_EN_NEGATIONS = frozenset(
    _words("not no never none nobody nothing neither nor without cannot nowhere")
)
_EN_WORD = LazyPattern(r"[A-Za-z]+(?:['’][A-Za-z]+)*")
_NOISE = LazyPattern(r"[\s\W_]+", re.UNICODE)
"""What `matching.normalize_content` drops (case, width, spaces, punctuation)."""
_ASCII_DIGITS = LazyPattern(r"[0-9]+(?:[.:][0-9]+)*")
_DIGITS = LazyPattern(r"[$€¥]?\d+(?:[.:]\d+)*")
"""A number with its currency (`values.canonical` writes one as a symbol): $500 is not €500."""
_THOUSANDS = LazyPattern(r"(?<=\d),(?=\d{3}(?!\d))")

_ZH_DATES = LazyPattern(
    "今天|明天|后天|昨天|前天|今晚|明晚|昨晚|早上|上午|中午|下午|晚上|凌晨|周末|"
    "上周|下周|本周|这周|上个?月|下个?月|这个月|本月|今年|明年|去年|前年|"
    "(?:周|星期|礼拜)[一二三四五六日天]"
)
_ZH_NEGATION = LazyPattern("[不没别未非无勿莫]")
_ZH_NOT_NEGATIONS = LazyPattern(
    "不错|不过|不同|不断|不少|不仅|不但|不管|不论|不久|不禁|不然|非常|无论|别人|别的|"
    "特别|分别|区别|告别|级别|类别|性别|差别|未来|无聊|而非|除非|是非|无线"
)
"""Words with a negation character that negate nothing ("pytest 而非 unittest": rather
than). Every first character here is in `_ZH_KEY`'s look-ahead."""
_ZH_RELATIONS = (
    "儿子|女儿|老婆|妻子|老公|丈夫|妈妈|爸爸|哥哥|姐姐|弟弟|妹妹|同事|朋友|老板|老师|"
    "男朋友|女朋友|猫咪|小猫|猫|狗狗|小狗|狗|宠物"
)
_ZH_NAMED = "叫做|叫|名叫|名字是|姓"
_ZH_NAME_AFTER = LazyPattern(
    f"(?:(?:{_ZH_RELATIONS})(?:的名字是|{_ZH_NAMED})?|{_ZH_NAMED})(?P<name>[\u4e00-\u9fff]{{1,3}})"
)
_ZH_SURNAME_NAME = LazyPattern(
    "(?P<name>[王李张刘陈杨赵吴徐朱胡郭林罗郑梁宋唐冯邓曹彭肖董袁潘蒋蔡魏吕丁沈姚卢崔谭汪"
    "廖贾韦邹孟秦尹薛闫侯郝龚邵覃孔][\u4e00-\u9fff])"
)
"""Common surnames that are rarely the first character of an ordinary word."""
_ZH_PARTICLES = frozenset("的了是在和也都很着过吗呢吧啊")
_ZH_NUMERALS = frozenset("零〇一二两三四五六七八九十百千万亿")
_ZH_NOT_NAME_START = (
    _ZH_PARTICLES | _ZH_NUMERALS | frozenset("上下去有会要就还又才把被给对跟说喜爱住读做当今明每在")
)
"""A character after 叫/儿子/... that starts a sentence's rest, not a name."""
_ZH_NAME_STOPS = _ZH_PARTICLES | _ZH_NUMERALS
_ZH_THIRD_STOPS = _ZH_NOT_NAME_START | frozenset("年岁月日号")
"""A third character that ends a Chinese name rather than continues it."""


def _numbers(text: str) -> tuple[str, ...]:
    found = [match.group() for match in _DIGITS.finditer(_THOUSANDS.sub("", text))]
    found += [
        EN_NUMBER_WORDS[w]
        for w in map(str.casefold, _EN_WORD.findall(text))
        if w in EN_NUMBER_WORDS
    ]
    chinese = ZH_NOT_NUMBERS.sub("，", text)
    found += [chinese_number(run) for run in ZH_NUMERAL.findall(chinese)]
    return tuple(sorted(found))


def _english_words(text: str) -> list[str]:
    """Words with a possessive 's dropped ("Alice's" -> "Alice")."""
    return [re.sub(r"['’]s$", "", word) for word in _EN_WORD.findall(text)]


def _cut_name(run: str) -> str:
    """The name at the start of `run` (up to three Han characters): none when `run` starts
    with a particle, a numeral or a verb; cut before a particle or numeral, and before a
    third character that usually starts the rest of a sentence (年, 今, 喜, ...)."""
    if not run or run[0] in _ZH_NOT_NAME_START:
        return ""
    name = run[0]
    for index, ch in enumerate(run[1:], 1):
        if ch in _ZH_NAME_STOPS or (index == 2 and ch in _ZH_THIRD_STOPS):
            break
        name += ch
    return name


def _chinese_names(text: str) -> set[str]:
    names = {_cut_name(match.group("name")) for match in _ZH_NAME_AFTER.finditer(text)}
    names.update(match.group("name") for match in _ZH_SURNAME_NAME.finditer(text))
    names.discard("")
    return names


def _not_a_name(word: str) -> bool:
    """A contraction ("I'm", "Don't", "It's") or a value word, however capitalised."""
    folded = word.casefold()
    return (
        folded in _EN_NOT_NAMES
        or folded in _EN_DATES
        or word in _EN_DATE_ABBREVIATIONS
        or folded in EN_NUMBER_WORDS
        or folded.endswith("n't")
        or folded.split("'")[0] in _EN_NOT_NAMES
    )


def fact_keys(text: str) -> FactKeys:
    """The keys `relation` compares, for one text: values read in their one writing
    (`values.canonical`), names in the text as written (they need its capitals)."""
    written = canonical(text)
    found_slots = slots_of_canonical(written)
    slot_words = {word for value in found_slots for word in value.split()}
    slot_words.update(part.casefold() for value in found_slots for part in _EN_WORD.findall(value))
    words = _english_words(written)
    dates = {w for w in words if w in _EN_DATES}
    dates.update(_ZH_DATES.findall(written))
    names = {
        word.casefold()
        for word in _english_words(unicodedata.normalize("NFKC", text).replace("’", "'"))
        if word[0].isupper() and not _not_a_name(word) and squashed(word) not in slot_words
    }
    names.update(name for name in _chinese_names(text) if not any(name in v for v in found_slots))
    negations = sum(1 for w in words if w in _EN_NEGATIONS or w.endswith("n't"))
    negations += len(_ZH_NEGATION.findall(_ZH_NOT_NEGATIONS.sub("", written)))
    return FactKeys(_numbers(written), frozenset(dates), frozenset(names), negations, found_slots)


_NUMBER_MASK = "0"
_DATE_MASK = "date"
_EN_NEGATED = {"cannot": "can", "can't": "can", "won't": "will"}
_EN_TOKEN = LazyPattern(r"\b(?:do|does|did) not\b|[a-z]+(?:'[a-z]+)?")
"""On casefolded NFKC text: the words `_mask_english` looks at ("do not" as one)."""
_ZH_KEY = LazyPattern(
    "(?=[一统唯万十千不同三七非无别特分区告级类性差未而除是今明后昨前早上中下晚凌周本这去星礼"
    "零〇二两四五六八九百亿没勿莫])"  # the first characters below: fail fast elsewhere
    f"(?:(?P<word>{ZH_NOT_NUMBERS.pattern}|{_ZH_NOT_NEGATIONS.pattern})"
    f"|(?P<date>{_ZH_DATES.pattern})|(?P<number>{ZH_NUMERAL.pattern})|{_ZH_NEGATION.pattern})"
)
"""Chinese words kept as they are, dates, numbers, and negations, in that order."""
_HAS_HAN = LazyPattern("[\u4e00-\u9fff]")


_EN_DO_NOT = frozenset({"do not", "does not", "did not", "don't", "doesn't", "didn't"})


def _mask_english(match: re.Match[str]) -> str:
    word = match.group()
    if word in EN_NUMBER_WORDS:
        return _NUMBER_MASK
    if word in _EN_DATES:
        return _DATE_MASK
    if word in _EN_NEGATED:
        return _EN_NEGATED[word]
    if word.endswith("n't"):
        # "isn't" -> "is"; "don't like", like "do not like", -> "like"
        return "" if word in _EN_DO_NOT else word[:-3]
    if word in _EN_NEGATIONS or word in _EN_DO_NOT:
        return ""
    return word


def _mask_chinese(match: re.Match[str]) -> str:
    if match.group("word"):
        return match.group("word")
    if match.group("date"):
        return _DATE_MASK
    return _NUMBER_MASK if match.group("number") else ""


_SKELETONS: dict[str, str] = {}
_SKELETONS_KEPT = 1 << 18
"""Texts whose skeleton is remembered (oldest forgotten first), seeded by the long-term
parse cache (`remember_skeletons`): a skeleton costs tens of microseconds, and a capture
may ask for those of every short entry of its category."""


def skeleton(text: str) -> str:
    """`text` with its numbers and dates masked and its negations dropped, normalized like
    `matching.normalize_content`: two texts with one skeleton say the same but for those keys
    ("我儿子上三年级" and "我儿子上四年级", "I like tea" and "I don't like tea"), even when
    too short for their bigrams to be alike. One pass per script: the merge computes it
    for every entry of a category."""
    found = _SKELETONS.get(text)
    if found is not None:
        return found
    folded = mask_slots(canonical(text), _NUMBER_MASK)
    masked = _EN_TOKEN.sub(_mask_english, folded)
    if _HAS_HAN.search(masked):
        masked = _ZH_KEY.sub(_mask_chinese, masked)
    masked = _ASCII_DIGITS.sub(_NUMBER_MASK, masked)
    found = _NOISE.sub("", masked)
    if len(_SKELETONS) >= _SKELETONS_KEPT:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del _SKELETONS[next(iter(_SKELETONS))]  # another thread may be at it too
    _SKELETONS[text] = found
    return found


def known_skeleton(text: str) -> str | None:
    """`skeleton(text)` if it is remembered, else None (nothing is computed)."""
    return _SKELETONS.get(text)


def known_skeletons(texts: Iterable[str]) -> list[str | None]:
    """`known_skeleton` of each text (one C-level pass: a category holds thousands)."""
    return list(map(_SKELETONS.get, texts))


def remember_skeletons(texts: Sequence[str], skeletons: Iterable[str | None]) -> None:
    """Take `skeletons[i]` as `skeleton(texts[i])` where it is not None: what the parse
    cache kept, made by this very function (its format names the Unicode version)."""
    if len(_SKELETONS) + len(texts) > _SKELETONS_KEPT:
        _SKELETONS.clear()  # room for these first: they are what is wanted now
    _SKELETONS.update((t, k) for t, k in zip(texts, skeletons, strict=True) if k is not None)


def kept_characters(key: str) -> str:
    """Characters every text whose skeleton is `key` holds in its normalized form, rarest
    (highest code point, so Han before Latin) first: those of `key` outside its masks.

    A skeleton keeps only characters of its text (a word, part of one: "can" of
    "cannot"), besides its masks, and normalizes like `matching.normalize_content`; so
    a text lacking one of these cannot have the skeleton `key`. Every `date` and `0` of
    `key` is left out, a mask or not, and so is every letter a written-out contraction
    may add (`values.ADDED_LETTERS`): a weaker test, never a wrong one."""
    kept = set(key.replace(_DATE_MASK, "").replace(_NUMBER_MASK, "")) - ADDED_LETTERS
    return "".join(sorted(kept, reverse=True))


def _folded_words(text: str) -> frozenset[str]:
    return frozenset(word.casefold() for word in _english_words(text))


def _names_only_in(one: str, keys: FactKeys, other: str) -> bool:
    """Whether `one` names someone `other` does not mention at all (in any case): a name
    written differently ("Primary School" / "primary school") is not another name."""
    other_words = _folded_words(other)
    other_folded = other.casefold()
    for name in keys.names:
        if name.isascii():
            if name not in other_words:
                return True
        elif name not in other_folded:
            return True
    return False


def _other_place(old: tuple[str, ...], new: tuple[str, ...]) -> bool:
    """Whether both texts give a single-valued attribute a value and no value of one is
    part of one of the other's: 杭州 / 杭州西湖区 is the same city said more precisely."""
    if not old or not new:
        return False
    return not any(a in b or b in a for a in old for b in new)


def _codes_apart(old: str, new: str) -> bool:
    """Whether the texts differ in a code that is not the value of one attribute both
    give a value: another password for the same wifi is an update, not another thing."""
    old_codes, new_codes = codes(old), codes(new)
    if old_codes == new_codes:
        return False
    old_values, new_values = dict(coded_slots(canonical(old))), dict(coded_slots(canonical(new)))
    changed = [a for a in old_values.keys() & new_values.keys() if old_values[a] != new_values[a]]
    if not changed:
        return True
    old_codes -= codes(" ".join(old_values[a] for a in changed))
    new_codes -= codes(" ".join(new_values[a] for a in changed))
    return old_codes != new_codes


def relation(old: str, new: str) -> Relation:
    """How `new` stands to `old`, two texts the merge found alike (the same either way
    round)."""
    if squashed(old) == squashed(new):
        return Relation.RESTATES  # the same values, written otherwise
    if _codes_apart(old, new):
        return Relation.DIFFERENT  # another id or code: another thing
    a, b = fact_keys(old), fact_keys(new)
    if _names_only_in(old, a, new) or _names_only_in(new, b, old):
        return Relation.DIFFERENT
    if (
        a.numbers != b.numbers
        or a.dates != b.dates
        or a.negations != b.negations
        or _other_place(a.slots, b.slots)
    ):
        return Relation.UPDATES
    return Relation.RESTATES
