"""Which entry a candidate restates or updates: the same normalised text, bigrams alike
in its category, or the same skeleton, then `fact_keys.relation` on what such texts turn on.

Pure. Apart from the merge driver because "alike" is a question of its own: a person's
forget request (`same_memory`) asks it without merging anything, and the index that
answers it fast (`EntryView`) serves a merge and the capture path, which keeps it
between captures.
"""

from __future__ import annotations

import contextlib
import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import NamedTuple

from memory_core.base.entries import MemoryEntry
from memory_core.base.merge_values import Proposal
from memory_core.longterm.claims import as_member, is_self_fact, other_subject, same_speaker
from memory_core.longterm.fact_keys import (
    Relation,
    kept_characters,
    known_skeletons,
    relation,
    skeleton,
)

_NOISE = re.compile(r"[\s\W_]+", re.UNICODE)


_NORMS: dict[str, str] = {}
_NORMS_KEPT = 1 << 18
"""Texts whose normalised form is remembered (oldest forgotten first): more than the
entries of the largest file we expect, as every merge normalises every entry."""


def normalize_content(text: str) -> str:
    """Key for 'the same memory': case, width, spaces and punctuation do not matter.

    Remembered per text (about 10 us each, for every entry of a file at a merge), and
    seeded by the long-term parse cache (`remember_norms`), so a new process matches its
    first capture against a large file without normalising every entry of it first."""
    norm = _NORMS.get(text)
    if norm is None:
        norm = _NOISE.sub("", unicodedata.normalize("NFKC", text).casefold())
        _remember(text, norm)
    return norm


def _remember(text: str, norm: str) -> None:
    if len(_NORMS) >= _NORMS_KEPT:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del _NORMS[next(iter(_NORMS))]  # another thread may be at it too
    _NORMS[text] = norm


def remember_norms(texts: Sequence[str], norms: Iterable[str]) -> None:
    """Take `norms[i]` as `normalize_content(texts[i])`: what the parse cache kept, made by
    this very function (its format names the Unicode version it ran with)."""
    if len(_NORMS) + len(texts) > _NORMS_KEPT:
        _NORMS.clear()  # room for these first: they are what is wanted now
    _NORMS.update(zip(texts, norms, strict=True))


@functools.lru_cache(maxsize=1 << 16)
def _bigrams(text: str) -> frozenset[str]:
    return frozenset({text[i : i + 2] for i in range(len(text) - 1)} or {text})


SIMILAR = 0.85
"""Two contents at least this alike (length ratio, then bigram Jaccard) are one memory."""


SKELETON_MAX = 200
"""Normalized length up to which texts are also compared by their skeleton. A longer text
that changes one number, date or negation keeps its bigrams alike (the fuzzy match finds
it), and skeletons of long texts would cost a regex pass each for nothing."""


def _similar(a: str, b: str, threshold: float = SIMILAR) -> bool:
    if not a or not b:
        return False
    shorter, longer = sorted((len(a), len(b)))
    if shorter / longer < threshold:
        return False
    ga, gb = _bigrams(a), _bigrams(b)
    small, large = sorted((len(ga), len(gb)))
    if small / large < threshold:
        # The Jaccard index is at most small / large (and float division keeps that
        # order), so this is the answer the set operations below would give, cheaper.
        return False
    shared = len(ga & gb)
    return shared / (large + small - shared) >= threshold  # len(ga | gb), without the set


def same_memory(a: MemoryEntry, b: MemoryEntry) -> bool:
    """Whether a merge would take either entry's text for a restatement of the other (the
    rules of `_find_match`: the same normalized text in any category, or a `_similar` one
    in the same category, and no number, date, name or negation apart). Whoever acts on "this fact and its duplicates" (a person's
    forget request) must find exactly the entries a merge would have folded together."""
    na, nb = normalize_content(a.content), normalize_content(b.content)
    alike = na == nb or (a.category == b.category and _similar(na, nb))
    return alike and relation(a.content, b.content) is Relation.RESTATES


