"""Entities found offline by rules, and the query expansion recall will use."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.entities import EntityKind, expand_query, extract_entities
from memory_core.entries import MemoryEntry
from memory_core.scope import ScopeKey

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


def test_a_query_is_expanded_through_aliases_both_ways() -> None:
    entities = extract_entities(ENTRIES)
    assert expand_query("我的猫喜欢吃什么", entities) == ["小橘"]
    assert expand_query("what does Max eat", entities) == ["my dog"]
    assert expand_query("what does my dog eat", entities) == ["Max"]
    assert expand_query("what is the weather", entities) == []


ALICE = ScopeKey("peer:alice")
BOB = ScopeKey("peer:bob")


async def test_recall_finds_a_memory_through_an_alias(core: MemoryCore) -> None:
    await core.capture(ALICE, "我的猫叫小橘")
    await core.capture(ALICE, "小橘 only eats salmon-flavoured kibble")
    await core.capture(BOB, "我的猫叫大黄")
    recall = await core.recall(ALICE, "我的猫吃什么牌子的猫粮")
    assert "橘" in recall.keywords  # the name, added to a question that says "my cat"
    assert any("salmon" in hit.text for hit in recall.hits)
    assert all("大黄" not in hit.text for hit in recall.hits)
    found = {e.name: e for e in await core.entities(ALICE)}
    assert set(found) == {"小橘"} and len(found["小橘"].facts) == 2
    assert [e.name for e in await core.entities(BOB)] == ["大黄"]


async def test_without_expansion_the_alias_finds_nothing(config: Config) -> None:
    off = config.model_copy(
        update={"recall": config.recall.model_copy(update={"entity_expansion": False})}
    )
    async with MemoryCore.open(off) as core:
        await core.capture(ALICE, "我的猫叫小橘")
        await core.capture(ALICE, "小橘 only eats salmon-flavoured kibble")
        recall = await core.recall(ALICE, "我的猫吃什么牌子的猫粮")
        assert "橘" not in recall.keywords
        assert not any("salmon" in hit.text for hit in recall.hits)
