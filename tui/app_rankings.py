"""The rankings pipeline: entries → model (in a thread) → view → pane.

A rebuild (new entries, another what-if instant) makes a new `RankingModel`; a re-sort or
a new filter only asks the current model for another view. Every request is numbered and
only the newest result is accepted, so a burst of keystrokes never shows a stale order.
Workers run on the app and post `RankingsReady`; the app draws it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from functools import partial

from textual.worker import Worker

from memory_core.base.entries import MemoryEntry
from tui.host import CoreView
from tui.loading import EntriesSnapshot
from tui.messages import RankingsReady
from tui.model import (
    COLUMNS,
    ColumnKey,
    RankingModel,
    RankingView,
    RowFilter,
    SortSpec,
    StatusCounts,
    counts_at,
)


class Rankings:
    """What the rankings show (sort, filter, what-if offset) and the latest result."""

    def __init__(self, app: CoreView) -> None:
        self.app = app
        self.sort = SortSpec()
        self.row_filter = RowFilter()
        self.offset_days = 0
        self.snapshot: EntriesSnapshot | None = None
        self.model: RankingModel | None = None
        self.view: RankingView | None = None
        self._generation = 0
        self._building = False
        self._baseline: tuple[Sequence[MemoryEntry], StatusCounts, datetime] | None = None
        """Counts at offset 0 of the current entries (what a what-if is compared with)."""

    def reset(self) -> None:
        self.snapshot = self.model = self.view = None

    # --- requests -----------------------------------------------------------------------
    def entries_loaded(self, snapshot: EntriesSnapshot) -> None:
        self.snapshot = snapshot
        self.request(rebuild=True)

    def sort_by(self, key: ColumnKey) -> None:
        self.sort = self.sort.toggled(key)
        self.request()

    def sort_next(self) -> None:
        keys = [c.key for c in COLUMNS]
        self.sort_by(keys[(keys.index(self.sort.key) + 1) % len(keys)])

    def reverse(self) -> None:
        self.sort = SortSpec(self.sort.key, not self.sort.descending)
        self.request()

    def filter_by(self, row_filter: RowFilter) -> None:
        self.row_filter = row_filter
        self.request()

    def what_if(self, days: int | None) -> None:
        """Move the instant by `days` (None: back to now); nothing is written."""
        self.offset_days = 0 if days is None else max(0, self.offset_days + days)
        self.request(rebuild=True)

    def request(self, *, rebuild: bool = False) -> Worker[None] | None:
        if self.snapshot is None:
            return None
        self._generation += 1
        params = (self.sort, self.row_filter)
        # A callable, not a coroutine: a worker cancelled before it starts awaits nothing.
        work: Callable[[], Coroutine[None, None, None]]
        if rebuild or self.model is None or self._building:
            self._building = True
            work = partial(self._build, self.snapshot, self.offset_days, params, self._generation)
            description = "rankings model"
        else:
            work = partial(self._refresh, self.model, params, self._generation)
            description = "rankings view"
        worker: Worker[None] = self.app.run_worker(
            work, group="rankings", exclusive=True, exit_on_error=False, description=description
        )
        return worker

    def failed(self) -> None:
        self._building = False

    # --- workers ------------------------------------------------------------------------
    async def _build(
        self,
        snapshot: EntriesSnapshot,
        offset_days: int,
        params: tuple[SortSpec, RowFilter],
        generation: int,
    ) -> None:
        base, policy = self.app.now(), self.app.core.policy
        known = self._baseline
        baseline = known[1] if known and known[0] is snapshot.entries and known[2] == base else None

        def build() -> tuple[RankingModel, RankingView]:
            model = RankingModel(
                snapshot.entries,
                base,
                offset_days,
                policy,
                complete=snapshot.complete,
                expected_total=snapshot.expected_total,
            )
            if offset_days:
                model.baseline = baseline or counts_at(snapshot.entries, base, policy)
            return model, model.view(*params)

        model, view = await asyncio.to_thread(build)
        self.app.post_message(RankingsReady(model, view, generation))
        if snapshot.complete:
            await asyncio.to_thread(model.warm)

    async def _refresh(
        self, model: RankingModel, params: tuple[SortSpec, RowFilter], generation: int
    ) -> None:
        view = await asyncio.to_thread(model.view, *params)
        self.app.post_message(RankingsReady(model, view, generation))

    # --- results ------------------------------------------------------------------------
    def accept(self, message: RankingsReady) -> bool:
        """Keep the result if it answers the newest request."""
        if message.generation != self._generation:
            return False
        self._building = False
        self.model, self.view = message.model, message.view
        counts = message.model.baseline or message.model.counts()
        self._baseline = (message.model.entries, counts, message.model.base)
        return True
