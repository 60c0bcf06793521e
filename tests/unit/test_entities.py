"""Entities found offline by rules, and the query expansion recall will use."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import MemoryEntry
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.entities import EntityKind, Holders, expand_query, extract_entities

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def entry(n: int, text: str) -> MemoryEntry:
    return MemoryEntry(
        id=f"{n:08x}", content=text, category="fact", score=0.6,
        created_at=NOW, last_activated=NOW, scored_at=NOW,
    )  # fmt: skip


ENTRIES = [
    entry(1, "我的猫叫小橘，很喜欢吃鱼"),
    entry(2, "小橘昨天去看了兽医"),
    entry(3, "My dog is called Max"),
    entry(4, "Alice moved to Hangzhou in May"),
    entry(5, "我老婆叫小雪"),
    entry(6, "Working on project Apollo this month"),
    entry(7, "my dog Max hates baths"),
]


def test_rules_find_pets_people_places_and_projects() -> None:
    found = {e.name: e for e in extract_entities(ENTRIES)}
    assert found["小橘"].kind is EntityKind.PET
    assert found["小橘"].aliases == ("我的猫", "猫")
    assert found["小橘"].facts == ("00000001", "00000002")
    assert found["Max"].aliases == ("my dog",) and found["Max"].facts == ("00000003", "00000007")
    assert found["小雪"].kind is EntityKind.PERSON
    assert found["Hangzhou"].kind is EntityKind.PLACE and found["Hangzhou"].aliases == ()
    assert found["Apollo"].kind is EntityKind.PROJECT


THIRD_PERSON_AND_ENGLISH = [
    entry(11, "用户的猫叫小橘"),
    entry(12, "My dog Rex loves the beach"),
    entry(13, "I work at Acme Corp in Berlin"),
    entry(14, "The user's son Leo is in grade 3 at Hillview primary school"),
    entry(15, "User's wife is called Anna"),
    entry(16, "Alice's cat is called Xiaoju"),
    entry(17, "The user has a parrot named Kiwi"),
    entry(18, "用户养了一只狗叫旺财"),
    entry(19, "用户的同事叫张伟"),
    entry(20, "用户在字节跳动工作"),
    entry(21, "用户就职于招商银行"),
    entry(22, "用户在杭州上班"),
    entry(23, "The user works for Bank of China in Shanghai"),
    entry(24, "I'm from Lyon"),
    entry(25, "用户现在在家工作"),
]


def test_third_person_and_english_memories_name_their_entities() -> None:
    found = {
        e.name: (e.kind, e.aliases, e.relations) for e in extract_entities(THIRD_PERSON_AND_ENGLISH)
    }
    assert found == {
        "小橘": (EntityKind.PET, ("我的猫", "猫"), ("用户的猫",)),
        "Rex": (EntityKind.PET, ("my dog",), ("the user's dog",)),
        "Acme Corp": (EntityKind.ORGANIZATION, (), ("where the user works",)),
        "Berlin": (EntityKind.PLACE, (), ("where the user works",)),
        "Leo": (EntityKind.PERSON, ("my son",), ("the user's son",)),
        "Anna": (EntityKind.PERSON, ("my wife",), ("the user's wife",)),
        "Xiaoju": (EntityKind.PET, (), ("Alice's cat",)),  # not "my cat": Alice's
        "Kiwi": (EntityKind.PET, ("my parrot",), ("the user's parrot",)),
        "旺财": (EntityKind.PET, ("我的狗", "狗"), ("用户的狗",)),
        "张伟": (EntityKind.PERSON, ("同事", "我的同事"), ("用户的同事",)),
        "字节跳动": (EntityKind.ORGANIZATION, (), ("用户工作的地方",)),
        "招商银行": (EntityKind.ORGANIZATION, (), ("用户工作的地方",)),
        "杭州": (EntityKind.PLACE, (), ("用户工作的城市",)),
        "Bank of China": (EntityKind.ORGANIZATION, (), ("where the user works",)),
        "Shanghai": (EntityKind.PLACE, (), ("where the user works",)),
        "Lyon": (EntityKind.PLACE, (), ("where the user is from",)),
    }


def test_sentences_that_name_nothing_yield_nothing() -> None:
    plain = [
        entry(31, "My son is in grade 3"),
        entry(32, "She works at the hospital on weekends"),
        entry(33, "我儿子上三年级"),
        entry(34, "用户在家工作"),
        entry(35, "I am from the north"),
    ]
    assert extract_entities(plain) == []


def test_a_query_is_expanded_through_aliases_both_ways() -> None:
    entities = extract_entities(ENTRIES)
    assert expand_query("我的猫喜欢吃什么", entities) == ["小橘"]
    assert expand_query("what does Max eat", entities) == ["my dog"]
    assert expand_query("what does my dog eat", entities) == ["Max"]
    assert expand_query("what is the weather", entities) == []


ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")


async def test_recall_finds_a_memory_through_an_alias(core: MemoryCore) -> None:
    await core.memories.capture(ALICE, "我的猫叫小橘")
    await core.memories.capture(ALICE, "小橘 only eats salmon-flavoured kibble")
    await core.memories.capture(BOB, "我的猫叫大黄")
    recall = await core.finder.recall(ALICE, "我的猫吃什么牌子的猫粮")
    assert "橘" in recall.keywords  # the name, added to a question that says "my cat"
    assert any("salmon" in hit.text for hit in recall.hits)
    assert all("大黄" not in hit.text for hit in recall.hits)
    found = {e.name: e for e in await core.memories.entities(ALICE)}
    assert set(found) == {"小橘"} and len(found["小橘"].facts) == 2
    assert [e.name for e in await core.memories.entities(BOB)] == ["大黄"]


async def test_recall_finds_a_third_person_memory_through_an_alias(core: MemoryCore) -> None:
    """Extraction writes memories in the third person: "my dog" still finds Rex's."""
    await core.memories.capture(ALICE, "The user's dog Rex is a border collie")
    await core.memories.capture(ALICE, "Rex only eats salmon-flavoured kibble")
    recall = await core.finder.recall(ALICE, "what food does my dog eat")
    assert "rex" in recall.keywords
    assert any("salmon" in hit.text for hit in recall.hits)


async def test_without_expansion_the_alias_finds_nothing(config: Config) -> None:
    off = config.model_copy(
        update={"recall": config.recall.model_copy(update={"entity_expansion": False})}
    )
    async with MemoryCore.open(off) as core:
        await core.memories.capture(ALICE, "我的猫叫小橘")
        await core.memories.capture(ALICE, "小橘 only eats salmon-flavoured kibble")
        recall = await core.finder.recall(ALICE, "我的猫吃什么牌子的猫粮")
        assert "橘" not in recall.keywords
        assert not any("salmon" in hit.text for hit in recall.hits)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="ab猫x\x00 ", max_size=8), max_size=8),
    st.text(alphabet="ab猫x\x00 ", min_size=1, max_size=3),
)
def test_the_texts_holding_a_word_are_those_in_says(texts: list[str], word: str) -> None:
    """Found among the texts holding its rarest character: exactly `word in text`, at
    either end of a text, in an empty one, with a character repeated."""
    holding = Holders(texts, [word, "b猫"])
    assert holding.texts_with(word) == {i for i, t in enumerate(texts) if word in t}
