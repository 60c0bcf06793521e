"""A virtual table for the rankings: only the visible lines are ever rendered.

A DataTable measures and stores every cell it holds, so a scope of 100 000 entries would
have to be shown a page at a time. This widget holds only the sorted entry indices of a
`RankingModel` and renders each visible line on demand (Textual's line API), so scrolling,
re-sorting and filtering cost the same at 100 entries and at 100 000.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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

from memory_core.base.entries import class_of
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from tui.format import days_cell, one_line, score_bar, score_cell, status_cell
from tui.model import COLUMNS, Column, ColumnKey, RankingModel, RankRow, SortSpec

CONTENT_WIDTH = 200
"""Characters of content a row keeps; the screen shows what its width allows."""
CONTENT_MIN = 32
"""Columns are left out before the content gets narrower than this."""
WIDTHS: dict[ColumnKey, int] = {
    "rank": 6,
    "id": 8,
    "category": 11,
    "memory_class": 8,
    "score": 13,
    "score_7": 5,
    "score_30": 6,
    "to_archive": 7,
    "to_forget": 9,
    "hits": 6,
    "last_activated": 11,
    "pinned": 5,
    "status": 9,
    "content": CONTENT_MIN,
}
"""Each wide enough for its values and for its title followed by the sort arrow."""
RIGHT = frozenset({"rank", "score_7", "score_30", "to_archive", "to_forget", "hits"})
DROP_ORDER: tuple[ColumnKey, ...] = (
    "memory_class",
    "last_activated",
    "score_7",
    "pinned",
    "hits",
    "to_forget",
    "category",
    "score_30",
    "to_archive",
)
"""Columns left out, first to last, when the table is too narrow for all of them."""
GAP = 1
ROW_CACHE = 512
_POSITION: dict[ColumnKey, int] = {c.key: n for n, c in enumerate(COLUMNS)}


def row_cells(row: RankRow, policy: ScoringPolicy) -> list[Text]:
    entry = row.entry
    return [
        Text(str(row.rank)),
        Text(entry.id),
        Text(entry.category),
        Text(class_of(entry).value),
        score_bar(row.score, policy),
        score_cell(row.score_7, policy),
        score_cell(row.score_30, policy),
        days_cell(row.to_archive, passed=row.archived),
        days_cell(row.to_forget),
        Text(str(entry.hits)),
        Text(entry.last_activated.strftime("%Y-%m-%d")),
        Text("pin", style="bold cyan") if entry.pinned else Text(""),
        status_cell(row.status, pinned=entry.pinned),
        Text(one_line(entry.content, CONTENT_WIDTH)),
    ]


def layout(width: int, sort_key: ColumnKey) -> list[tuple[Column, int]]:
    """The columns shown in `width` cells, with their widths.

    Every column when all fit; otherwise the least telling go first (never the sorted
    one, so a sort is always visible), and the content takes whatever is left: at 80
    columns a row still shows what the memory says."""
    shown = {c.key for c in COLUMNS}
    for key in DROP_ORDER:
        if _need(shown) <= width:
            break
        if key != sort_key:
            shown.discard(key)
    columns = [c for c in COLUMNS if c.key in shown]
    fixed = _need(c.key for c in columns if c.key != "content") + GAP
    content = max(CONTENT_MIN, width - fixed)
    return [(c, content if c.key == "content" else WIDTHS[c.key]) for c in columns]


def _need(keys: Iterable[ColumnKey]) -> int:
    widths = [WIDTHS[k] for k in keys]
    return sum(widths) + GAP * (len(widths) - 1)


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
        Binding("up", "cursor(-1)", "Up", show=False, tooltip="previous entry"),
        Binding("down", "cursor(1)", "Down", show=False, tooltip="next entry"),
        Binding("pageup", "page(-1)", "Page up", show=False, tooltip="a page up"),
        Binding("pagedown", "page(1)", "Page down", show=False, tooltip="a page down"),
        Binding("home", "jump(0)", "First", show=False, tooltip="first entry"),
        Binding("end", "jump(-1)", "Last", show=False, tooltip="last entry"),
        Binding("enter", "select", "Open entry", show=False, tooltip="open it in the Entry tab"),
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
        self._layout: tuple[int, ColumnKey, list[tuple[Column, int]]] | None = None

    # --- columns ----------------------------------------------------------------------
    def columns(self) -> list[tuple[Column, int]]:
        """The columns on screen now and their widths (see `layout`)."""
        width = self.scrollable_content_region.width or self.size.width
        cached = self._layout
        if cached is None or cached[:2] != (width, self.sort.key):
            cached = (width, self.sort.key, layout(width, self.sort.key))
            self._layout = cached
        return cached[2]

    def visible_keys(self) -> list[ColumnKey]:
        return [column.key for column, _ in self.columns()]

    @property
    def line_width(self) -> int:
        columns = self.columns()
        return sum(width for _, width in columns) + GAP * (len(columns) - 1)

    def on_resize(self) -> None:
        self._update_virtual_size()

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self.line_width, len(self.indices) + 1)

    # --- data -------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self.indices)

    def show(
        self, model: RankingModel, indices: Sequence[int], sort: SortSpec, keep_id: str | None
    ) -> None:
        self.model, self.indices, self.sort = model, indices, sort
        self._rows.clear()
        self._update_virtual_size()
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
        for number, (column, width) in enumerate(self.columns()):
            if number:
                line.append(" " * GAP)
            line.append_text(_fit(cells[_POSITION[column.key]], width, column.key in RIGHT))
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
        for column, width in self.columns():
            edge += width + GAP
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
