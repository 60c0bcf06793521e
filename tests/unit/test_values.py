"""`values.canonical`: one writing per value, so a restatement compares equal; `codes`
and `slots`: what tells two facts apart and what a single-valued attribute holds."""

from __future__ import annotations

import pytest

from memory_core.longterm.coded_slots import coded_slots
from memory_core.longterm.fact_keys import Relation, kept_characters, relation, skeleton
from memory_core.longterm.matching import normalize_content
from memory_core.longterm.values import canonical, codes, slots, squashed

SAME = {
    "numbers": [
        ("grade 3", "grade ３"),
        ("5000 dollars", "5 000 dollars"),
        ("5000 dollars", "5,000 dollars"),
        ("25000000 won", "25.000.000 won"),
        ("1.5 years", "1,5 years"),
        ("three cups", "3 cups"),
        ("forty-five minutes", "45 minutes"),
        ("the 3rd grade", "the third grade"),
        ("年薪十二万", "年薪120000"),
        ("年薪十二万", "年薪12万"),
        ("两千三百元", "2300元"),
    ],
    "times": [
        ("at 7", "at 07"),
        ("at 7", "at 7:00"),
        ("at 3pm", "at 15:00"),
        ("at 5 p.m.", "at 17:00"),
        ("at 9 in the evening", "at 21:00"),
        ("at 7:45 am", "at 7:45"),
        ("七点起床", "7:00起床"),
        ("下午三点", "15:00"),
        ("早上六点半", "06:30"),
        ("晚上 9:30", "21:30"),
    ],
    "dates": [
        ("2026-12-24", "24.12.2026"),
        ("2026-12-24", "2026-12-24 (Thursday)"),
        ("2026-12-24", "Thursday, 2026-12-24"),
        ("2026-12-24", "December 24, 2026"),
        ("2026-12-24", "24 Dec 2026"),
        ("12/25/2026", "2026-12-25"),
        ("2026年12月24日", "2026-12-24"),
        ("2026年12月24日（星期四）", "2026-12-24"),
        ("the 3rd of August", "3 August"),
    ],
    "dotted and spoken times": [
        ("The train leaves at 8:30", "The train leaves at 8.30"),
        ("at 18:45", "at 18.45"),
        ("by 9:15", "by 9.15"),
        ("until 17:30", "until 17.30"),
        ("at 8:30am", "at 8.30am"),
        ("at 8:30 pm", "at 8.30 p.m."),
        ("at 18:45", "at 18.45h"),
        ("at 8:30", "at 8h30"),
        ("at 8:30", "at half past eight"),
        ("at 8:30", "at half past 8"),
        ("at 20:30", "at half past 8 pm"),
        ("at 7:15", "at quarter past seven"),
        ("at 9:45", "at a quarter to ten"),
        ("at 12:45", "at quarter to one"),
    ],
    "amounts and currencies": [
        ("1,000 dollars", "one thousand dollars"),
        ("1000 dollars", "a thousand dollars"),
        ("1,000 dollars a week", "$1,000 a week"),
        ("500 euros", "€500"),
        ("500 euros", "500€"),
        ("1.5 million yuan", "1500000 yuan"),
        ("房租三千元", "房租¥3000"),
        ("房租3000块", "房租3000元"),
        ("房租3000块钱", "房租￥3000"),
    ],
    "digit groups": [
        ("555-1234", "5551234"),
        ("13800138000", "138 0013 8000"),
        ("415.555.2671", "415-555-2671"),
        ("PIN 1234", "PIN 1 2 3 4"),
    ],
    "weekdays": [
        ("Mon and Wed", "Monday and Wednesday"),
        ("every Sat", "every Saturday"),
        ("周一", "星期一"),
        ("礼拜天", "周日"),
    ],
    "contractions": [
        ("I am not", "I'm not"),
        ("Never call me", "Don't call me"),
        ("Do not call me", "Don't call me"),
        ("I will not go", "I won't go"),
        ("I cannot swim", "I can't swim"),
        ("She is not here", "She isn't here"),
        ("I have never been", "I've never been"),
    ],
    "plurals and counts": [
        ("in the morning", "in the mornings"),
        ("twice a week", "2 times a week"),
        ("three times a week", "3 times a week"),
        ("once a week", "once every week"),
        ("我不喜欢喝咖啡", "我不喜欢喝咖啡了"),
    ],
}
APART = [
    ("at 7", "at 8"),
    ("at 3pm", "at 3am"),
    ("下午三点", "三点"),
    ("2026-12-24", "2026-12-23"),
    ("03/04/2026", "04/03/2026"),  # which is the month is not written: kept as written
    ("555-0142", "555-0143"),
    ("Monday", "Tuesday"),
    ("I am", "I am not"),
    ("1.5 years", "15 years"),
    ("at 8.30", "at 8.45"),
    ("at half past 8", "at half past 9"),
    ("at quarter past 10", "at quarter to 10"),
    ("500 dollars", "500 euros"),
    ("at 8:30", "at 20:30"),
]
NOT_TIMES = ["1.5 years", "version 2.10", "it costs 2.50", "at 2.50 dollars", "3.14 is pi"]


