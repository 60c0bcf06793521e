"""`extract_entities` kept up to date across versions of one file, by difference.

Every write of a long-term file is a new version, and recall's query expansion wants the
entities of the new one. Found from scratch they cost about two seconds at 100 000
memories (which memories hold each name is a pass over every text), after each capture
of a bot's large file. A write changes a few entries and keeps the rest as the very same
objects: the versions are compared by object identity (in C), only the changed entries
are read for names and tested against every known name, only a name no entry used before
is looked for in every text, and only the entities those entries touch are built again.
The result is `extract_entities(entries)` exactly (tests compare the two over random
edits); a change of most of the file is simply found again.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from itertools import compress, filterfalse
from operator import attrgetter, is_, not_
from typing import NamedTuple

from memory_core.base.entries import MemoryEntry
from memory_core.base.identity_walk import unpaired
from memory_core.longterm.entities import (
    Entity,
    EntityKind,
    Holders,
    Named,
    extract_entities,
    named_in,
)

REBUILD_SHARE = 0.2
"""A version whose added and removed entries exceed this share of it is found again from
scratch: one pass over every text then costs less than each new text tested against
every name."""

_ID = attrgetter("id")
_KINDS = {kind.value: kind for kind in EntityKind}

NamedRows = dict[str, list[tuple[str, str, tuple[str, ...], str]]]
"""Per entry that names something, what `named_in` gave (kinds by value): kept on disk."""


class _Naming(NamedTuple):
    """One naming of an entity in one entry: what `named_in` gave, in its place there (a
    tuple: a frozen dataclass's construction cost a third of a 100 000-memory rebuild)."""

    key: str
    name: str
    kind: EntityKind
    aliases: tuple[str, ...]
    relation: str
    order: int


class TrackerState(NamedTuple):
    """A tracker's state as another process keeps it: with the entries, all `seed` needs."""

    holders: Mapping[str, Iterable[str]]
    named: Mapping[str, Sequence[tuple[str, str, tuple[str, ...], str]]]
    found: Sequence[Entity]


class _Difference(NamedTuple):
    """Two versions compared. By id: the entries whose text left (old text) or came (new
    text), and the entries made again with the same text (they may have moved); whether
    the entries kept as the very same objects keep their order."""

    removed: dict[str, str]
    added: dict[str, str]
    remade: set[str]
    same_order: bool


_LOOK = 8
"""How far the walk looks ahead on either side for the entry it stopped at."""
BLIND_BASE, BLIND_SHARE = 64, 32
"""The walk gives up past BLIND_BASE + 1/BLIND_SHARE of the entries stops (the versions
are not aligned: comparing by id is then cheaper)."""


def _walk(old: list[object], new: list[object]) -> tuple[list[int], list[int]] | None:
    """The places of the entries of `old` and of `new` not paired with the same object
    in the other (`identity_walk.unpaired`): paired entries keep their order by
    construction; an entry kept as the same object but moved is unpaired on both sides
    (the caller sees the same id and text: made again). None when the walk gives up."""
    return unpaired(old, new, _LOOK, BLIND_BASE + len(new) // BLIND_SHARE)


def _difference(
    old: list[MemoryEntry], old_order: list[str], new: list[MemoryEntry], new_order: list[str]
) -> _Difference | None:
    """`new` against `old` (whose ids are unique); None when `new` holds an id twice.
    Entries kept as the same object are not looked at; of the others, an id with the same
    text on both sides is no change of names or holders."""
    walked = _walk(old, new)  # type: ignore[arg-type]
    if walked is not None:
        gone = [old[p] for p in walked[0]]
        came = [new[p] for p in walked[1]]
        same_order = True
    else:
        old_by_id = dict(zip(old_order, old, strict=True))
        new_by_id = dict(zip(new_order, new, strict=True))
        if len(new_by_id) != len(new_order):
            return None
        kept_old = list(map(is_, map(new_by_id.get, old_order), old))
        kept_new = list(map(is_, map(old_by_id.get, new_order), new))
        gone = list(compress(old, map(not_, kept_old)))
        came = list(compress(new, map(not_, kept_new)))
        same_order = list(compress(old_order, kept_old)) == list(compress(new_order, kept_new))
    gone_text = {e.id: e.content for e in gone}
    came_text = {e.id: e.content for e in came}
    if len(came_text) != len(came):
        return None
    fresh = came_text.keys() - gone_text.keys()
    if fresh:  # a new id must not be one an entry kept holds
        known: Container[str] = set(old_order) if len(fresh) > _LOOK else old_order
        if any(entry_id in known for entry_id in fresh):
            return None
    removed = {i: t for i, t in gone_text.items() if came_text.get(i) != t}
    added = {i: t for i, t in came_text.items() if gone_text.get(i) != t}
    remade = came_text.keys() - added.keys()
    return _Difference(removed, added, remade, same_order)


class EntityTracker:
    """The entities of the last entries given, and what finding them again needs: the
    entries and their ids in order, per entry its namings, per entity key the entries
    naming it, per word (a name or an alias, folded) the entries whose text holds it, and
    per key its entity."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._entries: list[MemoryEntry] = []
        self._order: list[str] = []
        self._namings: dict[str, list[_Naming]] = {}
        self._named_by: dict[str, dict[str, list[_Naming]]] = {}
        self._holders: dict[str, Collection[str]] = {}
        """A set once changed; as kept on disk (a tuple) until then: most words' holders
        a write does not change, and 100 000 ids made into sets again cost a seed."""
        self._found: dict[str, Entity] = {}
        self._result: list[Entity] = []

    def update(self, entries: Sequence[MemoryEntry]) -> list[Entity]:
        """The entities of `entries` (best first, as `extract_entities` takes them)."""
        new = list(entries)
        order = list(map(_ID, new))
        if not self._entries:
            return self._rebuild(new, order)
        diff = _difference(self._entries, self._order, new, order)
        if diff is None:  # ids twice: the plain way decides
            self._reset()
            return extract_entities(new)
        if len(diff.removed) + len(diff.added) > REBUILD_SHARE * max(len(new), 1):
            return self._rebuild(new, order)
        self._entries, self._order = new, order
        touched, renamed = self._apply(diff.removed, diff.added, diff.remade)
        if not diff.same_order:
            return self._entities(None, set(), renamed)
        shifted = diff.remade | diff.removed.keys() | diff.added.keys()
        return self._entities(touched, shifted, renamed)

    def holders(self) -> dict[str, set[str]]:
        """Per folded name or alias, the entries whose text holds it."""
        return {word: set(held) for word, held in self._holders.items()}

    def kept(self) -> TrackerState:
        """What `seed` takes this state up again from in another process."""
        named: NamedRows = {
            entry_id: [(n.name, n.kind.value, n.aliases, n.relation) for n in namings]
            for entry_id, namings in self._namings.items()
        }
        return TrackerState(self._holders, named, self._result)

    def found(self) -> list[Entity]:
        """The entities of the last entries given (best first)."""
        return self._result

    def seed(self, entries: Sequence[MemoryEntry], kept: TrackerState) -> None:
        """Take up the state `update(entries)` left, given what `kept()` gave then (kept
        on disk, for the very version `entries` are): no text is read. A state that does
        not fit the entries leaves the tracker empty (its next update finds everything
        again)."""
        self._reset()
        new = list(entries)
        order = list(map(_ID, new))
        ids = set(order)
        try:
            if len(ids) != len(order) or not kept.named.keys() <= ids:
                return
            for entry_id, rows in kept.named.items():
                self._add_named(entry_id, [(n, _KINDS[k], tuple(a), r) for n, k, a, r in rows])
            found = {e.name.casefold(): e for e in kept.found}
            if set(kept.holders) != self._words() or found.keys() != self._named_by.keys():
                self._reset()
                return
            self._holders = {word: tuple(held) for word, held in kept.holders.items()}
        except (KeyError, TypeError, ValueError):
            self._reset()
            return
        self._entries, self._order, self._found = new, order, found
        self._result = list(kept.found)

    # --- state ---------------------------------------------------------------------------
    def _rebuild(self, new: list[MemoryEntry], order: list[str]) -> list[Entity]:
        self._reset()
        if len(set(order)) != len(order):  # ids twice: the plain way decides
            return extract_entities(new)
        self._add_entries(new)
        self._entries, self._order = new, order
        self._find_words(self._words())
        return self._entities(None, set(), set())

    def _apply(
        self, removed: dict[str, str], added: dict[str, str], remade: set[str]
    ) -> tuple[set[str], set[str]]:
        """The namings and holders of the changed entries taken out and put in; the keys
        whose entity may differ (named by them, or one of whose words they, or the
        entries made again, which may have moved, hold), and of those the keys whose
        namings changed."""
        touched: set[str] = set()
        changed_words: set[str] = set()
        for entry_id in removed:
            touched.update(n.key for n in self._namings.get(entry_id, ()))
            self._remove_entry(entry_id)
        if removed:
            for word, held in self._holders.items():
                if not removed.keys().isdisjoint(held):
                    self._changing(word).difference_update(removed)
                    changed_words.add(word)
        known = set(self._holders)
        for entry_id, content in added.items():
            touched.update(n.key for n in self._add_entry(entry_id, content))
            text = content.casefold()
            for word in known:
                if word in text:
                    self._changing(word).add(entry_id)
                    changed_words.add(word)
        renamed = set(touched)
        if touched:  # namings changed: words may have gone or come
            words = self._words()
            for gone in known - words:
                del self._holders[gone]
            self._find_words(words - known)
        if remade:
            changed_words.update(
                word for word, held in self._holders.items() if not remade.isdisjoint(held)
            )
            for entry_id in remade:
                touched.update(n.key for n in self._namings.get(entry_id, ()))
        if changed_words:  # an entity's aliases are its namings' (new keys are touched)
            for key, entity in self._found.items():
                if key in changed_words or any(
                    alias.casefold() in changed_words for alias in entity.aliases
                ):
                    touched.add(key)
        return touched, renamed

    def _changing(self, word: str) -> set[str]:
        """The holders of `word`, as a set to change."""
        held = self._holders[word]
        if not isinstance(held, set):
            held = self._holders[word] = set(held)
        return held

    def _add_entries(self, entries: list[MemoryEntry]) -> None:
        """`_add_entry` of each, the names read for all at once (most memories name
        nothing: only those that name something take a call)."""
        named = list(map(named_in, map(attrgetter("content"), entries)))
        for entry, found in zip(compress(entries, named), filter(None, named), strict=True):
            self._add_named(entry.id, found)

    def _add_entry(self, entry_id: str, content: str) -> list[_Naming]:
        named = named_in(content)
        if named:  # most memories name nothing
            return self._add_named(entry_id, named)
        return []

    def _add_named(self, entry_id: str, named: Sequence[Named]) -> list[_Naming]:
        namings = [
            _Naming(name.casefold(), name, kind, aliases, relation, order)
            for order, (name, kind, aliases, relation) in enumerate(named)
        ]
        self._namings[entry_id] = namings
        for naming in namings:
            self._named_by.setdefault(naming.key, {}).setdefault(entry_id, []).append(naming)
        return namings

    def _remove_entry(self, entry_id: str) -> None:
        for naming in self._namings.pop(entry_id, ()):
            by_entry = self._named_by[naming.key]
            by_entry.pop(entry_id, None)
            if not by_entry:
                del self._named_by[naming.key]

    def _words(self) -> set[str]:
        """Every folded name and alias some entry gives (what holders are kept of)."""
        words: set[str] = set()
        for key, by_entry in self._named_by.items():
            words.add(key)
            for namings in by_entry.values():
                words.update(alias.casefold() for n in namings for alias in n.aliases)
        words.discard("")
        return words

    def _find_words(self, words: set[str]) -> None:
        """Holders of words no entry used before, found in every text in one pass (the
        texts folded for it, not kept: 100 000 memories' would be tens of megabytes)."""
        if not words:
            return
        ids = self._order
        texts = [e.content.casefold() for e in self._entries]
        holding = Holders(texts, words)
        for word in words:
            self._holders[word] = {ids[index] for index in holding.texts_with(word)}

    # --- the result ------------------------------------------------------------------------
    def _entities(
        self, touched: set[str] | None, shifted: set[str], renamed: set[str]
    ) -> list[Entity]:
        """The entities, those of `touched` keys built again (all of them when None: the
        entries kept as they were changed order, or nothing was built before); the others
        are as they were (same namings, holders, and holders' order). `shifted`: the
        entries whose place among the others may have changed; `renamed`: the keys whose
        namings changed."""
        order = self._order
        place = dict(zip(order, range(len(order)), strict=True))
        if touched is None:
            self._found = {}
            keys: Iterable[str] = list(self._named_by)
        else:
            for key in touched - self._named_by.keys():
                self._found.pop(key, None)
            keys = [key for key in touched if key in self._named_by]
        for key in keys:
            before = self._found.get(key) if touched is not None else None
            self._found[key] = self._entity(key, place, before, shifted, key not in renamed)
        self._result = sorted(
            self._found.values(), key=lambda e: (-len(e.facts), e.name.casefold())
        )
        return self._result

    def _entity(
        self,
        key: str,
        place: dict[str, int],
        before: Entity | None,
        shifted: set[str],
        same_words: bool,
    ) -> Entity:
        """One entity built again; its facts, when it was built before, are its former
        facts less the `shifted` entries, with the holders not among them put in place
        (the others kept their order). With `same_words` (its namings did not change)
        only the shifted entries can have become or ceased to be holders."""
        by_entry = self._named_by[key]
        namings = [n for entry_id in by_entry for n in by_entry[entry_id]]
        first_entry = min(by_entry, key=place.__getitem__)
        first = min(by_entry[first_entry], key=lambda n: n.order)
        aliases = {alias for n in namings for alias in n.aliases}
        relations = {n.relation for n in namings if n.relation}
        words = [word for word in (key, *(alias.casefold() for alias in aliases)) if word]
        if before is not None and same_words:
            extra: set[str] = set()
            for word in words:
                extra.update(shifted.intersection(self._holders.get(word, ())))
            kept = list(filterfalse(shifted.__contains__, before.facts))
            facts = _merged(kept, extra, place)
        else:
            holders: set[str] = set()
            for word in words:
                holders.update(self._holders.get(word, ()))
            former = before.facts if before is not None else None
            facts = _in_place(holders, place, former, shifted)
        return Entity(
            first.name, first.kind, tuple(sorted(aliases)), tuple(sorted(relations)), facts
        )


_FEW = 64
"""Holders put in place one by one (a binary search each) up to this many; more are
sorted with the rest."""


def _in_place(
    holders: set[str], place: dict[str, int], before: tuple[str, ...] | None, shifted: set[str]
) -> tuple[str, ...]:
    """`holders` in the order `place` gives. `before`: the former holders in order, whose
    entries not `shifted` are in the same order still (the same as sorting, cheaper)."""
    if before is None:
        return tuple(sorted(holders, key=place.__getitem__))
    kept = list(filter(holders.__contains__, filterfalse(shifted.__contains__, before)))
    return _merged(kept, holders.difference(kept), place)


def _merged(kept: list[str], extra: set[str], place: dict[str, int]) -> tuple[str, ...]:
    """`kept` (in the order `place` gives) with `extra` put in place."""
    key = place.__getitem__
    if len(extra) > _FEW:
        return tuple(sorted([*kept, *extra], key=key))
    for entry_id in extra:
        insort(kept, entry_id, key=key)
    return tuple(kept)
