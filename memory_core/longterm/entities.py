"""Entities named in a scope's memories: people, pets, places, workplaces, projects,
found offline by rules in English and Chinese, in the first person
("my dog Rex", "我的猫叫小橘") and in the third person extraction writes memories in ("the
user's dog Rex", "用户的猫叫小橘"), with the aliases a person uses for them, the memories
that mention them and how they relate to the user.

Pure: entries in, profiles out. Recall uses `expand_query` so that a question about "my
cat" also finds the memories that only say "小橘", and the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from memory_core.base.entries import MemoryEntry
from memory_core.base.patterns import LazyPattern


class EntityKind(StrEnum):
    PERSON = "person"
    PET = "pet"
    PLACE = "place"
    PROJECT = "project"
    ORGANIZATION = "organization"
    """Where the user works (a company, a school, a hospital)."""


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


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern with a `name` group (and maybe `rel`, the relation word, and `owner`)."""

    pattern: LazyPattern
    kind: EntityKind
    relation: str = ""
    """For places and workplaces, how they stand to the user ("where the user lives");
    people and pets take theirs from `rel` and `owner`."""


_PETS_EN = "cat|dog|kitten|puppy|pet|parrot|rabbit|hamster|bird|fish|horse|turtle|tortoise"
_PEOPLE_EN = (
    "wife|husband|son|daughter|mother|mom|mum|father|dad|brother|sister|boss|manager|"
    "friend|best friend|colleague|coworker|partner|girlfriend|boyfriend|fianc[eé]e?|teacher|"
    "doctor|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|nephew|niece|"
    "roommate|neighbor|neighbour|child|kid|baby"
)
_OWNER_EN = r"(?P<owner>\b[Mm]y|\b[Oo]ur|\b(?:[Tt]he )?[Uu]ser's|\b[A-Z][a-z]+'s)"
"""Whose: the user's ("my", "our", "the user's", as memories are written) or a named
person's ("Alice's")."""
_NAMED_EN = r"(?:(?:'s name)? (?:is called|is named|named|called|is)|,)?"
_NAME_EN = r"(?P<name>[A-Z][\w'-]*(?: [A-Z][\w'-]*)?)"
_ORG_WORDS = r"[A-Z][\w&'.-]*(?: (?:[A-Z][\w&'.-]*|&|of|and))*(?<![ .])"
"""A workplace: capitalised words, with "of", "and" and "&" inside ("Bank of China")."""
_ORG_EN = rf"(?P<name>{_ORG_WORDS})"
_WORK_EN = r"\b(?:work|works|worked|working|employed|job|intern|interning|a job)"
_PETS_ZH = "猫咪|小猫|猫|小狗|狗狗|狗|宠物|鹦鹉|兔子|仓鼠"
_PEOPLE_ZH = "老婆|妻子|老公|丈夫|儿子|女儿|妈妈|母亲|爸爸|父亲|哥哥|姐姐|弟弟|妹妹|老板|领导|朋友|同事|女朋友|男朋友|老师"
_OWNER_ZH = "(?:我|用户)"
"""First person, or the third person extraction writes memories in (用户的猫叫小橘)."""
_NAME_ZH = r"(?P<name>[^\s，。！？、,.!?的了是很也都在和啊呢吗吧，；;：:]{1,4})"
_CITIES_ZH = (
    "北京|上海|广州|深圳|杭州|南京|苏州|成都|重庆|武汉|西安|天津|长沙|郑州|青岛|厦门|"
    "宁波|合肥|福州|济南|大连|沈阳|昆明|香港|澳门|台北"
)
"""Where 在X工作 names a city, not a company (the rules cannot tell 腾讯 from 杭州)."""
_NOT_WORKPLACES_ZH = "[在家这那哪外]|公司|单位|远程|线上|晚上|周末"
"""What 在X工作 says that is no workplace's name (在家工作, 在公司工作)."""