_content = attrgetter("content")
_category = attrgetter("category")


class _MatchIndex:
    """What `_find_match` looks entries up by: normalized text, and per category.

    Built once per merge with candidates, over `by_id` after decay, and kept in step as
    candidates add entries (reinforcing or contradicting changes no text or category).
    The per-entry work is C-level `map`/`zip`, not a Python loop: this runs over every
    entry at every merge with candidates.
    """

    def __init__(self, by_id: dict[str, MemoryEntry]) -> None:
        entries = by_id.values()
        self._ids = list(by_id)
        self._categories = list(map(_category, entries))
        self._norms = list(map(normalize_content, map(_content, entries)))
        # Built from the end, so that of entries with the same text the first in file
        # order wins, as `setdefault` in file order would give.
        self._by_norm = dict(zip(reversed(self._norms), reversed(self._ids), strict=True))
        self._by_category: dict[str, list[tuple[str, str, int]]] | None = None
        self._by_id = by_id
        self._by_skeleton: dict[str, dict[str, list[str]]] = {}
        self._speakers: list[str] | None = None

    def speakers(self) -> list[str]:
        """The members who said an entry (a group scope's), one spelling each; found on
        first use: only a candidate with a speaker asks."""
        if self._speakers is None:
            seen: list[str] = []
            for entry in self._by_id.values():
                if entry.speaker and not any(same_speaker(entry.speaker, s) for s in seen):
                    seen.append(entry.speaker)
            self._speakers = seen
        return self._speakers

    def exact(self, norm: str) -> str | None:
        """The first entry whose normalized text is `norm`."""
        return self._by_norm.get(norm)

    def category(self, category: str) -> list[tuple[str, str, int]]:
        """(normalized text, id, its length) of the category's entries, in `by_id` order.

        Grouped on first use: a batch whose candidates all match exactly never needs it.
        """
        if self._by_category is None:
            grouped: dict[str, list[tuple[str, str, int]]] = {}
            for entry_id, entry_category, norm in zip(
                self._ids, self._categories, self._norms, strict=True
            ):
                pool = grouped.get(entry_category)
                if pool is None:
                    grouped[entry_category] = pool = []
                pool.append((norm, entry_id, len(norm)))
            self._by_category = grouped
        return self._by_category.get(category, [])

    def same_skeleton(self, category: str, content: str) -> list[str]:
        """Ids of the category's entries whose text is `content`'s but for numbers, dates
        and negations (`fact_keys.skeleton`), in `by_id` order.

        Of the category's short entries (`SKELETON_MAX`), grouped by skeleton on first
        use when every one of them is remembered (the parse cache keeps them) or when the
        wanted skeleton keeps nothing but masks. Otherwise (a fresh file) only the entries
        that hold every character the wanted skeleton keeps get one: a skeleton costs
        tens of microseconds, for each of thousands of short entries.
        """
        key = skeleton(content)
        grouped = self._by_skeleton.get(category)
        if grouped is not None:
            return grouped.get(key, [])
        needed = kept_characters(key)
        grouped = self.group_skeletons(category, all_known=bool(needed))
        if grouped is not None:
            return grouped.get(key, [])
        by_id = self._by_id
        pool = [(norm, i) for norm, i, size in self.category(category) if size <= SKELETON_MAX]
        for char in needed:
            # Each character's test is one C-level substring search per entry left.
            pool = [item for item in pool if char in item[0]]
            if not pool:
                return []
        return [i for _, i in pool if skeleton(by_id[i].content) == key]

    def group_skeletons(self, category: str, *, all_known: bool) -> dict[str, list[str]] | None:
        """The category's short entries grouped by skeleton (kept), made of remembered
        skeletons; None when `all_known` and some are not remembered (nothing is made)."""
        grouped = self._by_skeleton.get(category)
        if grouped is not None:
            return grouped
        by_id = self._by_id
        pool = [i for _, i, size in self.category(category) if size <= SKELETON_MAX]
        contents = [by_id[i].content for i in pool]
        known = known_skeletons(contents)
        if all_known and None in known:
            return None
        grouped = {}
        for entry_id, content, found in zip(pool, contents, known, strict=True):
            key = skeleton(content) if found is None else found
            same = grouped.get(key)
            if same is None:
                grouped[key] = [entry_id]
            else:
                same.append(entry_id)
        self._by_skeleton[category] = grouped
        return grouped

    def categories(self) -> list[str]:
        """Every category an entry has (grouping them, if not done yet)."""
        self.category("")
        assert self._by_category is not None
        return list(self._by_category)

    def add(self, entry_id: str, category: str, norm: str) -> None:
        """Index an entry added by the merge (it comes last in `by_id`)."""
        self._ids.append(entry_id)
        self._categories.append(category)
        self._norms.append(norm)
        self._by_norm.setdefault(norm, entry_id)
        speaker = self._by_id[entry_id].speaker
        known = self._speakers
        if speaker and known is not None and not any(same_speaker(speaker, s) for s in known):
            known.append(speaker)
        if self._by_category is not None:
            self._by_category.setdefault(category, []).append((norm, entry_id, len(norm)))
        grouped = self._by_skeleton.get(category)
        if grouped is not None and len(norm) <= SKELETON_MAX:
            key = skeleton(self._by_id[entry_id].content)
            grouped.setdefault(key, []).append(entry_id)


