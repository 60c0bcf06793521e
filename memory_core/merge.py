"""Pure merge of extracted candidates into the long-term store (seed 002 §3.3–3.4).

`merge` takes what is on disk, what the model (or the heuristic extractor) proposed and the
time, and returns the new entries plus every change made, so callers can persist, audit
and report without recomputing anything.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from operator import attrgetter
from typing import NamedTuple

from memory_core.entries import (
    CATEGORY_CLASSES,
    SESSION_MEMORY,
    ArchiveReason,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    build_entry,
    class_of,
    new_entry_id,
)
from memory_core.fact_keys import Relation, relation, skeleton
from memory_core.scoring import (
    DEFAULT_POLICY,
    ScoringPolicy,
    Status,
    contradict,
    contradict_belief,
    expire,
    initial_score,
    is_expired,
    reinforce,
)


class ChangeKind(StrEnum):
    ADDED = "add"
    REINFORCED = "reinforce"
    CONTRADICTED = "contradict"
    DECAYED = "decay"
    ARCHIVED = "archive"
    RESTORED = "restore"
    FORGOTTEN = "forget"
    EDITED = "edit"
    PINNED = "pin"
    UNPINNED = "unpin"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory proposed by extraction; `matches` names an existing entry it restates."""

    content: str
    category: str = "fact"
    importance: Importance = Importance.MEDIUM
    matches: str | None = None
    contradicts: tuple[str, ...] = ()
    expires_at: datetime | None = None
    confidence: float | None = None
    memory_class: MemoryClass | None = None
    granularity: Granularity | None = None
    new_id: str | None = None
    """Id for the entry if the candidate is added: a staged capture fixes it up front so
    replaying the capture (after a crash, or onto a file edited meanwhile) keeps it."""


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    entry_id: str
    old_score: float | None
    new_score: float | None
    content: str
    category: str
    detail: str = ""


class _ChangeSlots:
    """`Change`'s memory layout without its frozen `__setattr__`: see `build_change`."""

    __slots__ = Change.__slots__
    kind: ChangeKind
    entry_id: str
    old_score: float | None
    new_score: float | None
    content: str
    category: str
    detail: str


_new_object = object.__new__
_set_attribute = object.__setattr__


def build_change(
    kind: ChangeKind,
    entry_id: str,
    old_score: float | None,
    new_score: float | None,
    content: str,
    category: str,
    detail: str = "",
) -> Change:
    """`Change(...)`, about four times faster: a merge over 10 000 entries records one
    DECAYED change per decayed entry, and a frozen dataclass's `__init__` pays a slow
    `object.__setattr__` per field. Same trick as `memory_core.entries.build_entry`: fill
    a plain slots object, then make it a `Change` by assigning `__class__`; the result is
    an ordinary frozen `Change`."""
    change = _new_object(_ChangeSlots)
    change.kind = kind
    change.entry_id = entry_id
    change.old_score = old_score
    change.new_score = new_score
    change.content = content
    change.category = category
    change.detail = detail
    _set_attribute(change, "__class__", Change)
    return change  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class MergeResult:
    entries: list[MemoryEntry]
    changes: list[Change] = field(default_factory=list)
    skipped: bool = False
    """True when the session had already been merged: nothing was changed."""

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind is kind)

    @property
    def stats(self) -> dict[str, int]:
        return {kind.value: self.count(kind) for kind in ChangeKind if self.count(kind)}

    @property
    def outcome(self) -> Outcome | None:
        """What became of the merge's last candidate (a capture's only one): saved as a
        new entry, an update of an entry, or a reinforcement; None when nothing was kept."""
        for change in reversed(self.changes):
            if change.kind is ChangeKind.REINFORCED:
                return Outcome(Kept.REINFORCED, change.entry_id)
            if change.kind is ChangeKind.ADDED:
                if change.detail.startswith(UPDATES_DETAIL):
                    replaced = change.detail.removeprefix(UPDATES_DETAIL)
                    return Outcome(Kept.UPDATED, change.entry_id, replaced)
                return Outcome(Kept.SAVED, change.entry_id)
        return None


UPDATES_DETAIL = "updates "
"""How the ADDED change of an update names the entry it replaces (`updates <id>`; that
entry's CONTRADICTED change says `updated by <new id>`): the audit log shows both."""