RULES: tuple[Rule, ...] = (
    Rule(LazyPattern(rf"{_OWNER_EN} (?P<rel>{_PETS_EN}){_NAMED_EN} {_NAME_EN}"), EntityKind.PET),
    Rule(
        LazyPattern(rf"{_OWNER_EN} (?P<rel>{_PEOPLE_EN}){_NAMED_EN} {_NAME_EN}"), EntityKind.PERSON
    ),
    Rule(
        LazyPattern(rf"\b(?:a|an|the) (?P<rel>{_PETS_EN}) (?:named|called) {_NAME_EN}"),
        EntityKind.PET,
    ),
    Rule(
        LazyPattern(
            rf"{_OWNER_ZH}(?:的|家的?)?(?P<rel>{_PETS_ZH})(?:叫|名叫|的名字是|的名字叫){_NAME_ZH}"
        ),
        EntityKind.PET,
    ),
    Rule(
        LazyPattern(
            rf"{_OWNER_ZH}(?:养了?|有)(?:一|两)?(?:只|条)?(?P<rel>{_PETS_ZH})[，,]?(?:叫|名叫){_NAME_ZH}"
        ),
        EntityKind.PET,
    ),
    Rule(
        LazyPattern(rf"{_OWNER_ZH}(?:的)?(?P<rel>{_PEOPLE_ZH})(?:叫|名叫|是){_NAME_ZH}"),
        EntityKind.PERSON,
    ),
    Rule(
        LazyPattern(r"\b(?:live|lives|living|moved|moving|relocated) (?:in|to) " + _NAME_EN),
        EntityKind.PLACE,
        "where the user lives",
    ),
    Rule(
        LazyPattern(r"(?:住在|搬到|搬去|定居在?)(?P<name>[\u4e00-\u9fff]{2,4}?)(?:市|了|，|。|$)"),
        EntityKind.PLACE,
        "用户住的地方",
    ),
    Rule(
        LazyPattern(rf"{_WORK_EN} (?:at|for|with) {_ORG_EN}"),
        EntityKind.ORGANIZATION,
        "where the user works",
    ),
    Rule(
        LazyPattern(rf"{_WORK_EN}(?: (?:at|for|with) {_ORG_WORDS})? (?:in|from) " + _NAME_EN),
        EntityKind.PLACE,
        "where the user works",
    ),
    Rule(
        LazyPattern(r"\b(?:I am|I'm|[Uu]ser is|comes|come) from " + _NAME_EN),
        EntityKind.PLACE,
        "where the user is from",
    ),
    Rule(
        LazyPattern(r"(?:就职于|任职于|供职于)(?P<name>[\u4e00-\u9fffA-Za-z]{2,16})"),
        EntityKind.ORGANIZATION,
        "用户工作的地方",
    ),
    Rule(
        LazyPattern(rf"在(?P<name>{_CITIES_ZH})(?:市)?(?:工作|上班)"),
        EntityKind.PLACE,
        "用户工作的城市",
    ),
    Rule(
        LazyPattern(
            rf"在(?P<name>(?!{_CITIES_ZH}|{_NOT_WORKPLACES_ZH})[\u4e00-\u9fffA-Za-z]{{2,12}}?)"
            "(?:工作|上班|实习|任职)"
        ),
        EntityKind.ORGANIZATION,
        "用户工作的地方",
    ),
    Rule(LazyPattern(r"\b(?:project|Project) " + _NAME_EN), EntityKind.PROJECT),
    Rule(
        LazyPattern(r"(?P<name>[A-Za-z][\w-]{1,20}|[\u4e00-\u9fff]{2,6})项目"), EntityKind.PROJECT
    ),
)


_HAN = LazyPattern(r"[\u4e00-\u9fff]")
_LATIN = LazyPattern(r"[A-Za-z]")
_CHINESE_RULES = tuple(rule for rule in RULES if _HAN.search(rule.pattern.pattern))
"""Rules that need a Chinese character to match (each has one written in it); the others
need a Latin letter. A text is only scanned by the rules of the scripts it holds."""
_LATIN_RULES = tuple(rule for rule in RULES if rule not in _CHINESE_RULES)


def _rules_for(text: str) -> tuple[Rule, ...]:
    chinese = _CHINESE_RULES if _HAN.search(text) else ()
    return chinese + (_LATIN_RULES if _LATIN.search(text) else ())


def _aliases(rule: Rule, rel: str, owner: str, chinese: bool) -> tuple[tuple[str, ...], str]:
    """How the user refers to the entity, and its relation to the user."""
    if rule.kind in (EntityKind.PLACE, EntityKind.ORGANIZATION):
        # "home", "work" or 家 would match half of all questions: these keep their name alone.
        return (), rule.relation
    if rule.kind is EntityKind.PROJECT or not rel:
        return (), ""
    if chinese:
        return (f"我的{rel}", rel), f"用户的{rel}"
    rel = rel.casefold()
    if owner and owner.endswith("'s") and owner.casefold() not in ("user's", "the user's"):
        return (), f"{owner} {rel}"  # someone else's: not "my ..."
    return (f"my {rel}",), f"the user's {rel}"


