"""Editing an entry's content; saving is the confirmation."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static, TextArea


class EditScreen(ModalScreen[str | None]):
    """Dismisses with the new content (ctrl+s / Save) or None (Escape / Cancel)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, entry_id: str, content: str) -> None:
        super().__init__()
        self.entry_id = entry_id
        self.original = content

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-box"):
            yield Static(
                f"Edit [{self.entry_id}] — ctrl+s saves, Escape cancels",
                id="edit-title",
                markup=False,
            )
            yield TextArea(self.original, id="edit-text")
            with Horizontal(id="edit-buttons"):
                yield Button("Save (ctrl+s)", id="edit-save", variant="primary")
                yield Button("Cancel (esc)", id="edit-cancel")

    def on_mount(self) -> None:
        self.query_one("#edit-text", TextArea).focus()

    def action_save(self) -> None:
        text = self.query_one("#edit-text", TextArea).text.strip()
        self.dismiss(text if text and text != self.original.strip() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#edit-save")
    def _save(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#edit-cancel")
    def _cancel(self) -> None:
        self.action_cancel()
