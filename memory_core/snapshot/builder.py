"""Layer 1, the working snapshot: what every conversation of a scope needs, in one small
Markdown file (`SNAPSHOT.md`) that rides in the prompt.

Pure: the caller hands in the ranked entries, the summaries, the recent events and the
fixed sections; this module allocates the token budget and renders. The shape:

* Identity (~100 tokens), Owner (~150), Constraints (~100): fixed. They come from the
  config or from hand edits of the file; a rebuild keeps a person's text whole
  (`kept_sections`), and only counts it against its limit.
* Top Summaries (800–1 500 tokens) and Ranked Index (600–1 500): dynamic, by rank. The
  higher an item ranks, the richer its text: shares of a section's budget by rank are
  #1 40 %, #2 25 %, #3 15 %, the rest 20 % together; the index's high ranks are written
  whole with their category and score, the middle ones as a line cut to their share,
  the low ones as a pointer (id, category, score) a model can open with memory_get.
* Recent (~200): the newest facts of the event log.

The whole stays within a budget of 2 000–4 000 tokens (default 3 000).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory_core.base.clock import format_when
from memory_core.base.entries import MemoryEntry
from memory_core.base.text import estimate_tokens
from memory_core.longterm.claims import shown

IDENTITY, OWNER, CONSTRAINTS = "Identity", "Owner", "Constraints"
TOP_SUMMARIES, RANKED_INDEX, RECENT = "Top Summaries", "Ranked Index", "Recent"
FIXED_SECTIONS = (IDENTITY, OWNER, CONSTRAINTS)
SECTION_ORDER = (IDENTITY, OWNER, CONSTRAINTS, TOP_SUMMARIES, RANKED_INDEX, RECENT)
FIXED_LIMITS = {IDENTITY: 100, OWNER: 150, CONSTRAINTS: 100}
RECENT_LIMIT = 200
SUMMARIES_RANGE = (800, 1500)
INDEX_RANGE = (600, 1500)
BUDGET_RANGE = (2000, 4000)
DEFAULT_BUDGET = 3000
RANK_SHARES = (0.40, 0.25, 0.15)
REST_SHARE = 0.20
RICH_RANKS = 3
"""Index ranks shown with their date as well (their shares hold their whole text)."""
CONCISE_RANKS = 12
"""Index ranks shown with their text cut to their share; ranks below are pointers."""
POINTER_ROOM = 0.15
"""Share of the index kept for pointer lines when there are ranks below the concise."""
MARK = "<!-- chatmem snapshot"


@dataclass(frozen=True, slots=True)
class SnapshotSection:
    title: str
    text: str
    limit: int

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass(frozen=True, slots=True)
class Snapshot:
    sections: tuple[SnapshotSection, ...]
    built_at: datetime
    budget: int
    from_config: tuple[str, ...] = ()
    """Fixed sections whose text is the config's, fingerprinted in the file's mark."""
    source: str = ""
    """The long-term file's stamp it was built from, kept in the mark: a prompt rebuilds
    the snapshot when the file's stamp is another."""

    @property
    def tokens(self) -> int:
        return sum(section.tokens for section in self.sections)

    def section(self, title: str) -> SnapshotSection:
        return next(s for s in self.sections if s.title == title)

    def render(self) -> str:
        prints = " ".join(
            f"{title}={fingerprint(self.section(title).text)}" for title in self.from_config
        )
        head = [
            "# Snapshot",
            f"{MARK} built {format_when(self.built_at)}; Identity, Owner and Constraints are "
            f"yours to edit: a rebuild keeps them; source {self.source or '-'}; "
            f"from config: {prints or '-'} -->",
        ]
        body = [f"## {s.title}\n\n{s.text}".rstrip() for s in self.sections]
        return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def rank_shares(count: int) -> list[float]:
    """Each rank's share of a section's budget: 40 / 25 / 15 % for the first three, 20 %
    split evenly over the rest. With fewer than four items the shares are scaled up to
    use the whole budget, keeping their proportions."""
    if count <= 0:
        return []
    shares = list(RANK_SHARES[:count])
    if count > len(RANK_SHARES):
        rest = count - len(RANK_SHARES)
        shares.extend([REST_SHARE / rest] * rest)
    total = sum(shares)
    return [share / total for share in shares]


def cut_to_tokens(text: str, tokens: int) -> str:
    """`text` on one line, cut (with …) to at most `tokens` by `estimate_tokens`."""
    line = " ".join(text.split())
    if estimate_tokens(line) <= tokens:
        return line
    if tokens <= 1:
        return ""
    low, high = 0, len(line)
    while low < high:  # the longest prefix that fits with its ellipsis
        middle = (low + high + 1) // 2
        if estimate_tokens(line[:middle] + "…") <= tokens:
            low = middle
        else:
            high = middle - 1
    return line[:low].rstrip() + "…" if low else ""


def _clamp(value: int, bounds: tuple[int, int]) -> int:
    return max(bounds[0], min(bounds[1], value))


