"""Recall as the bot sees it: the hits with matched terms, what each ranking step
contributed to the selected hit, and the injected block."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from memory_core.base.records import Hit, explained
from memory_core.base.scope import ScopeKey
from memory_core.base.text import matched_terms
from memory_core.base.wording import counted
from memory_core.recall.injection import Injection
from tui.format import highlight, one_line, token_meter

HIT_TEXT = 90


def hit_text(hit: Hit, query: str) -> Text:
    """The hit's text on one line, query terms highlighted."""
    flat = one_line(hit.text, HIT_TEXT)
    return highlight(flat, matched_terms(flat, query))


def injection_text(injection: Injection, query: str) -> Text:
    if not injection.block:
        keywords = ", ".join(injection.keywords) or "none"
        return Text(
            f"(no block: nothing matched keywords [{keywords}], the bot adds nothing)", style="dim"
        )
    return highlight(
        injection.block, matched_terms(injection.block, " ".join(injection.keywords) or query)
    )


class RecallPane(Vertical):
    @dataclass
    class QuerySubmitted(Message):
        query: str

    def compose(self) -> ComposeResult:
        yield Input(placeholder="recall query, e.g. 咖啡 or pytest  (f, Enter)", id="recall-query")
        yield Static(
            "Press f (or click the box), type a query and press Enter; Escape leaves the box.",
            id="recall-status",
        )
        table: DataTable[str | Text] = DataTable(
            id="recall-hits", cursor_type="row", zebra_stripes=True
        )
        yield table
        yield Static(id="recall-steps")
        yield Static(id="recall-budget")
        with VerticalScroll(id="recall-block-scroll"):
            yield Static(id="recall-block")

    hits: tuple[Hit, ...] = ()
    """The hits shown, in the table's order."""

    def on_mount(self) -> None:
        self.query_one("#recall-hits", DataTable).add_columns("score", "where", "kind", "text")

    @on(Input.Submitted, "#recall-query")
    def _submitted(self, event: Input.Submitted) -> None:
        """Enter runs the query and keeps the focus in the box: keys typed next refine the
        query instead of firing the app's commands (`?`, `s`, `x`); Escape leaves it."""
        event.stop()
        if event.value.strip():
            self.post_message(self.QuerySubmitted(event.value.strip()))

    @on(DataTable.RowHighlighted, "#recall-hits")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_steps(event.cursor_row)

    def show_steps(self, row: int) -> None:
        """The ranking steps of the hit in `row` (their contributions to its score)."""
        line = Text()
        if 0 <= row < len(self.hits):
            hit = self.hits[row]
            line.append(f"ranking of {hit.location}: ", style="bold")
            line.append(explained(hit.steps))
        self.query_one("#recall-steps", Static).update(line)

    def rerunning(self, query: str, scope: ScopeKey) -> None:
        """The scope changed: the hits shown were the old scope's, so clear them now."""
        self.hits = ()
        self.query_one("#recall-steps", Static).update("")
        self.query_one("#recall-hits", DataTable).clear()
        self.query_one("#recall-budget", Static).update("")
        self.query_one("#recall-block", Static).update("")
        self.query_one("#recall-status", Static).update(
            Text(f"running {query!r} again in scope {scope}…", style="dim")
        )

    def show(
        self, query: str, hits: list[Hit], injection: Injection, budget: int, scope: ScopeKey
    ) -> None:
        table = self.query_one("#recall-hits", DataTable)
        table.clear()
        self.hits = tuple(hits)
        for number, hit in enumerate(hits):
            table.add_row(
                Text(f"{hit.score:.3f}", justify="right"),
                hit.location,
                hit.kind.value,
                hit_text(hit, query),
                key=f"{number}:{hit.location}",
            )
        self.show_steps(table.cursor_row)
        keywords = ", ".join(injection.keywords) or "none"
        self.query_one("#recall-status", Static).update(
            Text(
                f"{counted(len(hits), 'hit')} for {query!r} in scope {scope} · keywords: {keywords}"
            )
        )
        meter = Text("injection block ", style="bold")
        meter.append_text(token_meter(injection.tokens, budget))
        meter.append(f" · {counted(len(injection.hits), 'hit')} injected")
        self.query_one("#recall-budget", Static).update(meter)
        self.query_one("#recall-block", Static).update(injection_text(injection, query))