@pytest.mark.parametrize(
    ("old", "new"),
    [pair for pairs in SAME.values() for pair in pairs],
    ids=[f"{kind}:{old}" for kind, pairs in SAME.items() for old, _ in pairs],
)
def test_one_value_written_two_ways_is_one_writing(old: str, new: str) -> None:
    assert squashed(old) == squashed(new), (canonical(old), canonical(new))
    assert skeleton(old) == skeleton(new)


@pytest.mark.parametrize(("old", "new"), APART)
def test_different_values_stay_apart(old: str, new: str) -> None:
    assert squashed(old) != squashed(new)


@pytest.mark.parametrize("text", NOT_TIMES)
def test_a_dotted_number_without_a_time_word_is_not_a_time(text: str) -> None:
    assert ":" not in canonical(text)


def test_an_impossible_date_or_time_is_not_read_as_one() -> None:
    assert canonical("at 31:00") == "at 31:00"
    assert canonical("2026-13-45") != canonical("2027-01-14")
    assert canonical("at 25pm") == "at 25pm"


def test_hostile_runs_stay_cheap_and_exact() -> None:
    assert canonical("一" * 10_000) == "1" * 10_000
    assert canonical("9" * 5_000) == "9" * 5_000
    assert canonical("1 " * 2_000).replace(" ", "") == "1" * 2_000


def test_codes_are_letter_and_digit_tokens_not_numbers_with_units() -> None:
    assert codes("flood r1 stdio number 7 qz000mk z0007q") == {"r1", "qz000mk", "z0007q"}
    assert codes("Ticket JIRA-4521 is mine") == {"jira-4521"}
    assert codes("at 3pm, 5km, the 2nd, 10kg") == frozenset()
    assert codes("用户的订单号是ab1234") == {"ab1234"}
    assert codes("the train leaves at 8h30") == frozenset()  # a time


def test_slots_hold_the_value_of_a_single_valued_attribute() -> None:
    assert slots("I live in Berlin with my wife") == ("berlin",)
    assert slots("My husband works for Google") == ("google",)
    assert slots("我住在北京") == ("北京",)
    assert slots("我在腾讯工作") == ("腾讯",)
    assert slots("I like green tea") == ()
    assert slots("The wifi password for the office is K9X2QQ71") == ("k9x2qq71",)
    assert slots("我的wifi密码是K9X2QQ71") == ("k9x2qq71",)


def test_coded_slots_name_the_attribute_and_need_is_or_a_colon() -> None:
    def found(text: str) -> tuple[tuple[str, str], ...]:
        return coded_slots(canonical(text))

    assert found("The wifi password for the office is K9X2QQ71") == (
        ("wifi password for office", "k9x2qq71"),
    )
    assert found("My PIN is 1234") == (("pin", "1234"),)
    assert found("My locker code is 1234") == (("locker code", "1234"),)
    assert found("Door code: 4512") == (("door code", "4512"),)
    assert found("My phone number is 555-1234") == (("phone number", "5551234"),)
    assert found("My email is ann@example.com") == (("email", "ann@example.com"),)
    assert found("My address is 12 Baker Street, London") == (("address", "12 baker street"),)
    assert found("我的邮箱是ann@example.com") == (("邮箱", "ann@example.com"),)
    assert found("公司的门禁码是8831") == (("公司门禁码", "8831"),)
    assert found("flood r1 stdio number 7 qz000mk z0007q") == ()  # no "is": no attribute
    assert found("My phone is broken") == ()  # a value needs a digit or an @
    assert found("My order id is X1234") == ()  # one of many orders, not one value


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "The wifi password for the office is K9X2QQ71",
            "The wifi password for the office is ZZ81PL03",
            Relation.UPDATES,
        ),
        ("我的wifi密码是K9X2QQ71", "我的wifi密码是ZZ81PL03", Relation.UPDATES),
        ("Our gate code: AB12", "Our gate code: CD34", Relation.UPDATES),
        ("My PIN is 1234", "My locker code is 1234", Relation.DIFFERENT),
        (
            "The wifi password at home is K9X2QQ71",
            "The wifi password for the office is ZZ81PL03",
            Relation.DIFFERENT,
        ),
        (
            "flood r1 stdio number 7 qz000mk z0007q",
            "flood r1 stdio number 8 qz000mk z0008q",
            Relation.DIFFERENT,
        ),
        ("ticket AB12 is mine", "ticket CD34 is mine", Relation.DIFFERENT),
        ("My booking code is QX12", "My booking code is RT34", Relation.DIFFERENT),
    ],
)
def test_a_code_that_is_an_attributes_value_updates_it(
    old: str, new: str, expected: Relation
) -> None:
    assert relation(old, new) is expected


def test_a_skeleton_needs_no_letter_a_text_did_not_hold() -> None:
    for text in [
        "I'm not here",
        "Never call me",
        "I won't go",
        "twice a week",
        "Mon and Wed",
        "at half past eight",
        "one thousand dollars",
        "My PIN is 1234",
    ]:
        assert set(kept_characters(skeleton(text))) <= set(normalize_content(text)), text