class Kept(StrEnum):
    SAVED = "saved"
    """A new entry."""
    UPDATED = "updated"
    """A new entry replacing an alike one that differs in a number, date or negation; the
    old one is contradicted (its score halved) and stays readable."""
    REINFORCED = "reinforced"
    """The same fact said again: the old entry's score rises, its text stays."""


@dataclass(frozen=True, slots=True)
class Outcome:
    kept: Kept
    entry_id: str
    """The entry that holds the text now (a new one unless reinforced)."""
    replaced: str | None = None
    """The entry an update replaced."""

    def describe(self) -> str:
        """One line for people: `saved new [id]`, `updated [old] -> [new]`,
        `reinforced [id]`."""
        if self.kept is Kept.UPDATED:
            return f"updated [{self.replaced}] -> [{self.entry_id}]"
        if self.kept is Kept.SAVED:
            return f"saved new [{self.entry_id}]"
        return f"reinforced [{self.entry_id}]"

    def as_json(self) -> dict[str, str]:
        """For tools and `--json`: `{"action": ..., "id": ..., "replaced": ...}`."""
        answer = {"action": self.kept.value, "id": self.entry_id}
        if self.replaced is not None:
            answer["replaced"] = self.replaced
        return answer


_NOISE = re.compile(r"[\s\W_]+", re.UNICODE)


@functools.lru_cache(maxsize=1 << 18)
def normalize_content(text: str) -> str:
    """Key for 'the same memory': case, width, spaces and punctuation do not matter."""
    return _NOISE.sub("", unicodedata.normalize("NFKC", text).casefold())


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


_by_score = attrgetter("score")


def _sort_key(entry: MemoryEntry) -> tuple[float, float, str]:
    return (-entry.score, -entry.last_activated.timestamp(), entry.id)


def _tie_key(entry: MemoryEntry) -> tuple[float, str]:
    return (-entry.last_activated.timestamp(), entry.id)


