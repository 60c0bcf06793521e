"""A virtual table for the rankings: only the visible lines are ever rendered.

A DataTable measures and stores every cell it holds, so a scope of 100 000 entries would
have to be shown a page at a time. This widget holds only the sorted entry indices of a
`RankingModel` and renders each visible line on demand (Textual's line API), so scrolling,
re-sorting and filtering cost the same at 100 entries and at 100 000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memory_core.scoring import DEFAULT_POLICY, ScoringPolicy
from tui.format import days_cell, one_line, score_bar, score_cell, status_cell
from tui.model import COLUMNS, ColumnKey, RankingModel, RankRow, SortSpec

CONTENT_WIDTH = 60
WIDTHS: dict[ColumnKey, int] = {
    "rank": 6,
    "id": 8,
    "category": 11,
    "score": 13,
    "score_7": 5,
    "score_30": 5,
    "to_archive": 6,
    "to_forget": 7,
    "hits": 5,
    "last_activated": 10,
    "pinned": 3,
    "status": 9,
    "content": CONTENT_WIDTH,
}
RIGHT = frozenset({"rank", "score_7", "score_30", "to_archive", "to_forget", "hits"})
GAP = 1
ROW_CACHE = 512


def row_cells(row: RankRow, policy: ScoringPolicy) -> list[Text]:
    entry = row.entry
    return [
        Text(str(row.rank)),
        Text(entry.id),
        Text(entry.category),
        score_bar(row.score, policy),
        score_cell(row.score_7, policy),
        score_cell(row.score_30, policy),
        days_cell(row.to_archive),
        days_cell(row.to_forget),
        Text(str(entry.hits)),
        Text(entry.last_activated.strftime("%Y-%m-%d")),
        Text("pin", style="bold cyan") if entry.pinned else Text(""),
        status_cell(row.status),
        Text(one_line(entry.content, CONTENT_WIDTH)),
    ]


def _fit(cell: Text, width: int, right: bool) -> Text:
    fitted = cell.copy()
    fitted.truncate(width, overflow="ellipsis")
    pad = width - fitted.cell_len
    if pad > 0:
        if right:
            fitted.pad_left(pad)
        else:
            fitted.pad_right(pad)
    return fitted


class RankTable(ScrollView, can_focus=True):
    """Rows are the model's entries in `indices` order; the header line stays on top."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
        Binding("enter", "select", "Open entry", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "ranktable--header",
        "ranktable--cursor",
        "ranktable--odd",
    }

    cursor_row: reactive[int] = reactive(0, always_update=True)

    @dataclass
    class Highlighted(Message):
        entry_id: str

    @dataclass
    class Selected(Message):
        entry_id: str

    @dataclass
    class HeaderClicked(Message):
        key: ColumnKey

    def __init__(self, policy: ScoringPolicy = DEFAULT_POLICY, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.policy = policy
        self.model: RankingModel | None = None
        self.indices: Sequence[int] = ()
        self.sort = SortSpec()
        self._rows: dict[int, list[Text]] = {}
        self.line_width = sum(WIDTHS.values()) + GAP * (len(WIDTHS) - 1)

    # --- data -------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.indices)

    def show(
        self, model: RankingModel, indices: Sequence[int], sort: SortSpec, keep_id: str | None
    ) -> None:
        self.model, self.indices, self.sort = model, indices, sort
        self._rows.clear()
        self.virtual_size = Size(self.line_width, len(indices) + 1)
        row = 0
        if keep_id is not None:
            position = model.index_of(keep_id)
            if position is not None:
                try:
                    row = list(indices).index(position)
                except ValueError:
                    row = 0
        self.cursor_row = min(row, max(0, len(indices) - 1))
        self._scroll_to_cursor()
        self.refresh()

    def rank_row(self, row: int) -> RankRow:
        assert self.model is not None
        return self.model.row(self.indices[row])

    def entry_id_at(self, row: int) -> str | None:
        if self.model is None or not 0 <= row < len(self.indices):
            return None
        return self.model.entries[self.indices[row]].id

    def cells_at(self, row: int) -> list[Text]:
        """The cells of a row as shown (cached while the data stays the same)."""
        cells = self._rows.get(row)
        if cells is None:
            if len(self._rows) > ROW_CACHE:
                self._rows.clear()
            cells = row_cells(self.rank_row(row), self.policy)
            self._rows[row] = cells
        return cells

    def header_cells(self) -> list[Text]:
        cells = []
        for column in COLUMNS:
            title = column.title
            if column.key == self.sort.key:
                title += " ▼" if self.sort.descending else " ▲"
            cells.append(Text(title))
        return cells

    # --- rendering --------------------------------------------------------------------
    def _line(self, cells: list[Text]) -> Text:
        line = Text(no_wrap=True, end="")
        for number, (column, cell) in enumerate(zip(COLUMNS, cells, strict=True)):
            if number:
                line.append(" " * GAP)
            line.append_text(_fit(cell, WIDTHS[column.key], column.key in RIGHT))
        return line

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            style = self.get_component_rich_style("ranktable--header")
            cells = self.header_cells()
        else:
            row = scroll_y + y - 1
            if row >= len(self.indices):
                return Strip.blank(width, self.rich_style)
            base = self.rich_style
            if row == self.cursor_row:
                style = base + self.get_component_rich_style("ranktable--cursor")
            elif row % 2:
                style = base + self.get_component_rich_style("ranktable--odd")
            else:
                style = base
            cells = self.cells_at(row)
        segments = list(self._line(cells).render(self.app.console))
        strip = Strip(Segment.apply_style(segments, post_style=None, style=style))
        strip = strip.extend_cell_length(self.line_width, style)
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width, style)

    # --- cursor and mouse -------------------------------------------------------------
    def watch_cursor_row(self, old: int, new: int) -> None:
        self.refresh_line(old - self.scroll_offset.y + 1)
        self.refresh_line(new - self.scroll_offset.y + 1)
        entry_id = self.entry_id_at(new)
        if entry_id is not None:
            self.post_message(self.Highlighted(entry_id))

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False, immediate=True)

    def move_cursor(self, row: int) -> None:
        if self.indices:
            self.cursor_row = max(0, min(row, len(self.indices) - 1))
            self._scroll_to_cursor()

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step * max(1, self.size.height - 2))

    def action_jump(self, row: int) -> None:
        self.move_cursor(row if row >= 0 else len(self.indices) - 1)

    def action_select(self) -> None:
        entry_id = self.entry_id_at(self.cursor_row)
        if entry_id is not None:
            self.post_message(self.Selected(entry_id))

    def column_at(self, x: int) -> ColumnKey | None:
        edge = 0
        for column in COLUMNS:
            edge += WIDTHS[column.key] + GAP
            if x < edge:
                return column.key
        return None

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            key = self.column_at(offset.x + self.scroll_offset.x)
            if key is not None:
                self.post_message(self.HeaderClicked(key))
            return
        row = self.scroll_offset.y + offset.y - 1
        if 0 <= row < len(self.indices):
            if row == self.cursor_row and event.chain > 1:
                self.action_select()
            self.move_cursor(row)
