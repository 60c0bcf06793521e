"""Pure scoring rules (docs/decisions/0006-scoring-and-decay.md). No I/O, no clock.

One formula holds the class rates and the flat rate. An entry's lifecycle score `s` starts at its
importance's value: reinforcement `s + (1 - s) * 0.2` (and the grace
period restarts), contradiction `s * 0.5`, Archived below 0.2, forgotten below 0.05. Between
activations it decays as

    s(t) = s(t0) * f ** (d(t) - d(t0)),   d(t) = max(0, whole days since activation - grace)

where the daily factor `f` is per class, `exp(-lambda)` with lambda fact 0.008,
belief 0.07, summary 0.025, event 0.15 (half-lives of about 87, 10, 28 and 5 days), or a
single 0.99 when `scoring.decay = "flat"`. A `scoring.category_decay` factor overrides
either for the entries whose class comes from their category. Ranking is a
separate figure built on `s`: see `rank_terms`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from memory_core.base.entries import (
    ArchiveReason,
    Importance,
    MemoryEntry,
    confidence_of,
)
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy

INITIAL_SCORES: dict[Importance, float] = {
    Importance.HIGH: 0.8,
    Importance.MEDIUM: 0.6,
    Importance.LOW: 0.4,
}


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
    """Whole days of decay accrued by `when` (`max(0, days - 7)` with the default grace)."""
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
    compound: decaying to t1 then to t2 equals decaying straight to t2.
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
        policy.daily_factor(entry),
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
    rate = policy.daily_factor(entry)
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
    """An expired todo is pushed below the archive line and flagged."""
    lowered = min(entry.score, max(policy.forget_below, policy.archive_below - 0.01))
    return entry.with_(score=lowered, archived=ArchiveReason.EXPIRED)


ACCESS_BONUS_MAX = 0.1
"""The most recall hits can add to a rank: use matters, but never outweighs the score."""
ACCESS_SATURATION = 20
"""Hits at which the access bonus is full; it grows with log(1 + hits) up to there."""
IMPORTANCE_BONUS: dict[Importance, float] = {
    Importance.HIGH: 0.1,
    Importance.MEDIUM: 0.05,
    Importance.LOW: 0.0,
}


@dataclass(frozen=True, slots=True)
class RankTerms:
    """The ranking score, term by term, so a view can show why an entry ranks
    where it does: `base * decay + access + importance`."""

    base: float
    """The lifecycle score at its last scoring, times the entry's confidence."""
    decay: float
    """The time-decay factor accrued since that scoring (1.0 within the grace period)."""
    access: float
    importance: float

    @property
    def total(self) -> float:
        return self.base * self.decay + self.access + self.importance


def importance_of(entry: MemoryEntry) -> Importance:
    """The importance extraction gave; medium for entries written before it was kept (their
    score, already shaped by decay and reinforcement, no longer tells)."""
    return entry.importance if entry.importance is not None else Importance.MEDIUM


def access_bonus(hits: int) -> float:
    if hits <= 0:
        return 0.0
    return ACCESS_BONUS_MAX * min(1.0, math.log1p(hits) / math.log1p(ACCESS_SATURATION))


def rank_terms(
    entry: MemoryEntry, when: datetime, policy: ScoringPolicy = DEFAULT_POLICY
) -> RankTerms:
    return terms_at(entry, score_at(entry, when, policy))


def terms_at(entry: MemoryEntry, current: float) -> RankTerms:
    """The terms given the entry's current score (for a caller that has it already)."""
    decay = current / entry.score if entry.score > 0 else 1.0
    return RankTerms(
        base=entry.score * confidence_of(entry),
        decay=decay,
        access=access_bonus(entry.hits),
        importance=IMPORTANCE_BONUS[importance_of(entry)],
    )


def contradict_belief(entry: MemoryEntry, policy: ScoringPolicy = DEFAULT_POLICY) -> MemoryEntry:
    """A belief a later fact contradicts loses confidence; its score follows the lifecycle."""
    lowered = confidence_of(entry) * policy.belief_contradict_factor
    return entry.with_(confidence=round(lowered, 4))


RANK_BONUS_MAX = ACCESS_BONUS_MAX + max(IMPORTANCE_BONUS.values())
"""The most the bonuses add: a rank never exceeds the stored score plus this."""


def rank_entries(
    entries: Sequence[MemoryEntry],
    when: datetime,
    limit: int,
    policy: ScoringPolicy = DEFAULT_POLICY,
) -> list[tuple[MemoryEntry, float]]:
    """The Active entries with the `limit` best ranking scores at `when`, best first.

    A rank is at most the stored score (decay only lowers it, confidence is at most 1)
    plus `RANK_BONUS_MAX`, so a walk by stored score stops once that bound falls below
    the limit-th best rank: at 10 000 entries a snapshot ranks a few hundred, not all.
    """
    order = sorted(entries, key=lambda e: -e.score)
    best: list[tuple[float, int]] = []  # min-heap of (rank, -position): ties keep order
    for position, entry in enumerate(order):
        if len(best) == limit and entry.score + RANK_BONUS_MAX < best[0][0]:
            break
        if entry.archived is not None:
            continue
        current = score_at(entry, when, policy)
        if not entry.pinned and current < policy.archive_below:
            continue
        rank = terms_at(entry, current).total
        if len(best) < limit:
            heapq.heappush(best, (rank, -position))
        elif rank > best[0][0]:
            heapq.heapreplace(best, (rank, -position))
    chosen = sorted(best, key=lambda item: (-item[0], -item[1]))
    return [(order[-negative], rank) for rank, negative in chosen]
