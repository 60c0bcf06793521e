"""The rankings: a filter bar, what instant they are computed at, and the ranked table."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Select, Static

from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.base.wording import counted
from tui.model import COLUMN_BY_KEY, ColumnKey, RankingView, RowFilter
from tui.widgets.ranktable import RankTable

ALL_CATEGORIES = "*"


def _delta(now: int, then: int) -> str:
    return "" if now == then else f" ({now - then:+d})"


def status_line(view: RankingView) -> Text:
    text = Text(counted(view.matching, "entry", grouped=True))
    if view.filter.active:
        text.append(f" matching (of {view.total:,})")
    arrow = "▼" if view.sort.descending else "▲"
    text.append(f" · sorted by {COLUMN_BY_KEY[view.sort.key].title} {arrow}")
    if not view.complete:
        expected = f" of {view.expected_total:,}" if view.expected_total else ""
        text.append(f" · loading all entries{expected}…", style="bold yellow")
    return text


def counts_line(view: RankingView) -> Text:
    """Active and archived entries at the view's instant, as the sidebar counts them:
    "archived" is every entry that is not active (still in the file), and those below
    the forget line are a part of it ("to forget"), never "forgotten" (deleted)."""
    counts, base = view.counts, view.baseline
    label = "now" if view.offset_days == 0 else f"at +{view.offset_days} d"
    archived, archived_then = counts.archived + counts.forgotten, base.archived + base.forgotten
    text = Text(f"{label}: ", style="bold")
    text.append(f"{counts.active} active{_delta(counts.active, base.active)}", style="green")
    text.append(" · ")
    text.append(f"{archived} archived{_delta(archived, archived_then)}", style="yellow")
    if counts.forgotten or base.forgotten:
        text.append(
            f", {counts.forgotten} to forget{_delta(counts.forgotten, base.forgotten)}",
            style="red",
        )
    return text


LOADING = Text("loading memories…", style="bold yellow")


def loading_text(scope: str) -> Text:
    return Text(f"loading the memories of scope {scope}…", style="bold yellow")


def what_if_label(view: RankingView, zone_name: str) -> Text:
    if view.offset_days == 0:
        return Text(f"now {view.when.strftime('%Y-%m-%d %H:%M')} {zone_name}", style="bold")
    return Text(
        f"WHAT-IF +{view.offset_days} d: {view.when.strftime('%Y-%m-%d')} · read-only (0: now)",
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

    def compose(self) -> ComposeResult:
        with Horizontal(id="rank-toolbar"):
            yield Input(placeholder="filter text or id  (/)", id="rank-filter")
            yield Select[str]([], prompt="category: all", allow_blank=True, id="rank-category")
        # A line of its own, shown in what-if views: beside the filter box it was cut at
        # 120 columns.
        yield Static(id="rank-when")
        yield Static(id="rank-counts")
        yield Static(LOADING, id="rank-status")
        yield RankTable(self.policy, id="rankings")

    def waiting_for(self, scope: str) -> None:
        """Until the first rankings of `scope` arrive: say so, instead of an empty table
        that looks like an empty scope."""
        self.query_one("#rank-counts", Static).update("")
        self.query_one("#rank-status", Static).update(loading_text(scope))

    @property
    def table(self) -> RankTable:
        return self.query_one(RankTable)

    def current_filter(self) -> RowFilter:
        text = self.query_one("#rank-filter", Input).value
        chosen = self.query_one("#rank-category", Select).value
        category = chosen if isinstance(chosen, str) and chosen != ALL_CATEGORIES else None
        return RowFilter(text=text, category=category)

    def show(self, view: RankingView, zone_name: str, keep_id: str | None) -> None:
        self.table.show(view.model, view.indices, view.sort, keep_id)
        when = self.query_one("#rank-when", Static)
        when.update(what_if_label(view, zone_name))
        # Now is in the header already: the line is there only for a what-if instant.
        when.display = view.offset_days != 0
        self.query_one("#rank-counts", Static).update(counts_line(view))
        self.query_one("#rank-status", Static).update(status_line(view))
        self._update_categories(view.categories)

    def highlighted_id(self) -> str | None:
        return self.table.entry_id_at(self.table.cursor_row)

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

    @on(Input.Submitted, "#rank-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        """Enter: the filter is typed, back to the table (Escape does the same)."""
        event.stop()
        self.table.focus()

    @on(RankTable.HeaderClicked)
    def _header(self, event: RankTable.HeaderClicked) -> None:
        event.stop()
        self.post_message(self.SortRequested(event.key))

    @on(RankTable.Highlighted)
    def _highlighted(self, event: RankTable.Highlighted) -> None:
        event.stop()
        self.post_message(self.EntryHighlighted(event.entry_id))

    @on(RankTable.Selected)
    def _selected(self, event: RankTable.Selected) -> None:
        event.stop()
        self.post_message(self.EntryChosen(event.entry_id))
