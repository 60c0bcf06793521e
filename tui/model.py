"""The rankings as pure data: scores at an instant, sorting, filtering and paging.

Nothing here touches Textual, files or SQLite, and nothing writes: the what-if view is this
model built at `now + N days`. Columns are computed once per model (lazily, or all at once by
`warm()` in a worker thread), so a re-sort of 100 000 entries is one `sorted` over cached keys,
and only one page of rows is ever turned into cells.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from memory_core.base.entries import MemoryEntry, class_of
from memory_core.base.policy import DEFAULT_POLICY, ScoringPolicy
from memory_core.longterm.scoring import Status, days_until_below, is_expired, score_at

ColumnKey = Literal[
    "rank",
    "id",
    "category",
    "memory_class",
    "score",
    "score_7",
    "score_30",
    "to_archive",
    "to_forget",
    "hits",
    "last_activated",
    "pinned",
    "status",
    "content",
]
SortValue = float | str
NEVER = float("inf")


@dataclass(frozen=True, slots=True)
class Column:
    key: ColumnKey
    title: str
    descending_first: bool
    """Direction of the first sort on this column (scores: highest first)."""


COLUMNS: tuple[Column, ...] = (
    Column("rank", "#", False),
    Column("id", "id", False),
    Column("category", "category", False),
    Column("memory_class", "class", False),
    Column("score", "score", True),
    Column("score_7", "+7d", True),
    Column("score_30", "+30d", True),
    Column("to_archive", "→arch", False),
    Column("to_forget", "→forget", False),
    Column("hits", "hits", True),
    Column("last_activated", "last act.", True),
    Column("pinned", "pin", True),
    Column("status", "status", False),
    Column("content", "content", False),
)
COLUMN_BY_KEY: dict[str, Column] = {c.key: c for c in COLUMNS}
_STATUS_ORDER = {Status.ACTIVE: 0, Status.ARCHIVED: 1, Status.FORGOTTEN: 2}


def what_if(entry: MemoryEntry, when: datetime, policy: ScoringPolicy) -> tuple[float, Status]:
    """Score and status a consolidation at `when` would give the entry (without writing).

    The same rules as `decay.decay_all` (decay, expiry of todos, then `status_of`), for one
    entry and without copying it: `decay_all` builds a new entry per change, which costs
    seconds at 100 000 entries. A test keeps the two in agreement.
    """
    score = score_at(entry, when, policy)
    archived = entry.archived is not None
    if not archived and entry.category == "todo" and is_expired(entry, when):
        score = min(score, max(policy.forget_below, policy.archive_below - 0.01))
        archived = True
    if not entry.pinned and score < policy.forget_below:
        return score, Status.FORGOTTEN
    if archived or (not entry.pinned and score < policy.archive_below):
        return score, Status.ARCHIVED
    return score, Status.ACTIVE


@dataclass(frozen=True, slots=True)
class RankRow:
    """One row of the rankings table, every value as of the model's instant."""

    rank: int
    entry: MemoryEntry
    score: float
    score_7: float
    score_30: float
    to_archive: int | None
    """Days until the archive line; 0 for an entry that is archived already."""
    to_forget: int | None
    status: Status

    @property
    def archived(self) -> bool:
        """Past the archive line (archived, or to be forgotten): no countdown to archive."""
        return self.status is not Status.ACTIVE


@dataclass(frozen=True, slots=True)
class SortSpec:
    key: ColumnKey = "score"
    descending: bool = True

    def toggled(self, key: ColumnKey) -> SortSpec:
        """Clicking the sorted column flips it; another column starts in its natural order."""
        if key == self.key:
            return SortSpec(key, not self.descending)
        return SortSpec(key, COLUMN_BY_KEY[key].descending_first)


@dataclass(frozen=True, slots=True)
class RowFilter:
    text: str = ""
    category: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.text.strip()) or self.category is not None


@dataclass(frozen=True, slots=True)
class StatusCounts:
    active: int = 0
    archived: int = 0
    forgotten: int = 0


