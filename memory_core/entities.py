"""Entities named in a scope's memories: people, pets, places, projects (seed 001 §1.4
`entities/`), found offline by rules, with the aliases a person uses for them, the
memories that mention them and how they relate to the user.

Pure: entries in, profiles out. Recall uses `expand_query` so that a question about "my
cat" also finds the memories that only say "小橘", and the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from memory_core.entries import MemoryEntry


class EntityKind(StrEnum):
    PERSON = "person"
    PET = "pet"
    PLACE = "place"
    PROJECT = "project"


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    kind: EntityKind
    aliases: tuple[str, ...] = ()
    """How the user refers to it besides its name ("my cat", "我的猫")."""
    relations: tuple[str, ...] = ()
    """Its relation to the user ("the user's cat")."""
    facts: tuple[str, ...] = field(default=())
    """Ids of the memories that mention the name or an alias, best first."""


_PETS_EN = "cat|dog|kitten|puppy|pet|parrot|rabbit|hamster|bird|fish"
_PEOPLE_EN = (
    "wife|husband|son|daughter|mother|mom|mum|father|dad|brother|sister|boss|manager|"
    "friend|colleague|partner|girlfriend|boyfriend|teacher|doctor|grandma|grandpa"
)
_NAMED_EN = r"(?:'s name)? (?:is called|is named|named|called|is)"
_NAME_EN = r"(?P<name>[A-Z][\w'-]*(?: [A-Z][\w'-]*)?)"
_PETS_ZH = "猫咪|小猫|猫|小狗|狗狗|狗|宠物|鹦鹉|兔子|仓鼠"
_PEOPLE_ZH = "老婆|妻子|老公|丈夫|儿子|女儿|妈妈|母亲|爸爸|父亲|哥哥|姐姐|弟弟|妹妹|老板|领导|朋友|同事|女朋友|男朋友|老师"
_NAME_ZH = r"(?P<name>[^\s，。！？、,.!?的了是很也都在和啊呢吗吧，；;：:]{1,4})"

RULES: tuple[tuple[re.Pattern[str], EntityKind], ...] = (
    (re.compile(rf"\b[Mm]y (?P<rel>{_PETS_EN}){_NAMED_EN} {_NAME_EN}"), EntityKind.PET),
    (re.compile(rf"\b[Mm]y (?P<rel>{_PEOPLE_EN}){_NAMED_EN} {_NAME_EN}"), EntityKind.PERSON),
    (
        re.compile(rf"我(?:的|家的?)?(?P<rel>{_PETS_ZH})(?:叫|名叫|的名字是){_NAME_ZH}"),
        EntityKind.PET,
    ),
    (re.compile(rf"我(?:的)?(?P<rel>{_PEOPLE_ZH})(?:叫|名叫|是){_NAME_ZH}"), EntityKind.PERSON),
    (
        re.compile(r"\b(?:live|lives|living|moved|moving|relocated) (?:in|to) " + _NAME_EN),
        EntityKind.PLACE,
    ),
    (
        re.compile(r"(?:住在|搬到|搬去|定居在?)(?P<name>[\u4e00-\u9fff]{2,4}?)(?:市|了|，|。|$)"),
        EntityKind.PLACE,
    ),
    (re.compile(r"\b(?:project|Project) " + _NAME_EN), EntityKind.PROJECT),
    (re.compile(r"(?P<name>[A-Za-z][\w-]{1,20}|[\u4e00-\u9fff]{2,6})项目"), EntityKind.PROJECT),
)


def _aliases(kind: EntityKind, rel: str, chinese: bool) -> tuple[tuple[str, ...], str]:
    if kind is EntityKind.PLACE:
        # "home" or 家 would match half of all questions: a place keeps its name alone.
        return (), "where the user lives"
    if kind is EntityKind.PROJECT or not rel:
        return (), ""
    if chinese:
        return (f"我的{rel}", rel), f"用户的{rel}"
    return (f"my {rel}",), f"the user's {rel}"


def extract_entities(entries: Sequence[MemoryEntry]) -> list[Entity]:
    """Every entity the rules find in `entries`, merged by name, with the memories that
    mention it (entries in the order given: pass them best first)."""
    found: dict[str, tuple[str, EntityKind, set[str], set[str]]] = {}
    for entry in entries:
        for pattern, kind in RULES:
            for match in pattern.finditer(entry.content):
                name = match.group("name").strip(" '")
                if len(name) < 2 and not re.search(r"[\u4e00-\u9fff]", name):
                    continue
                rel = match.groupdict().get("rel") or ""
                chinese = bool(re.search(r"[\u4e00-\u9fff]", match.group(0)))
                aliases, relation = _aliases(kind, rel, chinese)
                key = name.casefold()
                _, _, known_aliases, relations = found.setdefault(key, (name, kind, set(), set()))
                known_aliases.update(aliases)
                if relation:
                    relations.add(relation)
    entities = []
    # Each text folded once, not once per entity: with 10 000 memories naming 80 entities
    # the per-pair casefold was 0.7 s of the 0.8 s this took.
    folded = [(e.id, e.content.casefold()) for e in entries] if found else []
    for name, kind, alias_set, relation_set in found.values():
        keys = [word.casefold() for word in (name, *alias_set) if word]
        facts = tuple(entry_id for entry_id, text in folded if any(k in text for k in keys))
        entity = Entity(name, kind, tuple(sorted(alias_set)), tuple(sorted(relation_set)), facts)
        entities.append(entity)
    return sorted(entities, key=lambda e: (-len(e.facts), e.name.casefold()))


def mentions(text: str, words: Iterable[str]) -> bool:
    folded = text.casefold()
    return any(word.casefold() in folded for word in words if word)


def expand_query(text: str, entities: Sequence[Entity]) -> list[str]:
    """Names and aliases to add to a query that mentions an entity by another of them:
    "what does my cat eat" gains "小橘"; "小橘 likes what" gains "my cat"."""
    added: list[str] = []
    for entity in entities:
        words = [entity.name, *entity.aliases]
        if not mentions(text, words):
            continue
        added.extend(w for w in words if w not in added and w.casefold() not in text.casefold())
    return added