class _Match(NamedTuple):
    """What a candidate is to the entries it resembles (at most one of the two is set)."""

    restates: str | None = None
    """The entry it says again: reinforced."""
    updates: str | None = None
    """The entry it replaces (a changed number, date or negation): contradicted."""


_NO_MATCH = _Match()


Keep = Callable[[MemoryEntry], bool]
"""Which entries a candidate may restate or update at all (a group member's: not another
member's self-fact when it speaks of itself)."""


def _related(
    by_id: dict[str, MemoryEntry], entry_id: str, content: str, keep: Keep | None
) -> _Match | None:
    """`content` against an entry found alike: a restatement or an update of it, or None
    for a different fact (another name, or an entry `keep` refuses)."""
    entry = by_id[entry_id]
    if keep is not None and not keep(entry):
        return None
    found = relation(entry.content, content)
    if found is Relation.RESTATES:
        return _Match(restates=entry_id)
    if found is Relation.UPDATES:
        return _Match(updates=entry_id)
    return None


def _believed(by_id: dict[str, MemoryEntry], a: _Match | None, b: _Match | None) -> _Match | None:
    """Of two entries a candidate would update, the version now believed: the higher score,
    the later one on a tie. (Updating the oldest every time would halve it away.)"""
    if a is None or b is None:
        return a or b
    assert a.updates is not None and b.updates is not None
    return b if by_id[b.updates].score >= by_id[a.updates].score else a