@dataclass(frozen=True, slots=True)
class RankingView:
    """What the rankings pane shows: the matching entries in order, and the numbers
    around them. Rows are made on demand (`row(i)`), only for what is on screen."""

    model: RankingModel = field(repr=False)
    indices: list[int] = field(repr=False)
    """Entry indices of the model, sorted and filtered."""
    total: int
    sort: SortSpec
    filter: RowFilter
    when: datetime
    offset_days: int
    counts: StatusCounts
    """Statuses at `when` over every entry (not only the page)."""
    baseline: StatusCounts
    """Statuses now (offset 0), to show what the what-if would change."""
    categories: list[str]
    complete: bool
    """False while only the head of a large file is parsed."""
    expected_total: int | None = None

    @property
    def matching(self) -> int:
        return len(self.indices)

    def row(self, position: int) -> RankRow:
        return self.model.row(self.indices[position])

    def ids(self, limit: int | None = None) -> list[str]:
        entries = self.model.entries
        return [entries[i].id for i in self.indices[:limit]]

    def first_rows(self, limit: int = 50) -> list[RankRow]:
        return [self.row(i) for i in range(min(limit, len(self.indices)))]


@dataclass(slots=True)
class RankingModel:
    """Entries of one scope at one instant (`base + offset_days`)."""

    entries: Sequence[MemoryEntry] = field(repr=False)
    base: datetime
    offset_days: int = 0
    policy: ScoringPolicy = DEFAULT_POLICY
    complete: bool = True
    expected_total: int | None = None
    baseline: StatusCounts | None = None
    """Statuses at `base` (offset 0), when this model is a what-if."""
    warmed: bool = False
    """True once every column's sort keys are computed."""
    _scores: list[float] = field(default_factory=list)
    _statuses: list[Status] = field(default_factory=list)
    _rank_order: list[int] = field(default_factory=list)
    _ranks: list[int] = field(default_factory=list)
    _columns: dict[str, list[SortValue]] = field(default_factory=dict)
    _orders: dict[SortSpec, list[int]] = field(default_factory=dict)
    _folded: list[str] = field(default_factory=list)
    _positions: dict[str, int] = field(default_factory=dict)
    _counts: StatusCounts | None = None
    _categories: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        when = self.when
        pairs = [what_if(e, when, self.policy) for e in self.entries]
        self._scores = [p[0] for p in pairs]
        self._statuses = [p[1] for p in pairs]
        # The order of MEMORY.md: highest score, then most recently activated, then id.
        stamps = [e.last_activated.timestamp() for e in self.entries]
        ids = [e.id for e in self.entries]
        self._rank_order = sorted(
            range(len(self.entries)), key=lambda i: (-self._scores[i], -stamps[i], ids[i])
        )
        self._ranks = [0] * len(self.entries)
        for position, index in enumerate(self._rank_order, start=1):
            self._ranks[index] = position

    @property
    def when(self) -> datetime:
        return self.base + timedelta(days=self.offset_days)

    def __len__(self) -> int:
        return len(self.entries)

    def counts(self) -> StatusCounts:
        if self._counts is None:
            tally = Counter(self._statuses)
            self._counts = StatusCounts(
                tally[Status.ACTIVE], tally[Status.ARCHIVED], tally[Status.FORGOTTEN]
            )
        return self._counts

    def categories(self) -> list[str]:
        if not self._categories:
            self._categories = sorted({e.category for e in self.entries})
        return self._categories

    def index_of(self, entry_id: str) -> int | None:
        if not self._positions:
            self._positions = {e.id: i for i, e in enumerate(self.entries)}
        return self._positions.get(entry_id)

    def row(self, index: int) -> RankRow:
        entry = self.entries[index]
        when = self.when
        status = self._statuses[index]
        return RankRow(
            rank=self._ranks[index],
            entry=entry,
            score=self._scores[index],
            score_7=score_at(entry, when + timedelta(days=7), self.policy),
            score_30=score_at(entry, when + timedelta(days=30), self.policy),
            to_archive=self._to_archive(entry, status),
            to_forget=days_until_below(entry, self.policy.forget_below, when, self.policy),
            status=status,
        )

    def _to_archive(self, entry: MemoryEntry, status: Status) -> int | None:
        """Days until the entry is archived: 0 once it is (by hand or by score), whatever
        its score would still take to reach the line."""
        if status is not Status.ACTIVE:
            return 0
        return days_until_below(entry, self.policy.archive_below, self.when, self.policy)

    def row_for(self, entry_id: str) -> RankRow | None:
        index = self.index_of(entry_id)
        return None if index is None else self.row(index)

    # --- columns and sorting ---------------------------------------------------------
    def column(self, key: ColumnKey) -> list[SortValue]:
        """Sort keys of one column for every entry, computed once (thread-safe)."""
        with self._lock:
            cached = self._columns.get(key)
            if cached is None:
                cached = self._compute(key)
                self._columns[key] = cached
            return cached

    def warm(self) -> None:
        """Compute every column now (in a worker), so any re-sort is only a sort."""
        for column in COLUMNS:
            self.column(column.key)
        self.warmed = True

    def _compute(self, key: ColumnKey) -> list[SortValue]:
        when, policy, entries = self.when, self.policy, self.entries
        simple: dict[str, Callable[[], list[SortValue]]] = {
            "rank": lambda: [float(r) for r in self._ranks],
            "id": lambda: [e.id for e in entries],
            "category": lambda: [e.category for e in entries],
            "memory_class": lambda: [class_of(e).value for e in entries],
            "score": lambda: list(self._scores),
            "hits": lambda: [float(e.hits) for e in entries],
            "last_activated": lambda: [e.last_activated.timestamp() for e in entries],
            "pinned": lambda: [1.0 if e.pinned else 0.0 for e in entries],
            "status": lambda: [float(_STATUS_ORDER[s]) for s in self._statuses],
            "content": lambda: [e.content.casefold() for e in entries],
        }
        if key in simple:
            return simple[key]()
        if key in ("score_7", "score_30"):
            later = when + timedelta(days=7 if key == "score_7" else 30)
            return [score_at(e, later, policy) for e in entries]
        if key == "to_archive":
            statuses = self._statuses
            return [_days_key(self._to_archive(e, statuses[i])) for i, e in enumerate(entries)]
        return [_days_key(days_until_below(e, policy.forget_below, when, policy)) for e in entries]

    def order(self, sort: SortSpec) -> list[int]:
        """Entry indices in `sort` order; ties keep the ranking order."""
        cached = self._orders.get(sort)
        if cached is not None:
            return cached
        if sort.key == "rank":
            order = list(self._rank_order)
            if sort.descending:
                order.reverse()
        else:
            keys = self.column(sort.key)
            order = sorted(self._rank_order, key=keys.__getitem__, reverse=sort.descending)
        if len(self._orders) > 8:
            self._orders.clear()
        self._orders[sort] = order
        return order

    def matching(self, order: list[int], row_filter: RowFilter) -> list[int]:
        if not row_filter.active:
            return order
        needle = row_filter.text.strip().casefold()
        category = row_filter.category
        if needle and not self._folded:
            self._folded = [f"{e.id}\n{e.content}".casefold() for e in self.entries]
        folded, entries = self._folded, self.entries
        return [
            i
            for i in order
            if (category is None or entries[i].category == category)
            and (not needle or needle in folded[i])
        ]

    def view(self, sort: SortSpec = SortSpec(), row_filter: RowFilter = RowFilter()) -> RankingView:
        counts = self.counts()
        return RankingView(
            model=self,
            indices=self.matching(self.order(sort), row_filter),
            total=len(self.entries),
            sort=sort,
            filter=row_filter,
            when=self.when,
            offset_days=self.offset_days,
            counts=counts,
            baseline=self.baseline or counts,
            categories=self.categories(),
            complete=self.complete,
            expected_total=self.expected_total,
        )


def _days_key(days: int | None) -> float:
    return NEVER if days is None else float(days)


def counts_at(
    entries: Sequence[MemoryEntry], when: datetime, policy: ScoringPolicy
) -> StatusCounts:
    """Statuses at `when`: the baseline (now) a what-if view is compared with."""
    tally = Counter(what_if(e, when, policy)[1] for e in entries)
    return StatusCounts(tally[Status.ACTIVE], tally[Status.ARCHIVED], tally[Status.FORGOTTEN])
