"""Archive runs: old session history into files, by age (the reference rules).

  ≤ 5 days old           → copied verbatim to `memory/YYYY-MM-DD-{slug}.md`
  older, up to last month → one summary per day, `memory/summary/YYYY-MM-DD.md`
  before last month      → one summary per month, `memory/summary/YYYY-MM.md`

Messages go `false → pending` before any work (so trimming cannot drop them mid-run), then
`pending → true` when their file is written, or back to `false` with a backoff
(10m → 30m → 2h → 6h → 12h) when a summary fails; after 5 failures an `archive_backlog`
event is recorded and the wait doubles.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo

from memory_core.base.retry import Steps
from memory_core.base.wording import counted
from memory_core.notes.event_log import Event, EventKind
from memory_core.storage.sessions import StoredMessage

SLUG_MAX = 32
_LATIN = re.compile(r"[a-z][a-z0-9]{2,}")
_SLUG_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "you",
        "are",
        "with",
        "this",
        "that",
        "have",
        "was",
        "but",
        "not",
        "what",
        "can",
        "will",
        "just",
        "about",
        "from",
        "your",
        "they",
        "there",
        "their",
        "then",
        "than",
        "when",
        "where",
        "which",
        "would",
        "could",
        "should",
        "been",
        "into",
        "also",
    ]
)


@dataclass(slots=True)
class ArchivePlan:
    raw: dict[date, list[StoredMessage]] = field(default_factory=dict)
    daily: dict[date, list[StoredMessage]] = field(default_factory=dict)
    monthly: dict[str, list[StoredMessage]] = field(default_factory=dict)
    """Keyed by 'YYYY-MM'."""


def month_key(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def previous_month(day: date) -> tuple[int, int]:
    return (day.year, day.month - 1) if day.month > 1 else (day.year - 1, 12)


def plan_archive(
    messages: Sequence[StoredMessage], now: datetime, zone: tzinfo, raw_days: int = 5
) -> ArchivePlan:
    """Bucket messages by local day and age. Pure.

    Example from the reference design: on 31 January, December goes to daily summaries and
    November and before to monthly ones; on 1 February, December goes monthly too.
    """
    plan = ArchivePlan()
    today = now.astimezone(zone).date()
    cutoff = previous_month(today)
    for message in messages:
        day = message.created_at.astimezone(zone).date()
        if (today - day).days <= raw_days:
            plan.raw.setdefault(day, []).append(message)
        elif (day.year, day.month) >= cutoff:
            plan.daily.setdefault(day, []).append(message)
        else:
            plan.monthly.setdefault(month_key(day), []).append(message)
    return plan


def make_slug(texts: Sequence[str], short_id: str, taken: set[str]) -> str:
    """ASCII `a-z0-9-`, ≤ 32 characters, from content keywords, else `mem-{shortId}`;
    a name already taken gets `-2`, `-3`, …"""
    words: Counter[str] = Counter()
    for text in texts:
        words.update(w for w in _LATIN.findall(text.lower()) if w not in _SLUG_STOP)
    parts: list[str] = []
    for word, _ in words.most_common(6):
        candidate = "-".join([*parts, word])
        if len(candidate) > SLUG_MAX:
            continue
        parts.append(word)
        if len(parts) == 3:
            break
    base = "-".join(parts) or f"mem-{short_id[:8].lower()}"
    base = re.sub(r"[^a-z0-9-]", "", base)[:SLUG_MAX].strip("-") or f"mem-{short_id[:8]}"
    slug, n = base, 2
    while slug in taken:
        suffix = f"-{n}"
        slug = base[: SLUG_MAX - len(suffix)] + suffix
        n += 1
    return slug


def backoff_delay(attempts: int, schedule_minutes: Sequence[int], max_attempts: int) -> timedelta:
    """Wait after the `attempts`-th failure; past `max_attempts` the last wait doubles
    (10m, 30m, 2h, 6h, 12h for failures 1-5, then 24h): the setting read as a
    `retry.Steps` schedule. The wait is stored as the archive's next try (a time on the
    injected wall clock), not slept."""
    schedule = Steps(tuple(float(m) for m in schedule_minutes), double_after=max_attempts)
    return timedelta(minutes=schedule.wait(attempts))


def render_raw(day: date, messages: Sequence[StoredMessage], zone: tzinfo) -> str:
    lines = [f"# {day.isoformat()} conversation", ""]
    for m in messages:
        when = m.created_at.astimezone(zone).strftime("%H:%M:%S")
        who = m.speaker or m.role
        text = " ".join(m.content.split())
        lines.extend([f"{when} {who}: {text}", ""])
    return "\n".join(lines).rstrip() + "\n"


def transcript(messages: Sequence[StoredMessage], zone: tzinfo, max_chars: int = 24000) -> str:
    """What a summariser sees: time, speaker, text; the newest part wins over the budget."""
    lines = [
        f"{m.created_at.astimezone(zone).strftime('%m-%d %H:%M')} {m.speaker or m.role}: "
        f"{' '.join(m.content.split())}"
        for m in messages
    ]
    out: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) > max_chars:
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(reversed(out))


DAILY_PROMPT = """把下面这一天的对话总结成要点，保留事实、决定、偏好、待办、数字和日期，去掉寒暄。
Summarise this day of conversation as bullet points; keep facts, decisions, preferences,
todos, numbers and dates; drop small talk. Use the conversation's language.

日期 / date: {period}

{transcript}"""

MONTHLY_PROMPT = """把下面这个月的对话总结成要点（按主题分组），保留重要的事实、决定、偏好和结果。
Summarise this month of conversation as bullet points grouped by topic; keep important
facts, decisions, preferences and outcomes. Use the conversation's language.

月份 / month: {period}

{transcript}"""


def extractive_summary(messages: Sequence[StoredMessage], limit: int = 40) -> str:
    """The offline stand-in for a model summary: the user's own lines, shortened."""
    picked = [m for m in messages if m.role == "user" and m.content.strip()][:limit]
    lines = [f"- {' '.join(m.content.split())[:200]}" for m in picked]
    return "\n".join(lines) or "- (no user messages)"


def render_summary(
    period: str, body: str, *, kind: str, generated_at: datetime, by_model: bool
) -> str:
    source = "model summary" if by_model else "extractive summary (no model configured)"
    return f"## {kind} {period} — {source}, {generated_at.date().isoformat()}\n\n{body.strip()}\n"


def day_activity(events: Sequence[Event]) -> str:
    """What the day's event log (Layer 3) adds to its summary: the tools the model used,
    the long-term changes made and the model's failures, counted. The transcript has
    the words; only the log has these, and they are facts, not the summariser's reading.
    Empty for a day without any."""
    tools: Counter[str] = Counter()
    changes: Counter[str] = Counter()
    errors = 0
    for event in events:
        if event.kind is EventKind.ACTION:
            tools[str(event.data.get("tool") or "?")] += 1
        elif event.kind is EventKind.DECISION:
            changes[str(event.data.get("change") or "?")] += 1
        elif event.kind is EventKind.ERROR:
            errors += 1
    parts = []
    if tools:
        named = ", ".join(f"{tool} {count}" for tool, count in sorted(tools.items()))
        parts.append(f"{counted(sum(tools.values()), 'tool call')} ({named})")
    if changes:
        parts.append("long-term " + ", ".join(f"{k} {v}" for k, v in sorted(changes.items())))
    if errors:
        parts.append(f"{errors} model failures")
    return f"Event log: {'; '.join(parts)}." if parts else ""
