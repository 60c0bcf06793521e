"""Every scope of the workspace with its counts; choosing one scopes every other pane."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from memory_core.base.scope import ScopeKey, printable_key
from tui.format import short_scope
from tui.overview import ScopeCounts

SCOPE_COLUMNS = ("scope", "act", "arc", "day", "unarc", "pend")
SCOPE_WIDTH = 24


def scope_cell(row: ScopeCounts, selected: ScopeKey) -> Text:
    """The scope's name (escaped: see `printable_key`), marked when chosen, and `!N` when
    N blocks of its long-term file are quarantined (the Archive tab shows them)."""
    flag = f" !{row.quarantined}" if row.quarantined else ""
    chosen = row.scope == selected
    text = Text("▶ " if chosen else "  ", style="bold" if chosen else "")
    text.append(
        short_scope(printable_key(row.scope), SCOPE_WIDTH - len(flag)),
        style="bold" if chosen else "",
    )
    text.append(flag, style="bold red")
    return text


class ScopesTable(DataTable[str | Text]):
    """Rows keyed by scope key; Enter (or a click) chooses the highlighted scope."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*SCOPE_COLUMNS)

    def show(self, counts: list[ScopeCounts], selected: ScopeKey) -> None:
        self.clear()
        for row in counts:
            self.add_row(
                scope_cell(row, selected),
                Text(str(row.active), justify="right"),
                Text(str(row.archived), justify="right"),
                Text(str(row.daily_notes), justify="right"),
                Text(
                    str(row.unarchived), justify="right", style="yellow" if row.unarchived else ""
                ),
                Text(str(row.pending), justify="right", style="yellow" if row.pending else ""),
                key=row.scope.value,
            )
        keys = [row.scope for row in counts]
        if selected in keys:
            self.move_cursor(row=keys.index(selected), animate=False)
