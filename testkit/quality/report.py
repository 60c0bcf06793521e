"""Rows of results and their markdown tables. Pure: the runs hand in scores, this
module only groups, averages and formats them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from testkit.quality.metrics import Scores, Summary, summarise

TYPES = ("single", "multi", "temporal", "open")


@dataclass(frozen=True, slots=True)
class Key:
    dataset: str
    path: str
    mode: str
    variant: str


@dataclass(slots=True)
class Group:
    """Scores of one (dataset, path, mode, variant), with each question's type."""

    key: Key
    scores: list[Scores] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    baseline: bool = False
    """A published list: only its top 5 is known, so frac@10 is not shown."""
    summary_override: Summary | None = None

    def add(self, scores: Scores, kind: str = "") -> None:
        self.scores.append(scores)
        self.types.append(kind)

    @property
    def summary(self) -> Summary:
        return self.summary_override or summarise(self.scores)

    def by_type(self, kind: str) -> Summary:
        return summarise([s for s, t in zip(self.scores, self.types, strict=True) if t == kind])


def pooled(name: str, groups: Iterable[Group]) -> list[Group]:
    """Groups of the same (path, mode, variant) pooled under one dataset name (a
    language's files together)."""
    out: dict[tuple[str, str, str], Group] = {}
    for group in groups:
        k = group.key
        merged = out.setdefault(
            (k.path, k.mode, k.variant), Group(Key(name, k.path, k.mode, k.variant))
        )
        merged.scores.extend(group.scores)
        merged.types.extend(group.types)
    return list(out.values())


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def main_table(groups: Sequence[Group]) -> str:
    """n, recall@5, nDCG@5, frac@5, frac@10 (percent) per (dataset, path, mode, variant),
    each counting a hit for what it is anchored on; shown@5 (what the first 5 hits show
    anywhere in their text) beside them as a diagnostic."""
    rows = []
    for g in groups:
        s = g.summary
        rows.append(
            [
                g.key.dataset,
                g.key.path,
                g.key.mode,
                g.key.variant,
                str(s.n),
                _pct(s.recall5),
                _pct(s.ndcg5),
                _pct(s.frac5),
                "-" if g.baseline else _pct(s.frac10),
                "-" if g.baseline else _pct(s.shown5),
            ]
        )
    header = [
        "dataset",
        "path",
        "mode",
        "variant",
        "n",
        "recall@5",
        "nDCG@5",
        "frac@5",
        "frac@10",
        "shown@5",
    ]
    return _table(header, rows)


def type_table(groups: Sequence[Group]) -> str:
    """frac@5 (percent) by question type, with each type's n."""
    rows = []
    for g in groups:
        cells = []
        for kind in TYPES:
            s = g.by_type(kind)
            cells.append(f"{_pct(s.frac5)} ({s.n})" if s.n else "-")
        rows.append([g.key.dataset, g.key.path, g.key.mode, g.key.variant, *cells])
    return _table(["dataset", "path", "mode", "variant", *TYPES], rows)
