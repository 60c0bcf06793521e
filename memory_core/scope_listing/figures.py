"""A scope's summary and the figures made from it: pure, no I/O. Its stored form (stamp,
payload) is `storage/summary_format.py`'s, shared with the index that also makes them.

The summary keeps each entry's scoring fields (not its text), in file order, so the
figures are computed as of any instant exactly as `LongTermViews.status` computes them
from the file: the scores decay at read time, and an entry may turn Archived with no
change to the file, so no stored count or mean would stay true for long.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memory_core.base.entries import (
    ArchiveReason,
    EntryFields,
    MemoryClass,
    MemoryEntry,
    build_entry,
)
from memory_core.base.policy import ScoringPolicy
from memory_core.longterm.scoring import Status, score_at, status_of
from memory_core.storage.summary_format import SUMMARY_VERSION as SUMMARY_VERSION
from memory_core.storage.summary_format import encode as encode
from memory_core.storage.summary_format import readable as readable

_EPOCH = datetime.fromtimestamp(0, UTC)
_TEMPLATE = MemoryEntry(
    id="",
    content="",
    category="",
    score=0.0,
    created_at=_EPOCH,
    last_activated=_EPOCH,
    scored_at=_EPOCH,
)
"""What a decoded entry holds besides its scoring fields (no text, no id)."""


@dataclass(frozen=True, slots=True)
class ScopeFigures:
    """What `scopes` and `stats` print of one scope."""

    active_scores: list[float]
    """The Active entries' scores, highest first (ties in file order)."""
    categories: dict[str, int]
    """Active entries per category, in the order of `active_scores`."""
    archived: int
    quarantined: int
    daily_files: int

    @property
    def active(self) -> int:
        return len(self.active_scores)

    @property
    def mean_active_score(self) -> float | None:
        scores = self.active_scores
        return round(sum(scores) / len(scores), 3) if scores else None


def decode(payload: str) -> tuple[list[MemoryEntry], int, int]:
    """(entries with their scoring fields only, quarantined, daily files)."""
    data = json.loads(payload)
    entries = []
    for category, memory_class, score, scored_at, last_activated, pinned, archived in data["e"]:
        # Built as the parser builds entries (`EntryFields`): a frozen dataclass's own
        # constructor costs ~3 us an entry, and a listing of 10 000 scopes makes 20 000.
        fields = EntryFields.of(_TEMPLATE)
        fields.category = category
        fields.score = score
        fields.scored_at = fields.created_at = datetime.fromisoformat(scored_at)
        fields.last_activated = datetime.fromisoformat(last_activated)
        fields.pinned = pinned
        fields.archived = ArchiveReason(archived) if archived is not None else None
        fields.memory_class = MemoryClass(memory_class) if memory_class is not None else None
        entries.append(build_entry(fields))
    return entries, int(data["q"]), int(data["d"])


def figures_of(
    entries: Sequence[MemoryEntry],
    quarantined: int,
    daily_files: int,
    when: datetime,
    policy: ScoringPolicy,
) -> ScopeFigures:
    """The figures as of `when`, by `LongTermViews.status`'s rules: each entry scored at
    `when`, Active apart from the rest, Active sorted by score (stable)."""
    current = [e.rescored(score_at(e, when, policy), when) for e in entries]
    active = sorted(
        (e for e in current if status_of(e, policy) is Status.ACTIVE), key=lambda e: -e.score
    )
    return ScopeFigures(
        active_scores=[e.score for e in active],
        categories=dict(Counter(e.category for e in active)),
        archived=len(current) - len(active),
        quarantined=quarantined,
        daily_files=daily_files,
    )


def figures(payload: str, when: datetime, policy: ScoringPolicy) -> ScopeFigures:
    return figures_of(*decode(payload), when, policy)
