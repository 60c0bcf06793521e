"""The key help screen (`?` or F1): every key of the app, including those the footer has
no room for, written from the bindings themselves so it cannot fall out of date."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HelpSection = tuple[str, list[tuple[str, str]]]
"""A heading and its (keys, what they do) lines."""


def binding_lines(
    display: Callable[[Binding], str], bindings: Iterable[BindingType]
) -> list[tuple[str, str]]:
    """One line per action: its keys as `display` (the app's `get_key_display`) shows
    them, joined (`+ =`), and its tooltip or else its description."""
    lines: dict[str, tuple[list[str], str]] = {}
    for binding in Binding.make_bindings(bindings):
        keys, _ = lines.setdefault(binding.action, ([], binding.tooltip or binding.description))
        shown = display(binding)
        if shown not in keys:
            keys.append(shown)
    return [(" ".join(keys), what) for keys, what in lines.values()]


def help_text(sections: list[HelpSection]) -> Text:
    width = max((len(keys) for _, lines in sections for keys, _ in lines), default=0)
    text = Text()
    for number, (title, lines) in enumerate(sections):
        if number:
            text.append("\n")
        text.append(title + "\n", style="bold")
        for keys, what in lines:
            text.append(f"  {keys:>{width}}  ", style="bold cyan")
            text.append(what + "\n")
    return text


class HelpScreen(ModalScreen[None]):
    """Closes with Escape, `?`, F1 or q."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,f1,q", "close", "Close help"),
    ]

    def __init__(self, sections: list[HelpSection]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static("Keys  (Escape, ? or F1 closes)", id="help-title")
            with VerticalScroll(id="help-scroll"):
                yield Static(help_text(self.sections), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
