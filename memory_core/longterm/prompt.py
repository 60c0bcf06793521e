"""The long-term memories that ride in every system prompt.

Every entry is one line of one shape, `- [category] content` (in a group, the content says
who said it: `claims.shown`): a model reads a list more
surely when its lines agree (the block once mixed three shapes: with score and date, bare,
cut). A line that does not fit the token cap whole is cut, in the same shape, so the block
stays under its cap without dropping the best.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from memory_core.base.entries import MemoryEntry, sort_entries
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.base.speaker_label import is_claim_text
from memory_core.base.text import estimate_tokens
from memory_core.longterm.claims import shown
from memory_core.longterm.scoring import score_at

HEADER = "# 历史记忆 (long-term memory)\n\n关于用户的关键信息 / What I know about the user:"
SHORT_CHARS = 80


def select_prompt_entries(
    entries: Sequence[MemoryEntry],
    now: datetime,
    *,
    min_score: float = 0.5,
    top_k: int = 20,
    policy: ScoringPolicy = DEFAULT_POLICY,
    ranked: bool = False,
) -> list[MemoryEntry]:
    """Active entries scoring at least `min_score` now, best first, at most `top_k`.

    Decay only lowers a stored score, so walking entries by stored score can stop as soon as
    a stored score is below the k-th best current one: with 100 000 entries a prompt costs a
    few dozen score computations, not 100 000. Pass `ranked=True` when `entries` is already
    ordered by stored score, highest first.
    """
    return select_prompt_entries_until(
        entries, now, min_score=min_score, top_k=top_k, policy=policy, ranked=ranked
    )[0]


def select_prompt_entries_until(
    entries: Sequence[MemoryEntry],
    now: datetime,
    *,
    min_score: float = 0.5,
    top_k: int = 20,
    policy: ScoringPolicy = DEFAULT_POLICY,
    ranked: bool = False,
) -> tuple[list[MemoryEntry], datetime]:
    """`select_prompt_entries`, plus the instant until which its answer stays the same.

    A current score changes only when an entry's whole days since `last_activated` tick
    over, and only the entries walked here can change the answer (the walk stops at the
    same place while their scores stand), so the answer holds for every instant from
    `now` up to the earliest such tick: a caller may reuse it until then.
    """
    order = entries if ranked else sorted(entries, key=lambda e: -e.score)
    kth_best: list[float] = []  # min-heap of the top_k current scores so far
    candidates: list[MemoryEntry] = []
    until = datetime.max.replace(tzinfo=UTC)
    for entry in order:
        if entry.score < min_score or (len(kth_best) == top_k and entry.score < kth_best[0]):
            break
        if entry.archived is not None:
            continue
        if not entry.pinned:
            tick = entry.last_activated + timedelta(days=(now - entry.last_activated).days + 1)
            until = min(until, tick)
        score = score_at(entry, now, policy)
        if score < min_score or (not entry.pinned and score < policy.archive_below):
            continue
        candidates.append(entry.with_(score=score, scored_at=now))
        if len(kth_best) < top_k:
            heapq.heappush(kth_best, score)
        elif score > kth_best[0]:
            heapq.heapreplace(kth_best, score)
    return sort_entries(candidates)[:top_k], until


def _forms(entry: MemoryEntry) -> list[str]:
    """The entry's line, whole first, then cut: one shape either way."""
    content = " ".join(shown(entry).split())
    line = f"- [{entry.category}] {content}"
    if len(content) <= SHORT_CHARS:
        return [line]
    return [line, f"- [{entry.category}] {content[: SHORT_CHARS - 1]}…"]


def render_prompt_memories(entries: Sequence[MemoryEntry], max_tokens: int = 1500) -> str:
    """Render already-selected entries; empty string when there is nothing to say.
    Another member's claims (a group's, longterm/claims.py) come after the rest."""
    if not entries:
        return ""
    entries = sorted(entries, key=lambda entry: is_claim_text(shown(entry)))
    budget = max_tokens - estimate_tokens(HEADER)
    lines: list[str] = []
    for entry in entries:
        for form in _forms(entry):
            cost = estimate_tokens(form)
            if cost <= budget:
                lines.append(form)
                budget -= cost
                break
        else:
            break
    if not lines:
        return ""
    return HEADER + "\n" + "\n".join(lines)