def sort_entries(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """Highest score first; ties by most recently activated, then id for stability.

    The order of `sorted(entries, key=_sort_key)`, computed faster: most scores differ, so
    one sort on the score alone (a C-level key) places nearly everything, and only runs of
    equal scores need the full key, whose `timestamp()` call dominated the old cost.
    """
    items = list(entries)
    ordered = sorted(items, key=_by_score, reverse=True)
    scores = [entry.score for entry in ordered]
    total = sum(scores)
    if total != total:
        # A NaN score (or +inf and -inf together) has no consistent place in the score-only
        # order; the full key gives the order this function always gave.
        return sorted(items, key=_sort_key)
    start = 0
    previous = scores[0] if scores else 0.0
    for index, score in enumerate(scores):
        if score != previous:
            if index - start > 1:
                ordered[start:index] = sorted(ordered[start:index], key=_tie_key)
            start = index
            previous = score
    if len(ordered) - start > 1:
        ordered[start:] = sorted(ordered[start:], key=_tie_key)
    return ordered


def decay_all(
    entries: Sequence[MemoryEntry], now: datetime, policy: ScoringPolicy = DEFAULT_POLICY
) -> MergeResult:
    """Decay, expire, archive and forget as of `now`: consolidation with no candidates."""
    return merge(entries, (), now, None, policy)


def merge(
    existing: Sequence[MemoryEntry],
    candidates: Iterable[Candidate],
    now: datetime,
    session_id: str | None,
    policy: ScoringPolicy = DEFAULT_POLICY,
    seen_sessions: frozenset[str] = frozenset(),
) -> MergeResult:
    """Decay everything to `now`, then add or reinforce candidates, then re-sort.

    Idempotent per session: a session id in `seen_sessions`, or already recorded on the
    entry a candidate matches, changes nothing a second time.
    """
    if session_id is not None and session_id in seen_sessions:
        return MergeResult(entries=list(existing), skipped=True)

    changes: list[Change] = []
    before_status: dict[str, Status] = {}
    by_id: dict[str, MemoryEntry] = {}
    _decay_into(existing, now, policy, before_status, by_id, changes)

    batch = list(candidates)
    index = _MatchIndex(by_id) if batch else None

    for cand in batch:
        assert index is not None
        content = cand.content.strip()
        if not content:
            continue
        for target in cand.contradicts:
            _contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        match = _find_match(by_id, index, cand, norm)
        if match.restates is not None:
            _reinforce(by_id, match.restates, now, session_id, policy, changes)
            continue
        entry = _new_entry(cand, content, now, session_id, by_id)
        if is_expired(entry, now):
            continue
        if match.updates is not None:
            _contradict(by_id, match.updates, now, policy, changes, f"updated by {entry.id}")
        by_id[entry.id] = entry
        index.add(entry.id, entry.category, norm)
        changes.append(_added(entry, match.updates))

    _settle(by_id, before_status, policy, changes)
    return MergeResult(entries=sort_entries(by_id.values()), changes=changes)


_ACTIVE = Status.ACTIVE
_ARCHIVED = Status.ARCHIVED
_FORGOTTEN = Status.FORGOTTEN
_DECAYED = ChangeKind.DECAYED


def _decay_into(
    existing: Sequence[MemoryEntry],
    now: datetime,
    policy: ScoringPolicy,
    before_status: dict[str, Status],
    by_id: dict[str, MemoryEntry],
    changes: list[Change],
) -> None:
    """Note each entry's status, then decay it to `now` into `by_id` (the merge's first step).

    Per entry this is `status_of(entry)`, then `score_at(entry, now)` (`rescored` and a
    DECAYED change when the score moved), then `expire` for an expired todo, written out
    in one loop: it runs for every entry at every merge, and the calls, the policy
    look-ups and the frozen dataclasses' constructors were most of a merge's time.
    `tests/unit/test_scoring_merge.py` checks it against those functions.
    """
    forget_below = policy.forget_below
    archive_below = policy.archive_below
    grace_days = policy.grace_days
    category_rates = policy.category_decay
    daily_decay = policy.daily_decay
    class_factors = policy.class_factors()
    # scoring.ScoringPolicy.daily_factor, memoised per category and per class.
    factor_of_category: dict[str, float] = {}
    append = changes.append
    for entry in existing:
        score = entry.score
        archived = entry.archived
        if entry.pinned:
            # Pinned: never below a line by score, and no decay.
            before_status[entry.id] = _ACTIVE if archived is None else _ARCHIVED
            new_score = score
        else:
            if score < forget_below:
                before_status[entry.id] = _FORGOTTEN
            elif archived is not None or score < archive_below:
                before_status[entry.id] = _ARCHIVED
            else:
                before_status[entry.id] = _ACTIVE
            memory_class = entry.memory_class
            if memory_class is not None:
                rate = class_factors.get(memory_class, daily_decay)
            else:
                category = entry.category
                found = factor_of_category.get(category)
                if found is None:
                    found = category_rates.get(category)
                    if found is None:
                        default_class = CATEGORY_CLASSES.get(category, MemoryClass.FACT)
                        found = class_factors.get(default_class, daily_decay)
                    factor_of_category[category] = found
                rate = found
            last_activated = entry.last_activated
            # scoring.decayed_score: days accrued by now minus days already applied.
            accrued = (now - last_activated).days - grace_days
            applied = (entry.scored_at - last_activated).days - grace_days
            days = (accrued if accrued > 0 else 0) - (applied if applied > 0 else 0)
            new_score = score * rate**days if days > 0 else score
        result = entry
        if new_score != score:
            result = build_entry(
                entry.id,
                entry.content,
                entry.category,
                new_score,
                entry.created_at,
                entry.last_activated,
                now,
                entry.hits,
                entry.source_session,
                entry.confidence,
                entry.expires_at,
                entry.pinned,
                archived,
                entry.sessions,
                entry.memory_class,
                entry.granularity,
                entry.importance,
            )
            append(
                build_change(_DECAYED, entry.id, score, new_score, entry.content, entry.category)
            )
        if (
            archived is None
            and entry.category == "todo"
            and entry.expires_at is not None
            and entry.expires_at <= now
        ):
            result = expire(result, policy)
        by_id[entry.id] = result


def _settle(
    by_id: dict[str, MemoryEntry],
    before_status: dict[str, Status],
    policy: ScoringPolicy,
    changes: list[Change],
) -> None:
    """Forget what fell below the forget line, record archive/restore transitions.

    `status_of` written out inline for the same reason as in `_decay_into`; forgotten
    entries are removed from `by_id`.
    """
    forget_below = policy.forget_below
    archive_below = policy.archive_below
    forgotten: list[str] = []
    for entry in by_id.values():
        score = entry.score
        pinned = entry.pinned
        if not pinned and score < forget_below:
            changes.append(
                build_change(
                    ChangeKind.FORGOTTEN,
                    entry.id,
                    score,
                    None,
                    entry.content,
                    entry.category,
                    "score below forget line",
                )
            )
            forgotten.append(entry.id)
            continue
        archived = entry.archived
        if archived is not None or (not pinned and score < archive_below):
            if before_status.get(entry.id) is _ACTIVE:
                reason = archived.value if archived else "score below archive line"
                changes.append(
                    build_change(
                        ChangeKind.ARCHIVED,
                        entry.id,
                        score,
                        score,
                        entry.content,
                        entry.category,
                        reason,
                    )
                )
        elif before_status.get(entry.id) is _ARCHIVED:
            changes.append(
                build_change(
                    ChangeKind.RESTORED,
                    entry.id,
                    score,
                    score,
                    entry.content,
                    entry.category,
                    "score back above archive line",
                )
            )
    for entry_id in forgotten:
        del by_id[entry_id]


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

        Built per category on first use (only a short candidate that holds such a key
        asks), of the category's short entries (`SKELETON_MAX`).
        """
        grouped = self._by_skeleton.get(category)
        if grouped is None:
            grouped = {}
            for _, entry_id, size in self.category(category):
                if size <= SKELETON_MAX:
                    key = skeleton(self._by_id[entry_id].content)
                    grouped.setdefault(key, []).append(entry_id)
            self._by_skeleton[category] = grouped
        return grouped.get(skeleton(content), [])

    def add(self, entry_id: str, category: str, norm: str) -> None:
        """Index an entry added by the merge (it comes last in `by_id`)."""
        self._ids.append(entry_id)
        self._categories.append(category)
        self._norms.append(norm)
        self._by_norm.setdefault(norm, entry_id)
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


def _related(by_id: dict[str, MemoryEntry], entry_id: str, content: str) -> _Match | None:
    """`content` against an entry found alike: a restatement or an update of it, or None
    for a different fact (another name)."""
    found = relation(by_id[entry_id].content, content)
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
    by_id: dict[str, MemoryEntry], index: _MatchIndex, cand: Candidate, norm: str
) -> _Match:
    """The entry `cand` restates: named by id, the same normalized text, or else the first
    entry (in file order) of its category whose text is `_similar` and differs in no number,
    date, name or negation (`fact_keys.relation`), or else one of its category with the
    same skeleton (`fact_keys.skeleton`: the text but for numbers, dates and negations). Failing that,
    of the entries that only a number, date or negation sets apart, the one with the highest
    score (the later on a tie) is the one `cand` updates.

    The fuzzy scan visits only the candidate's category and skips texts whose length
    alone rules them out (`_similar`'s own first test, done inline) without a call each.
    """
    content = cand.content
    update: _Match | None = None
    if cand.matches and cand.matches in by_id:
        named = _related(by_id, cand.matches, content)
        if named is not None and named.restates:
            return named
        update = named
    exact = index.exact(norm)
    if exact is not None:
        found = _related(by_id, exact, content)
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
            found = _related(by_id, entry_id, content)
            if found is not None and found.restates:
                return found
            update = _believed(by_id, update, found)
    if size <= SKELETON_MAX and skeleton(content) != norm:
        # A number, date or negation in a text too short for bigrams to find alike
        # ("我儿子上三年级" / "四年级"); the skeleton of a text without one is its `norm`.
        for entry_id in index.same_skeleton(cand.category, content):
            found = _related(by_id, entry_id, content)
            if found is not None and found.restates:
                return found
            update = _believed(by_id, update, found)
    return update or _NO_MATCH


def _reinforce(
    by_id: dict[str, MemoryEntry],
    entry_id: str,
    now: datetime,
    session_id: str | None,
    policy: ScoringPolicy,
    changes: list[Change],
) -> None:
    entry = by_id[entry_id]
    if session_id is not None and session_id in entry.sessions:
        return
    score = reinforce(entry.score, policy)
    sessions = entry.sessions + ((session_id,) if session_id else ())
    archived = entry.archived if entry.archived is ArchiveReason.MANUAL else None
    by_id[entry_id] = entry.with_(
        score=score,
        scored_at=now,
        last_activated=now,
        hits=entry.hits + 1,
        sessions=sessions[-SESSION_MEMORY:],
        archived=archived,
    )
    changes.append(
        Change(ChangeKind.REINFORCED, entry_id, entry.score, score, entry.content, entry.category)
    )


def _contradict(
    by_id: dict[str, MemoryEntry],
    entry_id: str,
    now: datetime,
    policy: ScoringPolicy,
    changes: list[Change],
    detail: str = "",
) -> None:
    entry = by_id.get(entry_id)
    if entry is None:
        return
    score = contradict(entry.score, policy)
    contradicted = entry.with_(score=score, scored_at=now)
    if class_of(entry) is MemoryClass.BELIEF:
        contradicted = contradict_belief(contradicted, policy)
    by_id[entry_id] = contradicted
    changes.append(
        Change(
            ChangeKind.CONTRADICTED,
            entry_id,
            entry.score,
            score,
            entry.content,
            entry.category,
            detail,
        )
    )


def _added(entry: MemoryEntry, updates: str | None) -> Change:
    """The ADDED change of a new entry; an update names the entry it replaces."""
    detail = f"{UPDATES_DETAIL}{updates}" if updates is not None else ""
    return Change(
        ChangeKind.ADDED, entry.id, None, entry.score, entry.content, entry.category, detail
    )


def _new_entry(
    cand: Candidate,
    content: str,
    now: datetime,
    session_id: str | None,
    by_id: dict[str, MemoryEntry],
) -> MemoryEntry:
    """The entry a candidate that matched nothing becomes; its id is the one the candidate
    brings (a staged capture's) unless that is taken."""
    entry_id = cand.new_id
    if entry_id is None or entry_id in by_id:
        entry_id = new_entry_id(by_id.keys())
    return MemoryEntry(
        id=entry_id,
        content=content,
        category=cand.category,
        score=initial_score(cand.importance),
        created_at=now,
        last_activated=now,
        scored_at=now,
        hits=0,
        source_session=session_id,
        confidence=cand.confidence,
        expires_at=cand.expires_at,
        sessions=(session_id,) if session_id else (),
        memory_class=cand.memory_class,
        granularity=cand.granularity,
        importance=cand.importance,
    )


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

    def find(self, cand: Candidate, norm: str) -> _Match:
        return _find_match(self.by_id, self._index, cand, norm)


def apply_candidates(
    view: EntryView,
    candidates: Iterable[Candidate],
    now: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
) -> list[Change]:
    """Add or reinforce candidates in `view` without decaying everything else: a capture's
    fast path. Returns the changes.

    Only the entries a candidate touches are decayed to `now` (before being reinforced or
    contradicted). Decay counts forward from each entry's `scored_at`, so a later
    `decay_all` of the result gives what `merge` would have given now. New entries come
    last; the writer sorts.
    """
    changes: list[Change] = []
    by_id = view.by_id
    for cand in candidates:
        content = cand.content.strip()
        if not content:
            continue
        for target in cand.contradicts:
            if target in by_id:
                _touch(by_id, target, now, policy, changes)
                _contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        match = view.find(cand, norm)
        if match.restates is not None:
            match_id = match.restates
            before = _touch(by_id, match_id, now, policy, changes)
            _reinforce(by_id, match_id, now, None, policy, changes)
            # Archive/restore transitions of the touched entry, as `merge` records them.
            _settle({match_id: by_id[match_id]}, before, policy, changes)
            continue
        entry = _new_entry(cand, content, now, None, by_id)
        if is_expired(entry, now):
            continue
        if match.updates is not None:
            _touch(by_id, match.updates, now, policy, changes)
            _contradict(by_id, match.updates, now, policy, changes, f"updated by {entry.id}")
        view.add(entry, norm)
        changes.append(_added(entry, match.updates))
    return changes


def _touch(
    by_id: dict[str, MemoryEntry],
    entry_id: str,
    now: datetime,
    policy: ScoringPolicy,
    changes: list[Change],
) -> dict[str, Status]:
    """Decay one entry to `now` in place, as a merge's first step would; its status before."""
    before: dict[str, Status] = {}
    _decay_into([by_id[entry_id]], now, policy, before, by_id, changes)
    return before
