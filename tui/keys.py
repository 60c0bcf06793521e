"""The app's keys: its tabs, its bindings and the help screen's sections written from them.

Kept apart from the App class so the whole key map reads in one place, and so the help
(`?`/F1) is built from the very bindings the app uses and cannot fall out of date.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding, BindingType

from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.screens.help import HelpScreen, HelpSection, binding_lines
from tui.widgets.ranktable import RankTable

TABS: tuple[tuple[str, str], ...] = (
    ("tab-rankings", "Rankings"),
    ("tab-entry", "Entry"),
    ("tab-archive", "Archive"),
    ("tab-recall", "Recall"),
    ("tab-activity", "Activity"),
    ("tab-snapshot", "Snapshot"),
)
"""Each tab's id and title, in the order of the number keys that show them."""

MAIN_WIDGETS: dict[str, str] = {
    "tab-rankings": "#rankings",
    "tab-entry": "#detail-meta-scroll",
    "tab-archive": "#archive-pane",
    "tab-recall": "#recall-hits",
    "tab-activity": "#activity",
    "tab-snapshot": "#snapshot-pane",
}
"""What a tab focuses when shown: never a text box, so a number key pressed next
switches tabs again instead of typing into one."""

WHAT_IF_HELP = "back to now; until then the view is read-only (actions refuse)"

BINDINGS: list[BindingType] = [
    # In footer order: at 80 columns the first few are all that fits, so Help leads; at
    # 120 every shown one fits (the compact footer), the rest are in the help (?).
    Binding("question_mark,f1", "help", "Help", tooltip="this list of every key"),
    Binding("q", "quit", "Quit", tooltip="leave the TUI"),
    Binding("slash", "focus_filter", "Filter", tooltip="type in the rankings filter box"),
    Binding("f", "focus_recall", "Recall", tooltip="type in the Recall query box"),
    Binding("b", "toggle_sidebar", "Sidebar", tooltip="show or hide scopes and archive state"),
    Binding("s", "sort_next", "Sort", tooltip="sort the rankings by the next column"),
    Binding("r", "sort_reverse", "Reverse", show=False, tooltip="reverse the rankings' order"),
    Binding("plus,equals_sign", "what_if(1)", "+1d", show=False, tooltip="what-if: one day later"),
    Binding("minus", "what_if(-1)", "-1d", show=False, tooltip="what-if: one day earlier"),
    Binding("greater_than_sign", "what_if(30)", "+30d", tooltip="what-if: 30 days later"),
    Binding(
        "less_than_sign", "what_if(-30)", "-30d", show=False, tooltip="what-if: 30 days earlier"
    ),
    Binding("0", "what_if_reset", "Now", show=False, tooltip="what-if: back to now"),
    Binding("p", "toggle_pin", "Pin", tooltip="pin or unpin the highlighted entry"),
    Binding("a", "toggle_archive", "Archive", tooltip="archive or restore the highlighted entry"),
    Binding("x", "forget", "Forget", tooltip="forget the highlighted entry (asks first)"),
    Binding(
        "u",
        "undo_forget",
        "Undo forget",
        show=False,
        tooltip="restore the entry forgotten last (undo a forget)",
    ),
    Binding("e", "edit", "Edit", tooltip="edit the highlighted entry's content"),
    Binding(
        "C", "consolidate", "Consolidate", tooltip="decay, archive and forget now (asks first)"
    ),
    Binding("ctrl+r", "refresh", "Refresh", show=False, tooltip="reload every pane"),
    Binding("escape", "leave_box", "Leave box", show=False, tooltip="leave a text box or menu"),
    *[
        Binding(str(n), f"show_tab('{tab}')", title, show=False, tooltip=f"show the {title} tab")
        for n, (tab, title) in enumerate(TABS, start=1)
    ],
]
"""The app's own keys (the rankings table, the modals and the help screen have theirs)."""


def help_sections(display: Callable[[Binding], str]) -> list[HelpSection]:
    """Every key of the app and of its widgets and modals, as `display` (the app's
    `get_key_display`) shows them, grouped by where they work."""

    def key(name: str) -> str:
        return display(Binding(name, ""))

    return [
        (
            "Everywhere",
            [
                *binding_lines(display, BINDINGS),
                (key("ctrl+p"), "command palette: any action, sort, tab or scope by name"),
                (key("ctrl+q"), "quit"),
            ],
        ),
        (
            "Rankings table",
            [
                *binding_lines(display, RankTable.BINDINGS),
                ("click", "a column title: sort by it (again: reverse)"),
            ],
        ),
        (
            "Filter and Recall boxes",
            [
                (key("enter"), "filter: back to the table; Recall: run the query"),
                (key("escape"), "leave the box (number keys switch tabs again)"),
            ],
        ),
        ("Scopes (sidebar)", [(key("enter"), "show the highlighted scope in every tab")]),
        ("What-if view (+ - > <)", [("0", WHAT_IF_HELP)]),
        ("Confirmation", binding_lines(display, ConfirmScreen.BINDINGS)),
        ("Editing", binding_lines(display, EditScreen.BINDINGS)),
        ("This help", binding_lines(display, HelpScreen.BINDINGS)),
    ]
