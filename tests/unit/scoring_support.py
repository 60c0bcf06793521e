"""What the scoring and merge tests share: a start moment, a flat policy, and entries made
by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory_core.base.entries import (
    MemoryEntry,
)
from memory_core.base.policy import ScoringPolicy

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


FLAT = ScoringPolicy(decay="flat")


def days(n: float) -> timedelta:
    return timedelta(days=n)


def entry(
    entry_id: str = "e1",
    score: float = 0.6,
    *,
    at: datetime = T0,
    content: str | None = None,
    category: str = "fact",
    **kw: object,
) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id,
        content=content or f"memory number {entry_id}",
        category=category,
        score=score,
        created_at=at,
        last_activated=at,
        scored_at=at,
        **kw,  # type: ignore[arg-type]
    )


def only(result_entries: list[MemoryEntry], entry_id: str = "e1") -> MemoryEntry:
    found = [e for e in result_entries if e.id == entry_id]
    assert len(found) == 1, f"{entry_id} not in result"
    return found[0]
