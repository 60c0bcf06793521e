"""Layer 1 previewed, and the entities of Layer 2: each section of the snapshot a rebuild would write now, with its
tokens against its limit, and its text (the file the prompt carries is rebuilt from the
same inputs whenever the long-term file is newer than it)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from memory_core.longterm.entities import Entity
from memory_core.snapshot.builder import Snapshot
from tui.format import token_meter


class SnapshotPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        yield Static("(loading)", id="snapshot-head")
        table: DataTable[str | Text] = DataTable(
            id="snapshot-sections", cursor_type="row", zebra_stripes=True
        )
        table.add_columns("section", "tokens of its limit")
        yield table
        yield Static(id="snapshot-text")
        yield Static("Entities the scope's memories name", classes="pane-title")
        entities: DataTable[str] = DataTable(id="entities", cursor_type="row", zebra_stripes=True)
        entities.add_columns("name", "kind", "aliases", "memories")
        yield entities

    def show_entities(self, entities: Sequence[Entity]) -> None:
        table = self.query_one("#entities", DataTable)
        table.clear()
        for entity in entities:
            aliases = ", ".join(entity.aliases)
            table.add_row(entity.name, entity.kind.value, aliases, str(len(entity.facts)))

    def show(self, snapshot: Snapshot, path: str, enabled: bool) -> None:
        head = Text()
        head.append(f"{path}  ", style="bold")
        head.append(f"{snapshot.tokens} of {snapshot.budget} tokens · ")
        head.append(
            "in every prompt"
            if enabled
            else "off: prompts carry the top entries (snapshot.enabled)",
            style="" if enabled else "dim",
        )
        self.query_one("#snapshot-head", Static).update(head)
        table = self.query_one("#snapshot-sections", DataTable)
        table.clear()
        for section in snapshot.sections:
            table.add_row(section.title, token_meter(section.tokens, section.limit, width=16))
        self.query_one("#snapshot-text", Static).update(Text(snapshot.render()))