def _find_match(
    by_id: dict[str, MemoryEntry],
    index: _MatchIndex,
    cand: Proposal,
    norm: str,
    keep: Keep | None = None,
) -> _Match:
    """The entry `cand` restates: named by id, the same normalized text, or else the first
    entry (in file order) of its category whose text is `_similar` and differs in no number,
    date, code, name or negation (`fact_keys.relation`), or else one of its category with
    the same skeleton (`fact_keys.skeleton`: the text but for its values, each written one
    way, and negations). Failing that,
    of the entries that only a number, date or negation sets apart, the one with the highest
    score (the later on a tie) is the one `cand` updates.

    The fuzzy scan visits only the candidate's category and skips texts whose length
    alone rules them out (`_similar`'s own first test, done inline) without a call each.
    """
    content = cand.content
    update: _Match | None = None
    if cand.matches and cand.matches in by_id:
        named = _related(by_id, cand.matches, content, keep)
        if named is not None and named.restates:
            return named
        update = named
    exact = index.exact(norm)
    if exact is not None:
        found = _related(by_id, exact, content, keep)
        if found is not None and found.restates:
            return found
        update = _believed(by_id, update, found)
    size = len(norm)
    if not size:
        return update or _NO_MATCH  # `_similar` is False for an empty text
    grams = _bigrams(norm)
    count = len(grams)
    # `_similar(other, norm)` written out: same tests, same order, same float divisions.
    for other, entry_id, other_size in index.category(cand.category):
        if not other_size:
            continue
        if (other_size / size if other_size < size else size / other_size) < SIMILAR:
            continue
        other_grams = _bigrams(other)
        other_count = len(other_grams)
        if (other_count / count if other_count < count else count / other_count) < SIMILAR:
            continue
        shared = len(other_grams & grams)
        if shared / (other_count + count - shared) >= SIMILAR:
            found = _related(by_id, entry_id, content, keep)
            if found is not None and found.restates:
                return found
            update = _believed(by_id, update, found)
    if size <= SKELETON_MAX:
        # A number, date or negation in a text too short for bigrams to find alike
        # ("我儿子上三年级" / "四年级"), or a value written otherwise ("at 7" / "at 07:00",
        # "I am" / "I'm"): either text may be the one that holds it, so always asked.
        for entry_id in index.same_skeleton(cand.category, content):
            found = _related(by_id, entry_id, content, keep)
            if found is not None and found.restates:
                return found
            update = _believed(by_id, update, found)
    return update or _NO_MATCH


def _group_match(
    by_id: dict[str, MemoryEntry], index: _MatchIndex, cand: Proposal, norm: str
) -> _Match:
    """A group member's candidate: matched as usual but never to another member's
    self-fact when it speaks of its own speaker; failing a restatement, a text naming a
    member is matched, as that member would say it, to their self-facts (`as_member`)."""
    speaker, content = cand.speaker, cand.content
    match = _find_match(
        by_id, index, cand, norm, lambda entry: not other_subject(speaker, content, entry)
    )
    if match.restates is not None:
        return match
    for member in index.speakers():
        if same_speaker(member, speaker):
            continue

        def theirs(entry: MemoryEntry, member: str = member) -> bool:
            return same_speaker(entry.speaker, member) and is_self_fact(entry)

        for text in as_member(content, member):
            said = replace(cand, content=text, speaker=member, matches=None)
            found = _find_match(by_id, index, said, normalize_content(text), theirs)
            if found != _NO_MATCH:
                return found
    return match


class EntryView:
    """Entries by id plus the index matching needs, kept up to date in place: a capture
    costs a lookup and a scan of its category's texts, not a rebuild over every entry of
    a large file."""

    __slots__ = ("_index", "by_id")

    def __init__(self, by_id: dict[str, MemoryEntry]) -> None:
        self.by_id = by_id
        self._index = _MatchIndex(by_id)

    @classmethod
    def of(cls, entries: Iterable[MemoryEntry]) -> EntryView:
        return cls({entry.id: entry for entry in entries})

    def add(self, entry: MemoryEntry, norm: str) -> None:
        self.by_id[entry.id] = entry
        self._index.add(entry.id, entry.category, norm)

    def entries(self) -> list[MemoryEntry]:
        return list(self.by_id.values())

    def ready(self) -> EntryView:
        """Group the entries by category, and by skeleton where every one is remembered,
        now rather than at the first candidate that needs them (passes over every entry):
        for a view built ahead of use."""
        for category in self._index.categories():
            self._index.group_skeletons(category, all_known=True)
        return self

    def find(self, cand: Proposal, norm: str) -> _Match:
        if cand.speaker is not None:  # a group scope's: whose fact it is matters
            return _group_match(self.by_id, self._index, cand, norm)
        return _find_match(self.by_id, self._index, cand, norm)