def extract_entities(entries: Sequence[MemoryEntry]) -> list[Entity]:
    """Every entity the rules find in `entries`, merged by name, with the memories that
    mention it (entries in the order given: pass them best first)."""
    found: dict[str, tuple[str, EntityKind, set[str], set[str]]] = {}
    for entry in entries:
        for name, kind, aliases, relation in named_in(entry.content):
            _, _, known_aliases, relations = found.setdefault(
                name.casefold(), (name, kind, set(), set())
            )
            known_aliases.update(aliases)
            if relation:
                relations.add(relation)
    entities = []
    keys_of = {
        key: [word.casefold() for word in (name, *alias_set) if word]
        for key, (name, _, alias_set, _) in found.items()
    }
    texts = [e.content.casefold() for e in entries] if found else []
    holding = Holders(texts, [word for keys in keys_of.values() for word in keys])
    ids = [e.id for e in entries]
    for key, (name, kind, alias_set, relation_set) in found.items():
        holders = set().union(*map(holding.texts_with, keys_of[key]))
        facts = tuple(ids[i] for i in sorted(holders))
        entity = Entity(name, kind, tuple(sorted(alias_set)), tuple(sorted(relation_set)), facts)
        entities.append(entity)
    return sorted(entities, key=lambda e: (-len(e.facts), e.name.casefold()))


Named = tuple[str, EntityKind, tuple[str, ...], str]
"""An entity a text names: name, kind, aliases, relation."""
_NAMED: dict[str, tuple[Named, ...]] = {}
_NAMED_KEPT = 1 << 18
"""Texts whose named entities are remembered: the views find the entities again after
every write of a file, and all but the written entries are texts seen before (the rules'
scans cost about 20 us a text: seconds a write for 100 000 memories)."""


def known_named(text: str) -> tuple[Named, ...] | None:
    """`named_in(text)` if it is remembered, else None (nothing is computed)."""
    return _NAMED.get(text)


def remember_named(texts: Sequence[str], named: Iterable[tuple[Named, ...] | None]) -> None:
    """Take `named[i]` as `named_in(texts[i])` where it is not None: what the parse cache
    kept, made by these very rules (its format names their source)."""
    if len(_NAMED) + len(texts) > _NAMED_KEPT:
        _NAMED.clear()  # room for these first: they are what is wanted now
    _NAMED.update((t, n) for t, n in zip(texts, named, strict=True) if n is not None)


def named_in(text: str) -> tuple[Named, ...]:
    """What the rules find in one text, in the order they find it (remembered)."""
    named = _NAMED.get(text)
    if named is not None:
        return named
    out: list[Named] = []
    for rule in _rules_for(text):
        for match in rule.pattern.finditer(text):
            name = match.group("name").strip(" '")
            if len(name) < 2 and not _HAN.search(name):
                continue
            groups = match.groupdict()
            chinese = bool(_HAN.search(match.group(0)))
            aliases, relation = _aliases(
                rule, groups.get("rel") or "", groups.get("owner") or "", chinese
            )
            out.append((name, rule.kind, aliases, relation))
    named = tuple(out)
    if len(_NAMED) >= _NAMED_KEPT:
        _NAMED.clear()
    _NAMED[text] = named
    return named


class Holders:
    """Which of many folded texts hold a word, for every word asked of them: the texts
    holding each character of the words are listed once (one C-level pass over each text),
    and a word is looked for only in the texts holding its rarest character. The plain
    test, one `in` per word and text, was a Python loop of entities times memories:
    seconds for 100 000 memories naming a thousand entities."""

    def __init__(self, texts: list[str], words: Iterable[str]) -> None:
        self._texts = texts
        chars = set().union(*words)
        postings: dict[str, list[int]] = {char: [] for char in chars}
        for index, text in enumerate(texts):
            for char in chars.intersection(text):
                postings[char].append(index)
        self._postings = postings

    def texts_with(self, word: str) -> set[int]:
        """Indexes of the texts `word` occurs in (as `word in text` says); `word` must be
        one of the words given (or made of their characters)."""
        if not word:
            return set(range(len(self._texts)))
        texts = self._texts
        rarest = min((self._postings[char] for char in set(word)), key=len)
        return {index for index in rarest if word in texts[index]}


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
