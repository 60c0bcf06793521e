"""The app's reading workers: each reads through the core and posts what it read as a
message (`tui.messages`); only the app's handlers touch widgets.

Every load is a Textual worker of its own exclusive group, so a newer request for the same
pane (another scope, a refresh) cancels the one still running, and the event loop only
ever awaits. Apart from the App class so that the app reads as layout, state and drawing,
and this module as what is read and in which order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from functools import partial

from textual.worker import Worker

from memory_core.base.errors import StorageError
from memory_core.base.records import AuditRecord
from memory_core.base.scope import ScopeKey
from memory_core.longterm.scoring import projection
from memory_core.recall.index.steps import explaining
from memory_core.recall.request import SearchRequest
from tui.host import LoadsHost
from tui.loading import EntriesSnapshot
from tui.messages import (
    ActivityLoaded,
    ArchiveLoaded,
    DetailLoaded,
    EntriesLoaded,
    RecallDone,
    ScopesLoaded,
    SnapshotLoaded,
    WorkspaceChanged,
)
from tui.model import RankRow
from tui.overview import archive_state, scope_counts
from tui.watch import Changes, Stamp, compare, take_stamp
from tui.widgets.activity import FEED_LIMIT
from tui.widgets.detail import PROJECTION_DAYS

log = logging.getLogger(__name__)


class Loads:
    """Starts the workers that fill the panes, and remembers what the first screen still
    owes: the other panes (after the first rankings) and the whole of a large file (after
    its head)."""

    def __init__(self, app: LoadsHost) -> None:
        self.app = app
        self.others_started = False
        """The panes other than Rankings have been asked to load."""
        self._whole_requested = False

    # --- in which order ---------------------------------------------------------------
    def everything(self) -> None:
        self.entries(self.app.scope)
        self.others()

    def others(self) -> None:
        """Every pane but Rankings, for the scope shown now."""
        self.others_started = True
        scope = self.app.scope
        self.scopes()
        self.archive(scope)
        self.activity(scope, 0)
        self.snapshot(scope)

    def scope_chosen(self, scope: ScopeKey) -> None:
        """Every pane that shows one scope (the list of scopes stays as it is)."""
        self.entries(scope)
        self.archive(scope)
        self.activity(scope, 0)
        self.snapshot(scope)

    def changed(self, changes: Changes) -> None:
        """Another process wrote: reload what its changes touch, and the archive state
        at every change."""
        app, scope = self.app, self.app.scope
        if changes.long_term or changes.files or changes.database:
            self.scopes()
        if scope.value in changes.long_term:
            self.entries(scope)
        self.archive(scope)
        if changes.audit or changes.database:
            self.activity(scope, app.activity[0].id if app.activity else 0)

    def whole_after_head(self) -> None:
        """The head of a large file is on screen: load the whole file next (once per head)."""
        if not self._whole_requested:
            self._whole_requested = True
            self.app.call_after_refresh(self.entries, self.app.scope, whole=True)

    def _start(
        self, work: Callable[[], Coroutine[None, None, None]], name: str, group: str, what: str
    ) -> Worker[None]:
        # A callable, not a coroutine: a worker cancelled before it starts awaits nothing.
        worker: Worker[None] = self.app.run_worker(
            work, name=name, group=group, description=what, exclusive=True, exit_on_error=False
        )
        return worker

    # --- the workers ------------------------------------------------------------------
    def scopes(self) -> Worker[None]:
        return self._start(self._scopes, "load_scopes", "scopes", "scope counts")

    async def _scopes(self) -> None:
        app = self.app
        app.post_message(ScopesLoaded(await scope_counts(app.core, app.loader, app.now())))

    def entries(self, scope: ScopeKey, *, whole: bool = False) -> Worker[None]:
        work = partial(self._entries, scope, whole=whole)
        return self._start(work, "load_entries", "entries", "entries")

    async def _entries(self, scope: ScopeKey, *, whole: bool) -> None:
        """The head of a large file first; the whole file when asked (after the head is
        drawn) or when the file is small."""
        loader = self.app.loader
        if not whole:
            self._whole_requested = False
            head = await loader.head(scope)
            if head is not None:
                self.app.post_message(EntriesLoaded(head))
                return
        entries = await loader.load(scope)
        self.app.post_message(EntriesLoaded(EntriesSnapshot(scope, entries, True)))

    def archive(self, scope: ScopeKey) -> Worker[None]:
        return self._start(
            partial(self._archive, scope), "load_archive", "archive", "archive state"
        )

    async def _archive(self, scope: ScopeKey) -> None:
        app = self.app
        state = await archive_state(app.core, app.loader, scope, app.now())
        app.post_message(ArchiveLoaded(state))

    def snapshot(self, scope: ScopeKey) -> Worker[None]:
        return self._start(partial(self._snapshot, scope), "load_snapshot", "snapshot", "snapshot")

    async def _snapshot(self, scope: ScopeKey) -> None:
        """What a rebuild would write now (nothing is written)."""
        core = self.app.core
        snapshot = await core.snapshots.build(scope, now=self.app.now())
        enabled = core.config.snapshot.enabled
        entities = await core.memories.entities(scope)
        path = core.workspace.relative(core.snapshots.path(scope))
        self.app.post_message(SnapshotLoaded(scope, snapshot, path, enabled, entities))

    def activity(self, scope: ScopeKey, after_id: int) -> Worker[None]:
        work = partial(self._activity, scope, after_id)
        return self._start(work, "load_activity", "activity", "activity")

    async def _activity(self, scope: ScopeKey, after_id: int) -> None:
        core = self.app.core
        if not core.has_database:
            self.app.post_message(ActivityLoaded(scope, []))  # nothing to load: no "loading…"
            return
        records = await core.audit.recent(scope, limit=FEED_LIMIT, after_id=after_id)
        self.app.post_message(ActivityLoaded(scope, records))

    def watch(self) -> Worker[None]:
        return self._start(self._watch, "watch_workspace", "watch", "watch")

    async def _watch(self) -> None:
        """Poll for changes by other processes; never touches a widget. A failed poll (a
        directory removed mid-scan, a busy database) is tried again at the next tick."""
        previous: Stamp | None = None
        while True:
            try:
                current = await take_stamp(self.app.core)
            except (OSError, StorageError) as exc:
                log.warning("change poll failed, trying again: %s", exc)
            else:
                changes = None if previous is None else compare(previous, current)
                previous = current
                if changes:
                    self.app.post_message(WorkspaceChanged(changes))
            await self.app.sleep(self.app.poll_seconds)

    def detail(self, scope: ScopeKey, row: RankRow, when: datetime) -> Worker[None]:
        work = partial(self._detail, scope, row, when)
        return self._start(work, "load_detail", "detail", "entry detail")

    async def _detail(self, scope: ScopeKey, row: RankRow, when: datetime) -> None:
        core = self.app.core
        history: list[AuditRecord] = []
        if core.has_database:
            history = await core.audit.history(scope, row.entry.id)
        points = projection(row.entry, when, PROJECTION_DAYS, core.policy)
        self.app.post_message(DetailLoaded(scope, row, history, points, when))

    def recall(self, scope: ScopeKey, query: str) -> Worker[None]:
        return self._start(partial(self._recall, scope, query), "run_recall", "recall", "recall")

    async def _recall(self, scope: ScopeKey, query: str) -> None:
        core = self.app.core
        with explaining():  # the pane shows the selected hit's ranking steps
            hits = await core.finder.search(scope, SearchRequest(query, limit=10))
        injection = await core.finder.recall(scope, query, now=self.app.now())
        budget = core.config.recall.token_budget
        self.app.post_message(RecallDone(scope, query, hits, injection, budget))
