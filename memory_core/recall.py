"""From a pending message to the memory block injected into the prompt.

Keywords come from the pending input first, then the last five messages; hits are ordered
by where they come from (long-term memory, then files of the last days, then summaries,
then anything older) and by score within each tier; the block holds at most five hits of
at most 300 characters each and fits a 2048-token budget. No hit, no block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo

from memory_core.chunking import ChunkKind
from memory_core.index import Hit
from memory_core.text import estimate_tokens

BLOCK_HEADER = "## Memory"
TRUNCATED = "……[truncated]"

RECALL_INTENT = re.compile(
    r"之前|上次|以前|昨天|前天|刚才|还记得|记不记得|聊过|问过|说过|"
    r"\bremember\b|\brecall\b|last time|yesterday|earlier today|previously|"
    r"did (?:i|we) (?:say|talk|mention|decide)|we (?:talked|spoke) about|you said",
    re.IGNORECASE,
)


def has_recall_intent(text: str) -> bool:
    """'Do you remember…', '上次…': questions about the past should search first."""
    return RECALL_INTENT.search(text) is not None


def recall_window(text: str, today: date) -> tuple[date, date] | None:
    """The days a recall question points at (yesterday, the day before), if it says."""
    if "前天" in text or re.search(r"day before yesterday", text, re.IGNORECASE):
        day = today - timedelta(days=2)
        return day, day
    if "昨天" in text or re.search(r"\byesterday\b", text, re.IGNORECASE):
        day = today - timedelta(days=1)
        return day, day
    if (
        "今天" in text
        or "刚才" in text
        or re.search(r"\btoday\b|earlier today", text, re.IGNORECASE)
    ):
        return today, today
    if "上周" in text or re.search(r"last week", text, re.IGNORECASE):
        return today - timedelta(days=7 + today.weekday()), today - timedelta(
            days=today.weekday() + 1
        )
    return None


def tier(hit: Hit, today: date, recent_days: int) -> int:
    """0 long-term, 1 files of the last `recent_days` days, 2 summaries, 3 the rest."""
    if hit.kind is ChunkKind.LONG_TERM:
        return 0
    if hit.kind is ChunkKind.SUMMARY:
        return 2
    if hit.created_at is not None and hit.created_at.date() >= today - timedelta(days=recent_days):
        return 1
    return 3


@dataclass(frozen=True, slots=True)
class Injection:
    keywords: list[str]
    hits: list[Hit] = field(default_factory=list)
    """The hits that made it into the block, in block order."""
    block: str = ""
    tokens: int = 0

    @property
    def used_entry_ids(self) -> list[str]:
        return [h.ref for h in self.hits if h.kind is ChunkKind.LONG_TERM and h.ref]


def hit_line(hit: Hit, max_chars: int) -> str:
    text = " ".join(hit.text.split())
    if len(text) > max_chars:
        text = text[:max_chars] + TRUNCATED
    when = (
        f" ({hit.created_at.date().isoformat()})"
        if hit.created_at and hit.kind is not ChunkKind.LONG_TERM
        else ""
    )
    return f"[{hit.location}]{when} {text}"


def build_injection(
    keywords: Sequence[str],
    hits: Sequence[Hit],
    *,
    today: date,
    max_hits: int = 5,
    token_budget: int = 2048,
    hit_chars: int = 300,
    recent_days: int = 5,
) -> Injection:
    """Order by tier then score, and fill the budget; pure, so tests and the TUI agree."""
    ordered = sorted(
        enumerate(hits),
        key=lambda pair: (tier(pair[1], today, recent_days), -pair[1].score, pair[0]),
    )
    budget = token_budget - estimate_tokens(BLOCK_HEADER)
    lines: list[str] = []
    used: list[Hit] = []
    for _, hit in ordered:
        if len(used) >= max_hits:
            break
        line = hit_line(hit, hit_chars)
        # Each line is joined to the block with a line break, which costs too.
        cost = estimate_tokens("\n" + line)
        if cost > budget:
            continue
        lines.append(line)
        used.append(hit)
        budget -= cost
    if not used:
        return Injection(keywords=list(keywords))
    block = BLOCK_HEADER + "\n" + "\n".join(lines)
    return Injection(keywords=list(keywords), hits=used, block=block, tokens=estimate_tokens(block))


def day_bounds(first: date, last: date, zone: tzinfo) -> tuple[datetime, datetime]:
    """Instants bounding local days `first`..`last` inclusive."""
    start = datetime.combine(first, time(0, 0), tzinfo=zone)
    end = datetime.combine(last + timedelta(days=1), time(0, 0), tzinfo=zone)
    return start, end
