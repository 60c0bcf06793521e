"""Pure merge of extracted candidates into the long-term store (docs/lifecycle.md).

`merge` takes what is on disk, what the model (or the heuristic extractor) proposed and the
time, and returns the new entries plus every change made, so callers can persist, audit
and report without recomputing anything. `apply_candidates` is a capture's fast path: the
same adding, reinforcing and contradicting without decaying every other entry.

What a candidate resembles is `matching`'s question, the decay/expire/archive/forget pass
is `decay`'s, whose fact a group member may change is `claims`', and the values in and
out are `merge_values`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from memory_core.base.entries import (
    SESSION_MEMORY,
    ArchiveReason,
    MemoryClass,
    MemoryEntry,
    class_of,
    new_entry_id,
    sort_entries,
)
from memory_core.base.merge_values import UPDATES_DETAIL, Change, ChangeKind, MergeResult, Proposal
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm.claims import claim_contradictions, refuted, ruled
from memory_core.longterm.decay import decay_into, settle
from memory_core.longterm.matching import EntryView, normalize_content
from memory_core.longterm.scoring import (
    Status,
    contradict,
    contradict_belief,
    initial_score,
    is_expired,
    reinforce,
)


def merge(
    existing: Sequence[MemoryEntry],
    candidates: Iterable[Proposal],
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
    decay_into(existing, now, policy, before_status, by_id, changes)

    batch = list(candidates)
    # The view shares `by_id`; its index is built only for a batch with candidates.
    view = EntryView(by_id) if batch else None

    for cand in batch:
        assert view is not None
        content = cand.content.strip()
        if not content:
            continue
        cand = claim_contradictions(cand, by_id)
        for target in cand.contradicts:
            _contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        match = view.find(cand, norm)
        cand, restates, updates = ruled(cand, match.restates, match.updates, by_id)
        if restates is not None:
            if _reinforce(by_id, restates, now, session_id, policy, changes):
                for claim in refuted(by_id, restates, cand):
                    _contradict(by_id, claim, now, policy, changes, f"refuted by {cand.speaker}")
            continue
        entry = _new_entry(cand, content, now, session_id, by_id)
        if is_expired(entry, now):
            continue
        if updates is not None:
            _contradict(by_id, updates, now, policy, changes, f"updated by {entry.id}")
        view.add(entry, norm)
        changes.append(_added(entry, updates))

    settle(by_id, before_status, policy, changes)
    return MergeResult(entries=sort_entries(by_id.values()), changes=changes)


def _reinforce(
    by_id: dict[str, MemoryEntry],
    entry_id: str,
    now: datetime,
    session_id: str | None,
    policy: ScoringPolicy,
    changes: list[Change],
) -> bool:
    """Reinforce the entry; False when this session did already (nothing changes)."""
    entry = by_id[entry_id]
    if session_id is not None and session_id in entry.sessions:
        return False
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
    return True


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
    """The ADDED change of a new entry; an update names the entry it replaces, a group
    member's claim the self-fact it disputes (`claim on <id>`)."""
    detail = f"{UPDATES_DETAIL}{updates}" if updates is not None else ""
    if entry.claim_on is not None:
        detail = f"claim on {entry.claim_on}"
    return Change(
        ChangeKind.ADDED, entry.id, None, entry.score, entry.content, entry.category, detail
    )


def _new_entry(
    cand: Proposal,
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
        speaker=cand.speaker,
        claim_on=cand.claim_on,
        speaker_id=cand.speaker_id,
    )


def apply_candidates(
    view: EntryView,
    candidates: Iterable[Proposal],
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
        cand = claim_contradictions(cand, by_id)
        for target in cand.contradicts:
            if target in by_id:
                _touch(by_id, target, now, policy, changes)
                _contradict(by_id, target, now, policy, changes)
        norm = normalize_content(content)
        match = view.find(cand, norm)
        cand, match_id, updates = ruled(cand, match.restates, match.updates, by_id)
        if match_id is not None:
            before = _touch(by_id, match_id, now, policy, changes)
            _reinforce(by_id, match_id, now, None, policy, changes)
            # Archive/restore transitions of the touched entry, as `merge` records them.
            settle({match_id: by_id[match_id]}, before, policy, changes)
            for claim in refuted(by_id, match_id, cand):
                # As a contradiction named by a candidate: decayed, then contradicted.
                _touch(by_id, claim, now, policy, changes)
                _contradict(by_id, claim, now, policy, changes, f"refuted by {cand.speaker}")
            continue
        entry = _new_entry(cand, content, now, None, by_id)
        if is_expired(entry, now):
            continue
        if updates is not None:
            _touch(by_id, updates, now, policy, changes)
            _contradict(by_id, updates, now, policy, changes, f"updated by {entry.id}")
        view.add(entry, norm)
        changes.append(_added(entry, updates))
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
    decay_into([by_id[entry_id]], now, policy, before, by_id, changes)
    return before