def _fit_lines(lines: Sequence[str], limit: int, *, cut_last: bool = True) -> str:
    """Lines in order within `limit` tokens; the first that does not fit is cut to what
    room is left (a long hand-written paragraph keeps its beginning; not a pointer, which
    cut points nowhere), then no more."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > limit:
            cut = cut_to_tokens(line, limit - used - 1) if cut_last else ""
            if len(cut) > 1:
                kept.append(cut)
            break
        kept.append(line)
        used += cost
    return "\n".join(kept)


def summaries_section(summaries: Sequence[str], limit: int) -> str:
    shares = rank_shares(len(summaries))
    lines = []
    for text, share in zip(summaries, shares, strict=True):
        line = cut_to_tokens(text, int(limit * share) - 2)
        if line:
            lines.append(f"- {line}")
    return _fit_lines(lines, limit)


def index_line(entry: MemoryEntry, rank: int, tokens: int, where: str = "") -> str:
    """One entry of the index at `rank` within `tokens`: high ranks with their date too,
    middle ranks cut to their share, low ranks (or no room) as a pointer alone: where
    memory_get reads the entry (`path:line`)."""
    pointer = f"[{entry.id}] {entry.category} {entry.score:.2f}"
    if rank <= RICH_RANKS:
        pointer += f" {entry.last_activated.date()}"
    if rank > CONCISE_RANKS:
        return f"- {pointer} {where}".rstrip()
    content = cut_to_tokens(shown(entry), tokens - estimate_tokens(pointer) - 2)
    return f"- {pointer}: {content}" if content else f"- {pointer}"


def index_section(
    entries: Sequence[MemoryEntry], limit: int, where: Mapping[str, str] | None = None
) -> str:
    """The shares by rank go to the ranks shown with text (the rest's 20 % to the
    concise middle), out of the section less the room kept for the pointers below."""
    shares = rank_shares(min(len(entries), CONCISE_RANKS))
    text_room = limit * (1 - POINTER_ROOM if len(entries) > CONCISE_RANKS else 1)
    lines = []
    for rank, entry in enumerate(entries, start=1):
        share = int(text_room * shares[rank - 1]) if rank <= len(shares) else 0
        lines.append(index_line(entry, rank, share, (where or {}).get(entry.id, "")))
    return _fit_lines(lines, limit, cut_last=False)


def build_snapshot(
    ranked: Sequence[MemoryEntry],
    summaries: Sequence[str],
    recent: Sequence[str],
    fixed: Mapping[str, str],
    built_at: datetime,
    budget: int = DEFAULT_BUDGET,
    *,
    where: Mapping[str, str] | None = None,
    from_config: Mapping[str, str] | None = None,
    source: str = "",
) -> Snapshot:
    """The snapshot of one scope.

    `ranked`: Active entries best first (current scores); `summaries`: summary texts best
    first; `recent`: the newest event lines, oldest first; `fixed`: the fixed sections'
    texts by title, kept whole (a person's words are not cut; over its limit a section
    shows so); `where`: entry id → `path:line` for the index's pointers; `from_config`:
    the config's texts, to mark which fixed sections came from it."""
    budget = _clamp(budget, BUDGET_RANGE)
    sections = [
        SnapshotSection(title, fixed.get(title, "").strip(), limit)
        for title, limit in FIXED_LIMITS.items()
    ]
    configured = from_config or {}
    taken = tuple(
        s.title for s in sections if s.text and s.text == configured.get(s.title, "").strip()
    )
    recent_text = _fit_lines(list(reversed(recent)), RECENT_LIMIT)
    left = budget - sum(s.tokens for s in sections) - estimate_tokens(recent_text)
    summaries_limit = _clamp(left // 2, SUMMARIES_RANGE)
    index_limit = _clamp(left - summaries_limit, INDEX_RANGE)
    sections.append(
        SnapshotSection(
            TOP_SUMMARIES, summaries_section(summaries, summaries_limit), summaries_limit
        )
    )
    index = index_section(ranked, index_limit, where)
    sections.append(SnapshotSection(RANKED_INDEX, index, index_limit))
    sections.append(SnapshotSection(RECENT, recent_text, RECENT_LIMIT))
    return Snapshot(tuple(sections), built_at, budget, taken, source)


_SECTION = re.compile(r"^## (?P<title>.+?)\s*$", re.MULTILINE)


def fixed_sections(text: str) -> dict[str, str]:
    """The fixed sections of a snapshot file as it stands (a person's edits included)."""
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(text))
    ends = [following.start() for following in matches[1:]] + [len(text)] if matches else []
    for match, end in zip(matches, ends, strict=True):
        title = match.group("title")
        if title in FIXED_SECTIONS:
            found[title] = text[match.end() : end].strip()
    return found


def fingerprint(text: str) -> str:
    return hashlib.blake2b(text.strip().encode("utf-8"), digest_size=4).hexdigest()


_PRINTS = re.compile(r"from config: (?P<prints>[^>]*?) -->")
_SOURCE = re.compile(r"; source (?P<source>\S+); ")


def source_of(text: str) -> str:
    """The long-term stamp a snapshot file was built from ('' when it has none)."""
    match = _SOURCE.search(text)
    return match.group("source") if match else ""


def kept_sections(text: str, from_config: Mapping[str, str]) -> dict[str, str]:
    """The fixed sections a rebuild writes: a section as the file holds it when a person
    wrote or edited it (no config fingerprint, or one its text no longer matches), else
    the config's text (so a changed setting shows at the next build)."""
    in_file = fixed_sections(text)
    prints: dict[str, str] = {}
    if match := _PRINTS.search(text):
        for pair in match.group("prints").split():
            title, _, value = pair.partition("=")
            prints[title] = value
    kept = {}
    for title in FIXED_SECTIONS:
        written = in_file.get(title, "")
        edited = written and prints.get(title) != fingerprint(written)
        kept[title] = written if edited else from_config.get(title, "")
    return kept
