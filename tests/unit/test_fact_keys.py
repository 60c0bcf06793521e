"""`fact_keys.relation`: alike texts that differ in a number, date, name or negation are
not one memory said twice."""

from __future__ import annotations

import pytest

from memory_core.longterm.fact_keys import Relation, fact_keys, relation, skeleton

UPDATES = [
    (
        "My son Leo is in grade 3 at Hillview primary school",
        "My son Leo is in grade 4 at Hillview primary school",
    ),
    (
        "Alice's new phone number is 555-0142, call her after six",
        "Alice's new phone number is 555-0143, call her after six",
    ),
    ("I like my coffee with two sugars", "I like my coffee with three sugars"),
    ("The dentist appointment is on Monday", "The dentist appointment is on Tuesday"),
    ("The team standup is every morning", "The team standup is every evening"),
    ("The user likes spicy food", "The user doesn't like spicy food"),
    ("The user is vegetarian", "The user is not vegetarian"),
    ("我儿子上三年级", "我儿子上四年级"),
    ("用户的儿子今年八岁，在读小学", "用户的儿子今年九岁，在读小学"),
    ("用户不喜欢喝咖啡", "用户喜欢喝咖啡"),
    ("用户没有养宠物", "用户养宠物"),
    ("用户对这个项目毫无兴趣", "用户对这个项目有兴趣"),
    ("用户每周一去健身房", "用户每周二去健身房"),
    ("用户明天要开会", "用户后天要开会"),
    ("用户的年薪是十二万", "用户的年薪是十五万"),
]

DIFFERENT = [
    ("My son Leo is in grade 3", "My son Max is in grade 3"),
    ("Alice's phone number is 555-0142", "Carol's phone number is 555-0142"),
    ("Uses FastAPI for the backend services", "Uses Flask for the backend services"),
    ("用户的猫叫小橘", "用户的猫叫小白"),
    ("用户的同事张伟负责后端开发", "用户的同事李娜负责后端开发"),
    ("我女儿叫小红，喜欢画画", "我女儿叫小丽，喜欢画画"),
]

RESTATES = [
    ("User prefers pytest over unittest", "The user prefers pytest over unittest."),
    ("Goes to Hillview Primary School", "Goes to Hillview primary school"),
    ("我儿子上三年级", "我儿子上3年级"),
    ("My son is in grade three", "My son is in grade 3"),
    ("用户一直喜欢喝茶", "用户一直喜欢喝茶啊"),
    ("用户喜欢用中文交流", "用户喜欢用中文交流。"),
    ("用户的猫叫小橘", "用户的猫叫小橘。"),
    ("I do not like mornings", "I don't like mornings"),
    ("用户偏好用 pytest 而非 unittest", "用户喜欢 pytest"),  # 而非: rather than
    ("用户不错过任何一场比赛", "用户不错过任何一场比赛！"),
]


@pytest.mark.parametrize(("old", "new"), UPDATES)
def test_a_changed_number_date_or_negation_is_an_update(old: str, new: str) -> None:
    assert relation(old, new) is Relation.UPDATES
    assert relation(new, old) is Relation.UPDATES


@pytest.mark.parametrize(("old", "new"), DIFFERENT)
def test_another_name_is_a_different_fact(old: str, new: str) -> None:
    assert relation(old, new) is Relation.DIFFERENT
    assert relation(new, old) is Relation.DIFFERENT


@pytest.mark.parametrize(("old", "new"), RESTATES)
def test_the_same_fact_written_otherwise_restates_it(old: str, new: str) -> None:
    assert relation(old, new) is Relation.RESTATES


def test_numbers_are_read_as_values() -> None:
    keys = fact_keys("二〇二四年 十二 两千三百 一万两千 3rd 1,000 twenty")
    assert sorted(keys.numbers) == sorted(["2024", "12", "2300", "12000", "3", "1000", "20"])


def test_words_that_hold_a_numeral_or_a_negation_are_not_one() -> None:
    keys = fact_keys("用户一直非常喜欢和别人一起不过周末")
    assert keys.numbers == ()
    assert keys.negations == 0
    assert keys.dates == {"周末"}


def test_a_third_person_chinese_name_is_found() -> None:
    assert fact_keys("用户的猫叫小橘").names == {"小橘"}
    assert fact_keys("我儿子上三年级").names == frozenset()


def test_hostile_numerals_do_not_break_the_keys() -> None:
    keys = fact_keys("一" * 10_000)
    assert keys.numbers == ("1" * 10_000,)


def test_the_skeleton_masks_numbers_and_dates_and_drops_negations() -> None:
    assert skeleton("我儿子上三年级") == skeleton("我儿子上4年级")
    assert skeleton("I don't like tea") == skeleton("I do not like tea") == skeleton("I like tea")
    assert skeleton("Meeting on Monday at 5pm") == skeleton("meeting on Tuesday at 6 PM")
    assert skeleton("用户一直喜欢喝茶") != skeleton("用户喜欢喝茶")
    assert skeleton("用户的猫叫小橘") != skeleton("用户的猫叫小白")
