"""The early-stopping selection of prompt memories equals the obvious full scan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.entries import MemoryEntry, sort_entries
from memory_core.base.policy import DEFAULT_POLICY
from memory_core.longterm.prompt import select_prompt_entries
from memory_core.longterm.scoring import Status, score_at, status_of

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)

entry_strategy = st.builds(
    lambda i, score, age, scored, pinned, category: MemoryEntry(
        id=f"e{i}",
        content=f"memory {i}",
        category=category,
        score=score,
        created_at=T0 - timedelta(days=age + 1),
        last_activated=T0 - timedelta(days=age),
        scored_at=T0 - timedelta(days=min(age, scored)),
        pinned=pinned,
    ),
    st.integers(0, 10_000),
    st.floats(0.05, 1.0),
    st.integers(0, 400),
    st.integers(0, 400),
    st.booleans(),
    st.sampled_from(["fact", "todo", "preference"]),
)


def naive(entries: list[MemoryEntry], now: datetime, min_score: float, top_k: int) -> list[str]:
    current = [e.with_(score=score_at(e, now), scored_at=now) for e in entries]
    chosen = [e for e in current if status_of(e) is Status.ACTIVE and e.score >= min_score]
    return [e.id for e in sort_entries(chosen)[:top_k]]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(entry_strategy, max_size=60, unique_by=lambda e: e.id),
    st.integers(0, 200),
    st.floats(0.2, 0.9),
    st.integers(1, 25),
)
def test_selection_matches_full_scan(
    entries: list[MemoryEntry], days: int, min_score: float, top_k: int
) -> None:
    now = T0 + timedelta(days=days)
    fast = select_prompt_entries(
        entries, now, min_score=min_score, top_k=top_k, policy=DEFAULT_POLICY
    )
    assert [e.id for e in fast] == naive(entries, now, min_score, top_k)
