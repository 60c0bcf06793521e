"""The rankings table with its filter bar and the line that says what is shown."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Select, Static

from memory_core.scoring import DEFAULT_POLICY, ScoringPolicy
from tui.format import days_cell, one_line, score_bar, score_cell, status_cell
from tui.model import COLUMNS, ColumnKey, RankingView, RankRow, RowFilter, SortSpec

ALL_CATEGORIES = "*"


def row_cells(row: RankRow, policy: ScoringPolicy) -> list[str | Text]:
    entry = row.entry
    return [
        Text(str(row.rank), justify="right"),
        entry.id,
        entry.category,
        score_bar(row.score, policy),
        score_cell(row.score_7, policy),
        score_cell(row.score_30, policy),
        days_cell(row.to_archive),
        days_cell(row.to_forget),
        Text(str(entry.hits), justify="right"),
        entry.last_activated.strftime("%Y-%m-%d"),
        Text("pin", style="bold cyan") if entry.pinned else "",
        status_cell(row.status),
        one_line(entry.content, 48),
    ]


def _delta(now: int, then: int) -> str:
    return "" if now == then else f" ({now - then:+d})"


def status_line(view: RankingView) -> Text:
    shown = f"{view.offset + 1}–{view.offset + len(view.rows)}" if view.rows else "0"
    text = Text(f"rows {shown} of {view.matching:,}")
    if view.filter.active:
        text.append(f" matching (of {view.total:,})")
    arrow = "▼" if view.sort.descending else "▲"
    title = next(c.title for c in COLUMNS if c.key == view.sort.key)
    text.append(f" · sorted by {title} {arrow}")
    if view.matching > view.offset + len(view.rows) or view.offset:
        text.append(" · [ ] page", style="dim")
    if not view.complete:
        expected = f" of {view.expected_total:,}" if view.expected_total else ""
        text.append(f" · loading all entries{expected}…", style="bold yellow")
    return text


def counts_line(view: RankingView) -> Text:
    counts, base = view.counts, view.baseline
    label = "now" if view.offset_days == 0 else f"at +{view.offset_days} d"
    text = Text(f"{label}: ", style="bold")
    text.append(f"{counts.active} active{_delta(counts.active, base.active)}", style="green")
    text.append(" · ")
    text.append(
        f"{counts.archived} archived{_delta(counts.archived, base.archived)}", style="yellow"
    )
    text.append(" · ")
    text.append(
        f"{counts.forgotten} to forget{_delta(counts.forgotten, base.forgotten)}", style="red"
    )
    return text


def what_if_label(view: RankingView, zone_name: str) -> Text:
    if view.offset_days == 0:
        return Text(f"now {view.when.strftime('%Y-%m-%d %H:%M')} {zone_name}", style="bold")
    return Text(
        f"WHAT-IF now +{view.offset_days} d = {view.when.strftime('%Y-%m-%d')} (nothing written)",
        style="bold black on yellow",
    )


class RankingsPane(Vertical):
    """Posts `SortRequested`, `FilterChanged`, `EntryHighlighted` and `EntryChosen`."""

    @dataclass
    class SortRequested(Message):
        key: ColumnKey

    @dataclass
    class FilterChanged(Message):
        filter: RowFilter

    @dataclass
    class EntryHighlighted(Message):
        entry_id: str

    @dataclass
    class EntryChosen(Message):
        entry_id: str

    def __init__(self, policy: ScoringPolicy = DEFAULT_POLICY, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.policy = policy
        self._categories: list[str] = []
        self._sort: SortSpec | None = None
        self.row_ids: list[str] = []

    def compose(self) -> ComposeResult:
        with Horizontal(id="rank-toolbar"):
            yield Input(placeholder="filter text or id  (/)", id="rank-filter")
            yield Select[str]([], prompt="all categories", allow_blank=True, id="rank-category")
            yield Static(id="rank-when")
        yield Static(id="rank-counts")
        yield Static(id="rank-status")
        yield DataTable[str | Text](id="rankings", cursor_type="row", zebra_stripes=True)

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#rankings", DataTable)

    def current_filter(self) -> RowFilter:
        text = self.query_one("#rank-filter", Input).value
        chosen = self.query_one("#rank-category", Select).value
        category = chosen if isinstance(chosen, str) and chosen != ALL_CATEGORIES else None
        return RowFilter(text=text, category=category)

    def show(self, view: RankingView, zone_name: str, keep_id: str | None) -> None:
        table = self.table
        if self._sort != view.sort:
            self._sort = view.sort
            table.clear(columns=True)
            for column in COLUMNS:
                title = column.title
                if column.key == view.sort.key:
                    title += " ▼" if view.sort.descending else " ▲"
                table.add_column(title, key=column.key)
        else:
            table.clear()
        for row in view.rows:
            table.add_row(*row_cells(row, self.policy), key=row.entry.id)
        keys = [row.entry.id for row in view.rows]
        self.row_ids = keys
        if keep_id in keys:
            table.move_cursor(row=keys.index(keep_id), animate=False)
        self.query_one("#rank-when", Static).update(what_if_label(view, zone_name))
        self.query_one("#rank-counts", Static).update(counts_line(view))
        self.query_one("#rank-status", Static).update(status_line(view))
        self._update_categories(view.categories)

    def highlighted_id(self) -> str | None:
        row = self.table.cursor_row
        return self.row_ids[row] if 0 <= row < len(self.row_ids) else None

    def _update_categories(self, categories: list[str]) -> None:
        if categories == self._categories:
            return
        self._categories = categories
        select = self.query_one("#rank-category", Select)
        current = select.value
        with select.prevent(Select.Changed):
            select.set_options([(c, c) for c in categories])
            if isinstance(current, str) and current in categories:
                select.value = current

    # --- events -----------------------------------------------------------------------
    @on(Input.Changed, "#rank-filter")
    @on(Select.Changed, "#rank-category")
    def _filter_changed(self, event: Message) -> None:
        event.stop()
        self.post_message(self.FilterChanged(self.current_filter()))

    @on(DataTable.HeaderSelected, "#rankings")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.post_message(self.SortRequested(str(event.column_key.value)))  # type: ignore[arg-type]

    @on(DataTable.RowHighlighted, "#rankings")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        entry_id = self.highlighted_id()
        if entry_id is not None:
            self.post_message(self.EntryHighlighted(entry_id))

    @on(DataTable.RowSelected, "#rankings")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        entry_id = self.highlighted_id()
        if entry_id is not None:
            self.post_message(self.EntryChosen(entry_id))
