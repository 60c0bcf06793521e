"""Pure scoring rules (seed 002 §3.4, §8.4; seed 001 §1.6–1.7). No I/O, no clock."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from memory_core.entries import ArchiveReason, Importance, MemoryEntry

INITIAL_SCORES: dict[Importance, float] = {
    Importance.HIGH: 0.8,
    Importance.MEDIUM: 0.6,
    Importance.LOW: 0.4,
}


@dataclass(frozen=True, slots=True)
class ScoringPolicy:
    """The numbers of the lifecycle; defaults are the seed's."""

    reinforce_rate: float = 0.2
    contradict_factor: float = 0.5
    daily_decay: float = 0.99
    grace_days: int = 7
    archive_below: float = 0.2
    forget_below: float = 0.05
    category_decay: dict[str, float] = field(default_factory=dict)
    """Per-category daily factor overriding `daily_decay` (e.g. todo fades faster)."""

    def decay_rate(self, category: str) -> float:
        return self.category_decay.get(category, self.daily_decay)


DEFAULT_POLICY = ScoringPolicy()


class Status(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    FORGOTTEN = "forgotten"


def initial_score(importance: Importance | str) -> float:
    return INITIAL_SCORES[Importance(importance)]


def reinforce(score: float, policy: ScoringPolicy = DEFAULT_POLICY) -> float:
    """Marginally diminishing gain: approaches 1.0 and never exceeds it."""
    return min(1.0, score + (1.0 - score) * policy.reinforce_rate)


def contradict(score: float, policy: ScoringPolicy = DEFAULT_POLICY) -> float:
    return score * policy.contradict_factor


def effective_days(last_activated: datetime, when: datetime, grace_days: int) -> int:
    """Whole days of decay accrued by `when` (the seed's `max(0, days - 7)`)."""
    return max(0, (when - last_activated).days - grace_days)


def decayed_score(
    score: float,
    scored_at: datetime,
    last_activated: datetime,
    when: datetime,
    rate: float,
    grace_days: int,
) -> float:
    """Score at `when` given the score at `scored_at`.

    Decay counts only the days accrued between the two instants, so repeated merges do not
    compound the seed's formula: decaying to t1 then to t2 equals decaying straight to t2.
    """
    days = effective_days(last_activated, when, grace_days) - effective_days(
        last_activated, scored_at, grace_days
    )
    if days <= 0:
        return score
    return score * rate**days


def score_at(entry: MemoryEntry, when: datetime, policy: ScoringPolicy = DEFAULT_POLICY) -> float:
    """The entry's score at `when`; pinned entries do not decay."""
    if entry.pinned:
        return entry.score
    return decayed_score(
        entry.score,
        entry.scored_at,
        entry.last_activated,
        when,
        policy.decay_rate(entry.category),
        policy.grace_days,
    )


def status_of(entry: MemoryEntry, policy: ScoringPolicy = DEFAULT_POLICY) -> Status:
    """Where the entry belongs with its current score and flags."""
    if not entry.pinned and entry.score < policy.forget_below:
        return Status.FORGOTTEN
    if entry.archived is not None:
        return Status.ARCHIVED
    if not entry.pinned and entry.score < policy.archive_below:
        return Status.ARCHIVED
    return Status.ACTIVE


def is_expired(entry: MemoryEntry, when: datetime) -> bool:
    return entry.expires_at is not None and entry.expires_at <= when


def days_until_below(
    entry: MemoryEntry, threshold: float, when: datetime, policy: ScoringPolicy = DEFAULT_POLICY
) -> int | None:
    """Whole days from `when` until the score first drops below `threshold`.

    0 when it already is, None when it never will (pinned, or no decay).
    """
    current = score_at(entry, when, policy)
    if current < threshold:
        return 0
    rate = policy.decay_rate(entry.category)
    if entry.pinned or rate >= 1.0 or threshold <= 0:
        return None
    # Days of decay needed from now: smallest n with current * rate**n < threshold.
    needed = math.floor(math.log(threshold / current) / math.log(rate)) + 1
    accrued = effective_days(entry.last_activated, when, policy.grace_days)
    grace_left = max(0, policy.grace_days - (when - entry.last_activated).days)
    return needed + (grace_left if accrued == 0 else 0)


def projection(
    entry: MemoryEntry, when: datetime, days: int, policy: ScoringPolicy = DEFAULT_POLICY
) -> list[float]:
    """Scores at `when + 0..days` days, for plots and what-if views."""
    from datetime import timedelta

    return [score_at(entry, when + timedelta(days=d), policy) for d in range(days + 1)]


def expire(entry: MemoryEntry, policy: ScoringPolicy = DEFAULT_POLICY) -> MemoryEntry:
    """An expired todo is pushed below the archive line and flagged (seed 002 Phase 1.5)."""
    lowered = min(entry.score, max(policy.forget_below, policy.archive_below - 0.01))
    return entry.with_(score=lowered, archived=ArchiveReason.EXPIRED)
