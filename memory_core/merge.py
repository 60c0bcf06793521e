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

from memory_core.entries import (
    SESSION_MEMORY,
    ArchiveReason,
    Importance,
    MemoryEntry,
    new_entry_id,
)
from memory_core.scoring import (
    DEFAULT_POLICY,
    ScoringPolicy,
    Status,
    contradict,
    expire,
    initial_score,
    is_expired,
    reinforce,
    score_at,
    status_of,
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


def _similar(a: str, b: str, threshold: float = SIMILAR) -> bool:
    if not a or not b:
        return False
    shorter, longer = sorted((len(a), len(b)))
    if shorter / longer < threshold:
        return False
    ga, gb = _bigrams(a), _bigrams(b)
    return len(ga & gb) / len(ga | gb) >= threshold


def sort_entries(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """Highest score first; ties by most recently activated, then id for stability."""
    return sorted(entries, key=lambda e: (-e.score, -e.last_activated.timestamp(), e.id))


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
    before_status = {e.id: status_of(e, policy) for e in existing}
    by_id: dict[str, MemoryEntry] = {}
    for entry in existing:
        by_id[entry.id] = _decayed(entry, now, policy, changes)

    batch = list(candidates)
    by_norm: dict[str, str] = {}
    if batch:
        for entry in by_id.values():
            by_norm.setdefault(normalize_content(entry.content), entry.id)

    for cand in batch:
        content = cand.content.strip()
        if not content:
            continue
        for target in cand.contradicts:
            _contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        match_id = _find_match(by_id, by_norm, cand, norm)
        if match_id is not None:
            _reinforce(by_id, match_id, now, session_id, policy, changes)
            continue
        entry = MemoryEntry(
            id=_fresh_id(cand, by_id),
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
        )
        if is_expired(entry, now):
            continue
        by_id[entry.id] = entry
        by_norm.setdefault(norm, entry.id)
        changes.append(
            Change(ChangeKind.ADDED, entry.id, None, entry.score, content, entry.category)
        )

    survivors: list[MemoryEntry] = []
    for entry in by_id.values():
        old = before_status.get(entry.id)
        new = status_of(entry, policy)
        if new is Status.FORGOTTEN:
            changes.append(
                Change(
                    ChangeKind.FORGOTTEN,
                    entry.id,
                    entry.score,
                    None,
                    entry.content,
                    entry.category,
                    "score below forget line",
                )
            )
            continue
        survivors.append(entry)
        if old is Status.ACTIVE and new is Status.ARCHIVED:
            reason = entry.archived.value if entry.archived else "score below archive line"
            changes.append(
                Change(
                    ChangeKind.ARCHIVED,
                    entry.id,
                    entry.score,
                    entry.score,
                    entry.content,
                    entry.category,
                    reason,
                )
            )
        elif old is Status.ARCHIVED and new is Status.ACTIVE:
            changes.append(
                Change(
                    ChangeKind.RESTORED,
                    entry.id,
                    entry.score,
                    entry.score,
                    entry.content,
                    entry.category,
                    "score back above archive line",
                )
            )
    return MergeResult(entries=sort_entries(survivors), changes=changes)


def _decayed(
    entry: MemoryEntry, now: datetime, policy: ScoringPolicy, changes: list[Change]
) -> MemoryEntry:
    score = score_at(entry, now, policy)
    result = entry
    if score != entry.score:
        result = entry.rescored(score, now)
        changes.append(
            Change(ChangeKind.DECAYED, entry.id, entry.score, score, entry.content, entry.category)
        )
    if entry.archived is None and entry.category == "todo" and is_expired(entry, now):
        result = expire(result, policy)
    return result


def _find_match(
    by_id: dict[str, MemoryEntry], by_norm: dict[str, str], cand: Candidate, norm: str
) -> str | None:
    if cand.matches and cand.matches in by_id:
        return cand.matches
    if norm in by_norm:
        return by_norm[norm]
    for entry in by_id.values():
        if entry.category == cand.category and _similar(normalize_content(entry.content), norm):
            return entry.id
    return None


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
) -> None:
    entry = by_id.get(entry_id)
    if entry is None:
        return
    score = contradict(entry.score, policy)
    by_id[entry_id] = entry.with_(score=score, scored_at=now)
    changes.append(
        Change(ChangeKind.CONTRADICTED, entry_id, entry.score, score, entry.content, entry.category)
    )


def _fresh_id(cand: Candidate, by_id: dict[str, MemoryEntry]) -> str:
    if cand.new_id is not None and cand.new_id not in by_id:
        return cand.new_id
    return new_entry_id(set(by_id))


@dataclass(slots=True)
class EntryView:
    """Entries by id, and the id of each normalised content: all that matching a candidate
    needs. Kept up to date in place, so a capture costs a few lookups, not a pass over
    every entry of a large file."""

    by_id: dict[str, MemoryEntry]
    by_norm: dict[str, str]
    by_length: dict[int, list[str]]
    """Ids by the length of their normalised content: a fuzzy match needs lengths within
    15% of each other, so only a few lengths are worth comparing."""
    position: dict[str, int]

    @classmethod
    def of(cls, entries: Iterable[MemoryEntry]) -> EntryView:
        view = cls({}, {}, {}, {})
        for entry in entries:
            view.add(entry)
        return view

    def add(self, entry: MemoryEntry) -> None:
        norm = normalize_content(entry.content)
        self.by_id[entry.id] = entry
        self.by_norm.setdefault(norm, entry.id)
        self.by_length.setdefault(len(norm), []).append(entry.id)
        self.position.setdefault(entry.id, len(self.position))

    def entries(self) -> list[MemoryEntry]:
        return list(self.by_id.values())

    def find(self, cand: Candidate, norm: str) -> str | None:
        """What `_find_match` finds, looking only at entries of a compatible length."""
        if cand.matches and cand.matches in self.by_id:
            return cand.matches
        if norm in self.by_norm:
            return self.by_norm[norm]
        size = len(norm)
        # One length of slack either side of the bounds: `_similar` decides exactly.
        lowest, highest = int(size * SIMILAR) - 1, int(size / SIMILAR) + 1
        nearby = sorted(
            (i for n in range(max(lowest, 1), highest + 1) for i in self.by_length.get(n, ())),
            key=self.position.__getitem__,
        )
        for entry_id in nearby:
            entry = self.by_id[entry_id]
            if entry.category == cand.category and _similar(normalize_content(entry.content), norm):
                return entry_id
        return None


def add_candidates(
    existing: Sequence[MemoryEntry],
    candidates: Iterable[Candidate],
    now: datetime,
    policy: ScoringPolicy = DEFAULT_POLICY,
) -> MergeResult:
    """`apply_candidates` on a copy: the pure form."""
    view = EntryView.of(existing)
    changes = apply_candidates(view, candidates, now, policy)
    return MergeResult(entries=view.entries(), changes=changes)


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
        match_id = view.find(cand, norm)
        if match_id is not None:
            before = status_of(_touch(by_id, match_id, now, policy, changes), policy)
            _reinforce(by_id, match_id, now, None, policy, changes)
            entry = by_id[match_id]
            if before is Status.ARCHIVED and status_of(entry, policy) is Status.ACTIVE:
                changes.append(
                    Change(
                        ChangeKind.RESTORED,
                        entry.id,
                        entry.score,
                        entry.score,
                        entry.content,
                        entry.category,
                        "score back above archive line",
                    )
                )
            continue
        entry = MemoryEntry(
            id=_fresh_id(cand, by_id),
            content=content,
            category=cand.category,
            score=initial_score(cand.importance),
            created_at=now,
            last_activated=now,
            scored_at=now,
            confidence=cand.confidence,
            expires_at=cand.expires_at,
        )
        if is_expired(entry, now):
            continue
        view.add(entry)
        changes.append(
            Change(ChangeKind.ADDED, entry.id, None, entry.score, content, entry.category)
        )
    return changes


def _touch(
    by_id: dict[str, MemoryEntry],
    entry_id: str,
    now: datetime,
    policy: ScoringPolicy,
    changes: list[Change],
) -> MemoryEntry:
    """Decay one entry to `now` in place; the decayed entry."""
    entry = _decayed(by_id[entry_id], now, policy, changes)
    by_id[entry_id] = entry
    return entry
