"""Pure: the entries and changes each write of a long-term file makes.

`LongTermMemory` orders the I/O of a write (the store's locks, the forgotten file, the
audit log, the index); what the write does to the entries is decided here, on plain
lists, so a preview computes exactly what a write would and a test needs no files: a
merge with the recorded uses of entries, the entries a write forgot (as the forgotten
file keeps them), and the edits of one entry (pin, archive, restore, forget, new text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_core.base.entries import ArchiveReason, Importance, MemoryEntry
from memory_core.base.merge_values import Change, ChangeKind, MergeResult, Proposal
from memory_core.base.policy import ScoringPolicy
from memory_core.longterm.merge import merge
from memory_core.longterm.scoring import initial_score, score_at
from memory_core.storage.interfaces import Activation

RewriteFn = Callable[[list[MemoryEntry], datetime], tuple[list[MemoryEntry], list[Change]]]
EditFn = Callable[[MemoryEntry, datetime], tuple[MemoryEntry | None, ChangeKind, str]]
"""An edit of one entry: the entry after it (None: forgotten), the change and its detail.
Returning the very entry it was given means "nothing to do": no write, no audit row."""


# --- merges ---------------------------------------------------------------------------
def merged(
    entries: Sequence[MemoryEntry],
    activations: Sequence[Activation],
    batch: Sequence[Proposal],
    when: datetime,
    session_id: str | None,
    seen: frozenset[str],
    policy: ScoringPolicy,
) -> MergeResult:
    """A merge as `merge_candidates` writes it: recorded uses first (a merge per session
    that used entries), then the candidates. Pure, so a preview computes the same."""
    changes: list[Change] = []
    for used_in, candidates in _activation_batches(entries, activations):
        applied = merge(entries, candidates, when, used_in, policy)
        entries, changes = applied.entries, changes + applied.changes
    result = merge(entries, batch, when, session_id, policy, seen)
    return MergeResult(result.entries, changes + result.changes)


def kept_forgotten(
    before: Sequence[MemoryEntry], changes: Iterable[Change], when: datetime
) -> list[MemoryEntry]:
    """The entries `changes` forgot, as they were in `before` with the score they had when
    forgotten and `scored_at` = that time (the forgotten file's convention). One that is
    not in `before` (added by a staged capture and forgotten in the same write: only a
    clock that jumps does that) is made from its change."""
    gone = {c.entry_id: c for c in changes if c.kind is ChangeKind.FORGOTTEN}
    if not gone:
        return []
    found = {e.id: e for e in before if e.id in gone}
    kept = []
    for entry_id, c in gone.items():
        score = max(0.0, min(1.0, c.old_score or 0.0))
        entry = found.get(entry_id)
        if entry is None:
            entry = MemoryEntry(entry_id, c.content, c.category, score, when, when, when)
        kept.append(entry.with_(score=score, scored_at=when))
    return kept


def _activation_batches(
    entries: Sequence[MemoryEntry], activations: Sequence[Activation]
) -> list[tuple[str, list[Proposal]]]:
    """Recorded uses of entries, as reinforcing candidates grouped by session."""
    by_id = {e.id: e for e in entries}
    grouped: dict[str, list[Proposal]] = {}
    for entry_id, session_id in activations:
        entry = by_id.get(entry_id)
        if entry is not None:
            grouped.setdefault(session_id, []).append(
                Proposal(content=entry.content, category=entry.category, matches=entry_id)
            )
    return list(grouped.items())


# --- edits of one entry ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Edited:
    """One entry edited in a scope's entries."""

    entries: list[MemoryEntry]
    """All of the scope's entries after the edit."""
    entry: MemoryEntry
    """The entry after the edit; when forgotten (or unchanged), as it was."""
    change: Change | None
    """The audit row; None when the edit had nothing to do (nothing is written)."""


def edited(
    entries: Sequence[MemoryEntry],
    entry_id: str,
    fn: EditFn,
    when: datetime,
    policy: ScoringPolicy,
) -> Edited | None:
    """`fn` applied to the entry `entry_id` of `entries`; None when there is no such entry."""
    for index, entry in enumerate(entries):
        if entry.id == entry_id:
            updated, kind, detail = fn(entry, when)
            if updated is entry:
                return Edited(list(entries), entry, None)
            after_edit = list(entries)
            if updated is None:
                del after_edit[index]
            else:
                after_edit[index] = updated
            after = updated or entry
            record = Change(
                kind,
                entry.id,
                score_at(entry, when, policy),
                None if updated is None else after.score,
                after.content,
                after.category,
                detail,
            )
            return Edited(after_edit, after, record)
    return None


def forget_edit(entry: MemoryEntry, now: datetime) -> tuple[None, ChangeKind, str]:
    """Forget by request: the entry leaves the file (the forgotten file keeps it)."""
    return None, ChangeKind.FORGOTTEN, "forgotten by request"


def content_edit(text: str) -> EditFn:
    """New text for the entry (already checked: `LongTermMemory.edit`)."""
    return lambda e, now: (e.with_(content=text), ChangeKind.EDITED, "")


def pin_edit(pinned: bool, policy: ScoringPolicy) -> EditFn:
    """Pin or unpin; the score is frozen at (or resumes decay from) its value now."""
    kind = ChangeKind.PINNED if pinned else ChangeKind.UNPINNED

    def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
        if e.pinned == pinned:
            return e, kind, ""  # already so
        # Freeze (or resume decay from) the score as it is now, not as last stored.
        current = score_at(e, now, policy)
        return e.with_(pinned=pinned, score=current, scored_at=now), kind, ""

    return change


def archive_edit(policy: ScoringPolicy) -> EditFn:
    """Archive by request, with the score as of now."""

    def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
        if e.archived is not None:
            return e, ChangeKind.ARCHIVED, ""  # already archived by request or expiry
        current = score_at(e, now, policy)
        return (
            e.with_(archived=ArchiveReason.MANUAL, score=current, scored_at=now),
            ChangeKind.ARCHIVED,
            "archived by request",
        )

    return change


def restore_edit(policy: ScoringPolicy) -> EditFn:
    """Back to Active from the archive (`revived`); nothing to do for an Active entry."""

    def change(e: MemoryEntry, now: datetime) -> tuple[MemoryEntry, ChangeKind, str]:
        if e.archived is None and score_at(e, now, policy) >= policy.archive_below:
            return e, ChangeKind.RESTORED, ""  # already Active
        return revived(e, now, policy), ChangeKind.RESTORED, "restored by request"

    return change


def revived(entry: MemoryEntry, now: datetime, policy: ScoringPolicy) -> MemoryEntry:
    """The entry Active again: a decayed one is lifted to the low-importance start score
    and counted as activated now, or it would fall straight back into the archive."""
    current = score_at(entry, now, policy)
    if current < policy.archive_below:
        floor = initial_score(Importance.LOW)
        return entry.with_(archived=None, score=floor, scored_at=now, last_activated=now)
    return entry.with_(archived=None, score=current, scored_at=now)
