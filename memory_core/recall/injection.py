"""From a pending message to the memory block injected into the prompt.

The ranking (memory_core/recall/index/pipeline.py) orders the hits; this module turns them into
the block the prompt carries: by confidence a hit is shown plain, with its source, or only
as a `path:line` pointer, at most `hit_chars` characters each, within the token budget.
No hit, no block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_core.base.chunks import ChunkKind
from memory_core.base.text import estimate_tokens
from memory_core.base.when import day_bounds as day_bounds
from memory_core.recall.index import Hit

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


HIGH_CONFIDENCE = 0.8
LOW_CONFIDENCE = 0.5
"""The confidence tiers: above 0.8 a hit is injected plain, from 0.5 with its source tag, below
0.5 only as a pointer the model can open with memory_get."""


def hit_line(hit: Hit, max_chars: int) -> str:
    """One line of the block, by confidence: plain, tagged, or a pointer."""
    when = (
        f" ({hit.created_at.date().isoformat()})"
        if hit.created_at and hit.kind is not ChunkKind.LONG_TERM
        else ""
    )
    if hit.confidence < LOW_CONFIDENCE:
        return f"- see {hit.location}{when} (memory_get)"
    text = " / ".join(_clip(line, max_chars) for line in hit.text.splitlines() if line.strip())
    if hit.confidence > HIGH_CONFIDENCE:
        return f"- {text}{when}"
    return f"- [{hit.location}]{when} {text}"


def build_injection(
    keywords: Sequence[str],
    hits: Sequence[Hit],
    *,
    max_hits: int = 5,
    token_budget: int = 2048,
    hit_chars: int = 300,
) -> Injection:
    """Fill the budget with the hits in ranking order; pure, so tests and the TUI agree.

    The ranking already holds what the old tiers did (long-term and recent hits lift as
    score terms); the token budget decides how many of the query's final count fit.
    """
    budget = token_budget - estimate_tokens(BLOCK_HEADER)
    lines: list[str] = []
    used: list[Hit] = []
    for hit in hits:
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


def without_known(injection: Injection, known: str, hit_chars: int = 300) -> Injection:
    """The injection less the long-term entries `known` (the prompt's memory block)
    already states: the model reads each memory once, in one place.

    A long-term hit's text is its entry's content; it is known when the block holds that
    content, whitespace folded (the block folds it too). Other hits are kept."""
    folded = " ".join(known.split())
    kept = [
        hit
        for hit in injection.hits
        if hit.kind is not ChunkKind.LONG_TERM or " ".join(hit.text.split()) not in folded
    ]
    if len(kept) == len(injection.hits):
        return injection
    # The kept lines fitted the budget already: rebuild the block from them alone.
    return build_injection(
        injection.keywords,
        kept,
        max_hits=len(kept),
        token_budget=injection.tokens + estimate_tokens(BLOCK_HEADER),
        hit_chars=hit_chars,
    )


def _clip(line: str, max_chars: int) -> str:
    """One line of a hit (a turn of an exchange) cut at `max_chars`, with a mark."""
    flat = " ".join(line.split())
    return flat if len(flat) <= max_chars else flat[:max_chars] + TRUNCATED
