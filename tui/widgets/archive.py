"""Archive state: archived and forgotten entries, session history by archive state,
failed archive attempts, backlog events, the last run and which periods have summaries."""

from __future__ import annotations

import json
from datetime import tzinfo

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from memory_core.base.wording import counted
from tui.format import one_line, time_text
from tui.overview import ARCHIVED_LIMIT, ScopeArchive


def summary_text(state: ScopeArchive, zone: tzinfo, *, compact: bool = False) -> Text:
    """The few lines of the sidebar (compact) or the head of the archive pane."""
    m = state.messages
    text = Text()
    text.append("messages ", style="bold")
    text.append(f"{m['false']} unarchived", style="yellow" if m["false"] else "")
    text.append(f" · {m['pending']} pending", style="yellow" if m["pending"] else "")
    text.append(f" · {m['true']} archived\n")
    failing = sum(f.messages for f in state.failures)
    if state.failures:
        retry = min((f.next_at for f in state.failures if f.next_at), default=None)
        attempts = max(f.attempts for f in state.failures)
        text.append(
            f"failing {failing} msg, {attempts} attempts, retry {time_text(retry, zone)}\n",
            style="bold red",
        )
    if state.backlog:
        text.append(
            f"archive_backlog since {time_text(state.backlog[-1].at, zone)}\n", style="bold red"
        )
    run = state.last_run
    text.append("last run ", style="bold")
    if run is None:
        text.append("never\n")
    else:
        started = run.started_at.astimezone(zone).strftime("%m-%d %H:%M")
        text.append(
            f"{started if compact else time_text(run.started_at, zone)}: {run.moved} moved, "
            f"{run.summarized} summarised, {run.failed} failed\n"
        )
    text.append("summaries ", style="bold")
    text.append(
        f"{counted(len(state.summary_days), 'day')}, {counted(len(state.summary_months), 'month')}"
    )
    if not compact:
        text.append(f" · {counted(len(state.raw_files), 'raw archive file')}")
    text.append("\n")
    text.append("memories ", style="bold")
    text.append(f"{state.archived_total} archived")
    if state.to_forget:
        text.append(f" ({state.to_forget} to forget)", style="red")
    more = "+" if len(state.forgotten) >= ARCHIVED_LIMIT else ""
    text.append(f" · {len(state.forgotten)}{more} forgotten")
    if state.quarantined:
        count = len(state.quarantined)
        text.append(
            f"\nquarantined {count} block{'s' if count > 1 else ''} (Archive tab)",
            style="bold red",
        )
    if not state.database:
        text.append("\n(no database: history and audit unavailable)", style="red")
    return text


class ArchiveSummary(Static):
    """The sidebar box: archive state of the chosen scope at a glance."""

    def show(self, state: ScopeArchive, zone: tzinfo) -> None:
        self.update(summary_text(state, zone, compact=True))


def _table(table_id: str, *columns: str) -> DataTable[str | Text]:
    table: DataTable[str | Text] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
    table.add_columns(*columns)
    return table


class ArchivePane(VerticalScroll):
    def __init__(self, zone: tzinfo, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.zone = zone

    def compose(self) -> ComposeResult:
        yield Static(id="archive-head")
        yield Static(id="archive-quarantine")
        yield Static("Sessions by archive state (false / pending / true)", classes="section")
        yield _table(
            "archive-sessions", "session", "first message", "status", "false", "pending", "true"
        )
        yield Static("Failed archive attempts", classes="section")
        yield _table("archive-failures", "session", "msgs", "attempts", "failed at", "next retry")
        yield Static(id="archive-backlog")
        yield Static(id="archive-summaries")
        yield Static("Archived memories", classes="section")
        yield _table(
            "archive-entries", "id", "category", "score", "why", "last activated", "content"
        )
        yield Static("Forgotten memories (audit log)", classes="section")
        yield _table("archive-forgotten", "at", "id", "category", "last score", "source", "content")

    def show(self, state: ScopeArchive) -> None:
        zone = self.zone
        self.query_one("#archive-head", Static).update(summary_text(state, zone))
        self.query_one("#archive-quarantine", Static).update(quarantine_text(state))
        sessions = self.query_one("#archive-sessions", DataTable)
        sessions.clear()
        for s in state.sessions:
            sessions.add_row(
                s.session_id,
                time_text(s.first_at, zone),
                s.status,
                Text(str(s.unarchived), style="yellow" if s.unarchived else ""),
                Text(str(s.pending), style="yellow" if s.pending else ""),
                str(s.archived),
                key=s.session_id,
            )
        failures = self.query_one("#archive-failures", DataTable)
        failures.clear()
        for f in state.failures:
            failures.add_row(
                f.session_id,
                str(f.messages),
                Text(str(f.attempts), style="bold red"),
                time_text(f.failed_at, zone),
                time_text(f.next_at, zone),
                key=f.session_id,
            )
        backlog = Text("archive_backlog events: ", style="bold")
        if not state.backlog:
            backlog.append("none")
        for event in state.backlog:
            backlog.append(
                f"\n  {time_text(event.at, zone)}  {event_detail(event.detail)}", style="red"
            )
        self.query_one("#archive-backlog", Static).update(backlog)
        summaries = Text("Summaries  ", style="bold")
        summaries.append("days: " + (", ".join(state.summary_days) or "none"))
        summaries.append("  months: " + (", ".join(state.summary_months) or "none"))
        summaries.append("\nRaw archives  " + (", ".join(state.raw_files) or "none"))
        self.query_one("#archive-summaries", Static).update(summaries)
        entries = self.query_one("#archive-entries", DataTable)
        entries.clear()
        for item in state.archived:
            entries.add_row(
                item.entry.id,
                item.entry.category,
                f"{item.score:.2f}",
                item.reason,
                time_text(item.entry.last_activated, zone),
                one_line(item.entry.content, 60),
                key=item.entry.id,
            )
        forgotten = self.query_one("#archive-forgotten", DataTable)
        forgotten.clear()
        for record in state.forgotten:
            forgotten.add_row(
                time_text(record.at, zone),
                record.entry_id,
                record.category or "",
                "—" if record.old_score is None else f"{record.old_score:.2f}",
                record.source,
                one_line(record.content or "", 60),
                key=str(record.id),
            )


def quarantine_text(state: ScopeArchive) -> Text:
    """Every block the parser could not read, verbatim: the file keeps it, and this is
    where a person sees what to fix (then `chatmem validate`)."""
    text = Text("Quarantined blocks  ", style="bold")
    if not state.quarantined:
        text.append("none", style="dim")
        return text
    text.append(
        f"{len(state.quarantined)} in {state.path}, kept verbatim: fix them in the file, "
        "then run chatmem validate",
        style="bold red",
    )
    for block in state.quarantined:
        text.append(f"\nline {block.line}: {block.reason}\n", style="red")
        text.append(block.text + "\n")
    return text


def event_detail(detail: dict[str, object]) -> str:
    return json.dumps(detail, ensure_ascii=False, sort_keys=True)
