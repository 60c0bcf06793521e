"""A very long entry (a capture of megabytes) is shown by the TUI from a bounded part of
its text: a row folds and measures a prefix, the detail pane shows the first
`DETAIL_CHARS` characters and how many more there are."""

from __future__ import annotations

from typing import Any

import pytest
from rich.cells import cell_len
from rich.text import Text

from tui import format as tui_format
from tui.format import DETAIL_CHARS, one_line, shown_content

BIG = ("Alice likes green tea from the garden. " * 80_000).strip()  # ~3 MB


def test_a_row_of_a_big_entry_measures_only_a_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a row folds, measures and cuts is a prefix of the entry, not all of it."""
    measured: list[int] = []

    def counting(text: str) -> int:
        measured.append(len(text))
        return cell_len(text)

    def text_of(text: str = "", **kwargs: Any) -> Text:
        measured.append(len(text))
        return Text(text, **kwargs)

    monkeypatch.setattr(tui_format, "cell_len", counting)
    monkeypatch.setattr(tui_format, "Text", text_of)
    row = one_line(BIG, 60)
    assert row == one_line(BIG[:1000], 60) and row.endswith("…") and cell_len(row) == 60
    assert measured and max(measured) <= 60 * 4 + 65


def test_a_row_says_there_is_more_after_a_run_of_blanks() -> None:
    text = "short head" + " " * 10_000 + "and a tail"
    assert one_line(text, 60).endswith("…")
    assert one_line("short head" + " " * 10_000, 60) == "short head"
    assert one_line("  tea \n with  milk ", 60) == "tea with milk"


def test_the_detail_pane_shows_a_bounded_part_and_counts_the_rest() -> None:
    shown = shown_content(BIG)
    assert shown.startswith(BIG[:DETAIL_CHARS])
    assert len(shown) < DETAIL_CHARS + 100
    assert f"{len(BIG) - DETAIL_CHARS} more characters" in shown
    assert shown_content("green tea") == "green tea"
