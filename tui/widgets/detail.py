"""One entry: its full content and metadata, its audit history and its projected score."""

from __future__ import annotations

from datetime import datetime, tzinfo

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from memory_core.base.entries import MemoryEntry, class_of, confidence_of, granularity_of
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.base.records import AuditRecord
from memory_core.longterm.scoring import RankTerms, rank_terms
from tui.format import days_cell, score_bar, shown_content, status_cell, time_text
from tui.model import RankRow

PROJECTION_DAYS = 180


def metadata_text(row: RankRow, zone: tzinfo, when: datetime, policy: ScoringPolicy) -> Text:
    entry = row.entry
    text = Text()
    text.append(f"[{entry.id}] ", style="bold")
    text.append(f"{entry.category}  ")
    text.append_text(status_cell(row.status, pinned=entry.pinned))
    if entry.pinned and row.archived:
        text.append("  pinned", style="bold cyan")
    text.append("\n\n")
    text.append(shown_content(entry.content) + "\n\n")
    terms = rank_terms(entry, when, policy)
    fields: list[tuple[str, str | Text]] = [
        ("class", f"{class_of(entry).value} · {granularity_of(entry).value}"),
        ("confidence", confidence_text(entry)),
        ("rank score", rank_text(terms)),
        ("score", score_bar(row.score, policy)),
        ("stored", f"{entry.score:.4f} at {time_text(entry.scored_at, zone)}"),
        ("as of", time_text(when, zone)),
        ("+7 d / +30 d", f"{row.score_7:.2f} / {row.score_30:.2f}"),
        ("archive in", days_cell(row.to_archive, passed=row.archived)),
        ("forget in", days_cell(row.to_forget)),
        ("hits", str(entry.hits)),
        ("created", time_text(entry.created_at, zone)),
        ("last activated", time_text(entry.last_activated, zone)),
        ("archived", entry.archived.value if entry.archived else "no"),
        ("expires", time_text(entry.expires_at, zone) if entry.expires_at else "never"),
        ("source session", entry.source_session or "—"),
        ("sessions", ", ".join(entry.sessions) or "—"),
    ]
    for name, value in fields:
        text.append(f"{name:>15}  ", style="dim")
        text.append_text(value if isinstance(value, Text) else Text(value))
        text.append("\n")
    return text


def rank_text(terms: RankTerms) -> Text:
    """The ranking score, every term shown: why the entry ranks where it does."""
    text = Text()
    text.append(f"{terms.total:.3f}", style="bold")
    text.append(
        f" = base {terms.base:.2f} × decay {terms.decay:.3f}"
        f" + access {terms.access:.3f} + importance {terms.importance:.2f}",
        style="dim",
    )
    return text


def confidence_text(entry: MemoryEntry) -> str:
    value = f"{confidence_of(entry):.2f}"
    return value if entry.confidence is not None else f"{value} (class default)"


def history_cells(record: AuditRecord, zone: tzinfo) -> list[str | Text]:
    old = "—" if record.old_score is None else f"{record.old_score:.2f}"
    new = "gone" if record.new_score is None else f"{record.new_score:.2f}"
    return [
        time_text(record.at, zone),
        record.action,
        f"{old} → {new}",
        record.source,
        record.detail,
    ]


class DetailPane(Vertical):
    def __init__(
        self, zone: tzinfo, policy: ScoringPolicy = DEFAULT_POLICY, *, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.zone = zone
        self.policy = policy
        self.entry_id: str | None = None
        self.projection: list[float] = []

    def compose(self) -> ComposeResult:
        with Horizontal(id="detail-top"):
            with VerticalScroll(id="detail-meta-scroll"):
                yield Static("Highlight an entry in Rankings.", id="detail-meta")
            yield PlotextPlot(id="detail-plot")
        yield DataTable[str | Text](id="detail-history", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#detail-history", DataTable).add_columns(
            "at", "action", "score", "source", "detail"
        )

    def show(
        self, row: RankRow, history: list[AuditRecord], projection: list[float], when: datetime
    ) -> None:
        self.entry_id = row.entry.id
        self.projection = projection
        self.query_one("#detail-meta", Static).update(
            metadata_text(row, self.zone, when, self.policy)
        )
        table = self.query_one("#detail-history", DataTable)
        table.clear()
        for record in history:
            table.add_row(*history_cells(record, self.zone), key=str(record.id))
        self._plot(projection, row.entry.id)

    def _plot(self, projection: list[float], entry_id: str) -> None:
        plot = self.query_one("#detail-plot", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        days = list(range(len(projection)))
        plt.plot(days, projection, label=f"[{entry_id}] score", marker="braille", color="cyan")
        plt.plot(days, [self.policy.archive_below] * len(days), label="archive 0.2", color="yellow")
        plt.plot(days, [self.policy.forget_below] * len(days), label="forget 0.05", color="red")
        plt.ylim(0, 1)
        plt.xlim(0, max(1, len(days) - 1))
        plt.title(f"projected score, next {len(days) - 1} days")
        plt.xlabel("days from now")
        plot.refresh()
