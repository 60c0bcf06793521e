"""A live feed of the audit log: newest first, by whom (source) and what changed."""

from __future__ import annotations

from datetime import tzinfo

from rich.text import Text
from textual.widgets import DataTable

from memory_core.base.records import AuditRecord
from tui.format import one_line, time_text

FEED_LIMIT = 300
ACTION_STYLE = {
    "add": "green",
    "reinforce": "cyan",
    "archive": "yellow",
    "forget": "red",
    "restore": "green",
    "pin": "bold cyan",
    "unpin": "cyan",
    "edit": "magenta",
    "contradict": "red",
}
SOURCE_NOTE = {"extract": "extract (/new)"}


def activity_cells(record: AuditRecord, zone: tzinfo) -> list[str | Text]:
    old = "" if record.old_score is None else f"{record.old_score:.2f}"
    new = "gone" if record.new_score is None else f"{record.new_score:.2f}"
    change = f"{old} → {new}" if old else new
    return [
        time_text(record.at, zone),
        Text(record.action, style=ACTION_STYLE.get(record.action, "")),
        record.entry_id,
        change,
        SOURCE_NOTE.get(record.source, record.source),
        one_line(record.content or "", 60),
    ]


def merged_feed(newer: list[AuditRecord], shown: list[AuditRecord]) -> list[AuditRecord]:
    """The feed after a load: the records just read and those already shown, each once
    (a poll reads only what came after the newest shown), newest first, at most
    `FEED_LIMIT`."""
    seen = {r.id for r in newer}
    merged = newer + [r for r in shown if r.id not in seen]
    return sorted(merged, key=lambda r: -r.id)[:FEED_LIMIT]


def recent_text(records: list[AuditRecord], zone: tzinfo, limit: int = 10, width: int = 52) -> Text:
    """The sidebar's few newest events, one line each."""
    text = Text()
    for record in records[:limit]:
        text.append(record.at.astimezone(zone).strftime("%m-%d %H:%M "), style="dim")
        text.append(f"{record.action:<9}", style=ACTION_STYLE.get(record.action, ""))
        text.append(f" {one_line(record.content or record.entry_id, width - 22)}\n")
    if not records:
        text.append("no changes yet", style="dim")
    return text


class ActivityFeed(DataTable[str | Text]):
    def __init__(self, zone: tzinfo, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.zone = zone
        self.records: list[AuditRecord] = []

    def on_mount(self) -> None:
        self.add_columns("at", "action", "id", "score", "source", "content")

    def show(self, records: list[AuditRecord]) -> None:
        """Replace the feed (records newest first)."""
        self.records = records[:FEED_LIMIT]
        self.clear()
        for record in self.records:
            self.add_row(*activity_cells(record, self.zone), key=str(record.id))
