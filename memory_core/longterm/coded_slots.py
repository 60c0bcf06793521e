"""Attributes with one value that is a code or a number: a password, a PIN, a door code,
a phone number, an email, an address, an account or ID number, a licence plate.

"The wifi password for the office is K9X2QQ71" and "... is ZZ81PL03" give one attribute
two values: the second is an update, though the two texts differ in a code (which
otherwise makes them two facts, `fact_keys.relation`). Only "X is V" / "X: V" / "我的X是V"
count, and only a value holding a digit or "@": "flood r1 number 7 z0007q" names no
attribute, "My phone is broken" gives none a value. The attribute is kept with its
value, so "My PIN is 1234" and "My locker code is 1234" stay two things.

Pure: reads text already made `values.canonical` (casefolded, articles dropped).
"""

from __future__ import annotations

from memory_core.base.patterns import LazyPattern

_EN_KEY = (
    r"(?:pass(?:word|code|phrase)|pin(?: code| number)?|code|combination"
    r"|(?:tele)?phone(?: number)?|mobile(?: number)?|cell(?: number)?"
    r"|e-?mail(?: address)?|address|user ?name|login"
    r"|(?:account|id|membership|passport|customer|employee|student|card|member|tax)"
    r" (?:number|no\.?|id)|id"
    r"|licen[cs]e plate(?: number)?|plate number|number plate)"
)
_EN_CODED = LazyPattern(
    r"(?:\b(?P<before>[a-z][a-z0-9\-]*) )?\b(?P<key>" + _EN_KEY + r")"
    r"(?P<of> (?:for|of|at|to|on|in) [a-z][a-z0-9'\-]*)?"
    r"(?: (?:is|was changed to|changed to|has changed to)(?: now)?|\s*[:=])"
    r" (?P<value>[^\s,;]*[0-9@][^\s,;]*(?: [a-z0-9#\-./]+){0,4})"
)


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_EN_NOT_QUALIFIERS = _word_set(
    "my our your his her their its new old current updated actual real main and or"
)
_EN_VALUE_STOPS = _word_set(
    "and or but for since now at on in to from of by as with because when while so then "
    "too also again still"
)
_EN_ONE_OF_MANY = _word_set(
    "order ticket booking tracking reference case invoice transaction issue bug request "
    "confirmation parcel package shipment receipt flight reservation"
)
"""What one has many of: "my order id is X1" then "... X2" is another order."""
_ZH_CODED = LazyPattern(
    "(?P<before>wi-?fi|门禁|银行卡|保险箱|储物柜|电脑|邮箱|家里的?|公司的?|办公室的?)?"
    "(?P<key>密码|口令|门禁码|电话号码|电话|手机号码|手机号|邮箱地址|邮箱|地址|账号|帐号|卡号|"
    "身份证号码|身份证号|车牌号码|车牌号|车牌|工号|学号|会员号)"
    r"\s*(?:是|为|:|：|改成了?|换成了?|改为)\s*"
    r"(?P<value>[a-z0-9@._+\-#]*[0-9@][a-z0-9@._+\-#]*)"
)


def _english_value(value: str) -> str:
    words = []
    for word in value.split():
        if word in _EN_VALUE_STOPS:
            break
        words.append(word)
    return " ".join(words).rstrip(".")


def coded_slots(canonical_text: str) -> tuple[tuple[str, str], ...]:
    """(attribute, value) for each code or number an attribute is given in
    `canonical_text`: ("wifi password for office", "k9x2qq71"), ("pin", "1234")."""
    found: list[tuple[str, str]] = []
    if any(ch.isdigit() or ch == "@" for ch in canonical_text):
        for match in _EN_CODED.finditer(canonical_text):
            before = match["before"]
            if before in _EN_ONE_OF_MANY:
                continue
            qualifier = before if before and before not in _EN_NOT_QUALIFIERS else ""
            attribute = " ".join(
                w for w in (qualifier, match["key"], (match["of"] or "").strip()) if w
            )
            value = _english_value(match["value"])
            if "address" not in match["key"] and "plate" not in match["key"]:
                value = value.split(" ")[0] if value else value  # one token: a code, a number
            if value:
                found.append((attribute, value))
        for match in _ZH_CODED.finditer(canonical_text):
            found.append(((match["before"] or "").rstrip("的") + match["key"], match["value"]))
    return tuple(found)
