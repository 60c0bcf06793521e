"""`extract_entities` kept up to date across versions of one file, by difference.

Every write of a long-term file is a new version, and recall's query expansion wants the
entities of the new one. Found from scratch they cost about two seconds at 100 000
memories (which memories hold each name is a pass over every text), after each capture
of a bot's large file. A write changes a few entries: only those are read for names and
tested against every known name, and only a name no entry used before is looked for in
every text. The result is `extract_entities(entries)` exactly (tests compare the two
over random edits); a change of most of the file is simply found again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from operator import ne
from typing import NamedTuple

from memory_core.base.entries import MemoryEntry
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


class _Naming(NamedTuple):
    """One naming of an entity in one entry: what `named_in` gave, in its place there (a
    tuple: a frozen dataclass's construction cost a third of a 100 000-memory rebuild)."""

    key: str
    name: str
    kind: EntityKind
    aliases: tuple[str, ...]
    relation: str
    order: int


def _contents(entries: Sequence[MemoryEntry]) -> dict[str, str]:
    """Each entry's text by id."""
    return {e.id: e.content for e in entries}


def _changed(mine: dict[str, str], other: dict[str, str]) -> list[str]:
    """The ids of `mine`, in its order, whose text `other` does not hold for the id
    (compared in C: this runs over every entry of a version)."""
    return list(compress(mine, map(ne, map(other.get, mine), mine.values())))


class EntityTracker:
    """The entities of the last entries given, and what finding them again needs: per
    entry its text and its namings, per entity key the entries naming it, and per
    word (a name or an alias, folded) the entries whose text holds it."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._namings: dict[str, list[_Naming]] = {}
        self._named_by: dict[str, dict[str, list[_Naming]]] = {}
        self._holders: dict[str, set[str]] = {}
        self._contents: dict[str, str] = {}

    def update(self, entries: Sequence[MemoryEntry]) -> list[Entity]:
        """The entities of `entries` (best first, as `extract_entities` takes them)."""
        contents = _contents(entries)
        if len(contents) != len(entries):  # ids twice: the plain way decides
            self._reset()
            return extract_entities(entries)
        old = self._contents
        removed = _changed(old, contents)
        added = _changed(contents, old)
        if not old or len(removed) + len(added) > REBUILD_SHARE * max(len(contents), 1):
            self._rebuild(contents)
        else:
            self._apply(contents, removed, added)
        return self._entities(list(contents))

    def holders(self) -> dict[str, set[str]]:
        """Per folded name or alias, the entries whose text holds it: with the entries,
        all `seed` needs to take this state up again in another process."""
        return self._holders

    def seed(self, entries: Sequence[MemoryEntry], holders: Mapping[str, Iterable[str]]) -> None:
        """Take up the state `update(entries)` left, given its `holders` (kept on disk):
        each entry's names are read again (remembered from the parse cache), but no text
        is scanned for them. Holders that do not fit the entries leave the tracker empty
        (its next update finds everything again)."""
        self._reset()
        contents = _contents(entries)
        if len(contents) != len(entries):
            return
        self._add_entries(contents)
        if set(holders) != self._words():
            self._reset()
            return
        self._holders = {word: set(ids) for word, ids in holders.items()}
        self._contents = contents

    # --- state ---------------------------------------------------------------------------
    def _rebuild(self, contents: dict[str, str]) -> None:
        self._reset()
        self._add_entries(contents)
        self._contents = dict(contents)
        self._find_words(self._words())

    def _apply(self, contents: dict[str, str], removed: list[str], added: list[str]) -> None:
        for entry_id in removed:
            self._remove_entry(entry_id)
        for held in self._holders.values():
            held.difference_update(removed)
        known = set(self._holders)
        for entry_id in added:
            self._add_entry(entry_id, contents[entry_id])
            text = contents[entry_id].casefold()
            for word in known:
                if word in text:
                    self._holders[word].add(entry_id)
        self._contents = dict(contents)
        words = self._words()
        for gone in known - words:
            del self._holders[gone]
        self._find_words(words - known)

    def _add_entries(self, contents: dict[str, str]) -> None:
        """`_add_entry` of each, the names read for all at once (most memories name
        nothing: only those that name something take a call)."""
        named = list(map(named_in, contents.values()))
        for entry_id, found in zip(compress(contents, named), filter(None, named), strict=True):
            self._add_named(entry_id, found)

    def _add_entry(self, entry_id: str, content: str) -> None:
        named = named_in(content)
        if named:  # most memories name nothing
            self._add_named(entry_id, named)

    def _add_named(self, entry_id: str, named: Sequence[Named]) -> None:
        namings = [
            _Naming(name.casefold(), name, kind, aliases, relation, order)
            for order, (name, kind, aliases, relation) in enumerate(named)
        ]
        self._namings[entry_id] = namings
        for naming in namings:
            self._named_by.setdefault(naming.key, {}).setdefault(entry_id, []).append(naming)

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
        ids = list(self._contents)
        texts = [self._contents[i].casefold() for i in ids]
        holding = Holders(texts, words)
        for word in words:
            self._holders[word] = {ids[index] for index in holding.texts_with(word)}

    # --- the result ------------------------------------------------------------------------
    def _entities(self, order: list[str]) -> list[Entity]:
        place = dict(zip(order, range(len(order)), strict=True))
        entities = []
        for key, by_entry in self._named_by.items():
            namings = [n for entry_id in by_entry for n in by_entry[entry_id]]
            first_entry = min(by_entry, key=place.__getitem__)
            first = min(by_entry[first_entry], key=lambda n: n.order)
            aliases = {alias for n in namings for alias in n.aliases}
            relations = {n.relation for n in namings if n.relation}
            holders: set[str] = set()
            for word in (key, *(alias.casefold() for alias in aliases)):
                if word:
                    holders |= self._holders.get(word, set())
            facts = tuple(sorted(holders, key=place.__getitem__))
            entities.append(
                Entity(
                    first.name, first.kind, tuple(sorted(aliases)), tuple(sorted(relations)), facts
                )
            )
        return sorted(entities, key=lambda e: (-len(e.facts), e.name.casefold()))
