"""Small pure formatters from values to Rich `Text` (bars, days, dates, highlights)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo

from rich.cells import cell_len
from rich.text import Text

from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm.scoring import Status

BAR_WIDTH = 8
STATUS_STYLE = {
    Status.ACTIVE: "green",
    Status.ARCHIVED: "yellow",
    Status.FORGOTTEN: "red",
}
STATUS_LABEL = {
    Status.ACTIVE: "active",
    Status.ARCHIVED: "archived",
    Status.FORGOTTEN: "to forget",
}
"""An entry below the forget line is still in the file: the next consolidation deletes it.
"Forgotten" on screen only ever means deleted (the audit log keeps the text)."""
HIGHLIGHT = "bold reverse"


def score_style(score: float, policy: ScoringPolicy = DEFAULT_POLICY) -> str:
    if score < policy.forget_below:
        return "red"
    if score < policy.archive_below:
        return "yellow"
    return "green"


def score_bar(score: float, policy: ScoringPolicy = DEFAULT_POLICY, width: int = BAR_WIDTH) -> Text:
    """`0.62 ██████░░░░`, coloured by the line the score sits above."""
    filled = max(0, min(width, round(score * width)))
    text = Text(f"{score:.2f} ", style="bold")
    text.append("█" * filled, style=score_style(score, policy))
    text.append("░" * (width - filled), style="dim")
    return text


def score_cell(score: float, policy: ScoringPolicy = DEFAULT_POLICY) -> Text:
    return Text(f"{score:.2f}", style=score_style(score, policy), justify="right")


PASSED = "—"
"""Shown instead of a countdown to a line the entry is already past (an archived entry's
days to archive)."""


def days_cell(days: int | None, *, passed: bool = False) -> Text:
    """Days until a line is crossed: `now` (already below), `never` (pinned), `12d`, or
    `—` when the entry is already past it (archived: nothing left to count down)."""
    if passed:
        return Text(PASSED, style="dim", justify="right")
    if days is None:
        return Text("never", style="dim", justify="right")
    if days == 0:
        return Text("now", style="bold red", justify="right")
    return Text(f"{days}d", justify="right")


PINNED_LABEL = "pinned"
PINNED_STYLE = "bold cyan"


def status_cell(status: Status, *, pinned: bool = False) -> Text:
    """The status as a word; an active pinned entry says `pinned`, since it is the one
    thing about it that matters (it never decays, archives or is forgotten)."""
    if pinned and status is Status.ACTIVE:
        return Text(PINNED_LABEL, style=PINNED_STYLE)
    return Text(STATUS_LABEL[status], style=STATUS_STYLE[status])


def time_text(when: datetime | None, zone: tzinfo) -> str:
    return "—" if when is None else when.astimezone(zone).strftime("%Y-%m-%d %H:%M")


def one_line(text: str, width: int) -> str:
    """Whitespace folded, cut to `width` terminal cells (a CJK character takes two).

    Only the first `width * 4 + 64` characters are looked at: a row of a 3 MB entry
    took half a second to fold and measure whole, and a table shows many rows."""
    bound = width * 4 + 64
    flat = " ".join(text[:bound].split())
    more = len(text) > bound and not text[bound:].isspace()
    if not more and cell_len(flat) <= width:
        return flat
    cut = Text(flat + "…" if more else flat)
    cut.truncate(width, overflow="ellipsis")
    return cut.plain


DETAIL_CHARS = 20_000
"""The detail pane shows this much of an entry's content, and how much more there is:
wrapping a 3 MB entry froze the interface for seconds."""


def shown_content(content: str, limit: int = DETAIL_CHARS) -> str:
    """`content`, or its first `limit` characters and a line saying how many follow."""
    if len(content) <= limit:
        return content
    return f"{content[:limit]}…\n[{len(content) - limit} more characters in MEMORY.md]"


def highlight(text: str, spans: Sequence[tuple[int, int]], style: str = HIGHLIGHT) -> Text:
    """`text` with each `(start, end)` span styled (spans from `text.matched_terms`)."""
    out = Text(text)
    for start, end in spans:
        out.stylize(style, start, end)
    return out


def token_meter(tokens: int, budget: int, width: int = 30) -> Text:
    filled = 0 if budget <= 0 else max(0, min(width, round(width * tokens / budget)))
    style = "green" if tokens <= budget else "red"
    text = Text(f"{tokens} / {budget} tokens ", style="bold")
    text.append("█" * filled, style=style)
    text.append("░" * (width - filled), style="dim")
    return text


def short_scope(name: str, width: int = 24) -> str:
    """Long scope keys keep their last part (the peer or chat id): `group:tele…:-1009988776655`."""
    if len(name) <= width:
        return name
    head, _, tail = name.rpartition(":")
    if head and len(tail) + 3 <= width:
        return name[: width - len(tail) - 2] + "…:" + tail
    return name[: width - 1] + "…"
