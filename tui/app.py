"""The chatmem TUI: live inspection of a workspace a bot may be using at the same time.

State lives here (scope, what-if offset, sort, filter); workers read through the core and
post messages; message handlers hand the results to the panes. Writes happen only in
`run_action`, through the core's methods, after a confirmation modal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar, TypeVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Footer, Header, Input, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from memory_core.audit import AuditRecord
from memory_core.clock import Clock, ensure_aware
from memory_core.engine import MemoryCore
from memory_core.entries import MemoryEntry
from memory_core.scope import MAIN, ScopeKey
from memory_core.scoring import Status, projection
from tui.actions import Action, Kind, perform
from tui.commands import ChatmemCommands
from tui.loading import HEAD_BYTES, EntriesSnapshot, EntryLoader
from tui.messages import (
    ActionDone,
    ActivityLoaded,
    ArchiveLoaded,
    DetailLoaded,
    EntriesLoaded,
    RankingsReady,
    RecallDone,
    ScopesLoaded,
    WorkspaceChanged,
)
from tui.model import (
    COLUMNS,
    ColumnKey,
    RankingModel,
    RankingView,
    RankRow,
    RowFilter,
    SortSpec,
    StatusCounts,
    counts_at,
)
from tui.overview import ScopeCounts, archive_state, scope_counts
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.watch import compare, take_stamp
from tui.widgets.activity import FEED_LIMIT, ActivityFeed, recent_text
from tui.widgets.archive import ArchivePane, ArchiveSummary
from tui.widgets.detail import PROJECTION_DAYS, DetailPane
from tui.widgets.rankings import RankingsPane
from tui.widgets.ranktable import RankTable
from tui.widgets.recall import RecallPane
from tui.widgets.scopes import ScopesTable

POLL_SECONDS = 0.5
PaneT = TypeVar("PaneT", bound=Widget)


class ChatmemApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "chatmem"
    COMMANDS = App.COMMANDS | {ChatmemCommands}
    TABS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("tab-rankings", "Rankings"),
        ("tab-entry", "Entry"),
        ("tab-archive", "Archive"),
        ("tab-recall", "Recall"),
        ("tab-activity", "Activity"),
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("slash", "focus_filter", "Filter"),
        Binding("s", "sort_next", "Sort"),
        Binding("r", "sort_reverse", "Reverse"),
        Binding("plus,equals_sign", "what_if(1)", "+1d"),
        Binding("minus", "what_if(-1)", "-1d"),
        Binding("greater_than_sign", "what_if(30)", "+30d"),
        Binding("less_than_sign", "what_if(-30)", "-30d", show=False),
        Binding("0", "what_if_reset", "Now", show=False),
        Binding("p", "toggle_pin", "Pin"),
        Binding("a", "toggle_archive", "Archive"),
        Binding("x", "forget", "Forget"),
        Binding("e", "edit", "Edit"),
        Binding("C", "consolidate", "Consolidate"),
        Binding("ctrl+r", "refresh", "Refresh", show=False),
        *[
            Binding(str(n), f"show_tab('{tab}')", title, show=False)
            for n, (tab, title) in enumerate(TABS, start=1)
        ],
    ]

    def __init__(
        self,
        core: MemoryCore,
        *,
        clock: Clock | None = None,
        scope: ScopeKey | None = None,
        manage_core: bool = False,
        poll_seconds: float = POLL_SECONDS,
        head_bytes: int = HEAD_BYTES,
    ) -> None:
        super().__init__()
        self.core = core
        self.clock = clock
        self.manage_core = manage_core
        self.poll_seconds = poll_seconds
        self.zone = core.tz
        self.loader = EntryLoader(core, head_bytes)
        self.scope: ScopeKey = scope or MAIN
        self.known_scopes: list[ScopeKey] = [self.scope]
        self.scope_rows: list[ScopeCounts] = []
        self.offset_days = 0
        self.sort = SortSpec()
        self.row_filter = RowFilter()
        self.snapshot: EntriesSnapshot | None = None
        self.model: RankingModel | None = None
        self.view: RankingView | None = None
        self.current_id: str | None = None
        self.activity: list[AuditRecord] = []
        self._generation = 0
        self._building = False
        self._others_started = False
        self._whole_requested = False
        self._baseline: tuple[Sequence[MemoryEntry], StatusCounts, datetime] | None = None
        """Counts at offset 0 of the current entries (what a what-if is compared with)."""

    # --- layout ---------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Static("Scopes  (Enter chooses)", classes="pane-title")
                yield ScopesTable(id="scopes")
                yield Static("Archive state", classes="pane-title")
                yield ArchiveSummary(id="archive-summary")
                yield Static("Recent activity  (5: all)", classes="pane-title")
                yield Static(id="recent-activity")
            with TabbedContent(id="tabs", initial="tab-rankings"):
                with TabPane("Rankings", id="tab-rankings"):
                    yield RankingsPane(self.core.policy, id="rankings-pane")
                with TabPane("Entry", id="tab-entry"):
                    yield DetailPane(self.zone, self.core.policy, id="detail-pane")
                with TabPane("Archive", id="tab-archive"):
                    yield ArchivePane(self.zone, id="archive-pane")
                with TabPane("Recall", id="tab-recall"):
                    yield RecallPane(id="recall-pane")
                with TabPane("Activity", id="tab-activity"):
                    yield ActivityFeed(self.zone, id="activity")
        yield Footer()

    async def on_mount(self) -> None:
        if self.manage_core:
            await self.core.start()
        self._update_title()
        # Rankings first: the other panes load once the first rankings are on screen, so
        # a large scope's first page is not slowed down by work nobody is looking at yet.
        self.load_entries(self.scope)
        self.watch_workspace()
        self.query_one(RankTable).focus()

    async def on_unmount(self) -> None:
        if self.manage_core:
            await self.core.close()

    def now(self) -> datetime:
        return ensure_aware((self.clock or self.core.now)()).replace(microsecond=0)

    def _update_title(self) -> None:
        when = self.now().astimezone(self.zone).strftime("%Y-%m-%d %H:%M")
        self.sub_title = f"{self.core.workspace.root.name} · scope {self.scope} · {when}"

    # --- loading --------------------------------------------------------------------
    def reload_all(self) -> None:
        self.load_entries(self.scope)
        self.load_others()

    def load_others(self) -> None:
        self._others_started = True
        self.load_scopes()
        self.load_archive(self.scope)
        self.load_activity(self.scope, 0)

    @work(group="scopes", exclusive=True, exit_on_error=False, description="scope counts")
    async def load_scopes(self) -> None:
        self.post_message(ScopesLoaded(await scope_counts(self.core, self.loader, self.now())))

    @work(group="entries", exclusive=True, exit_on_error=False, description="entries")
    async def load_entries(self, scope: ScopeKey, *, whole: bool = False) -> None:
        """The head of a large file first; the whole file when asked (after the head is
        drawn) or when the file is small."""
        if not whole:
            self._whole_requested = False
            head = await self.loader.head(scope)
            if head is not None:
                self.post_message(EntriesLoaded(head))
                return
        entries = await self.loader.load(scope)
        self.post_message(EntriesLoaded(EntriesSnapshot(scope, entries, True)))

    @work(group="archive", exclusive=True, exit_on_error=False, description="archive state")
    async def load_archive(self, scope: ScopeKey) -> None:
        self.post_message(
            ArchiveLoaded(await archive_state(self.core, self.loader, scope, self.now()))
        )

    @work(group="activity", exclusive=True, exit_on_error=False, description="activity")
    async def load_activity(self, scope: ScopeKey, after_id: int) -> None:
        if self.core.db is None:
            return
        records = await self.core.audit.recent(scope, limit=FEED_LIMIT, after_id=after_id)
        self.post_message(ActivityLoaded(scope, records))

    @work(group="watch", exclusive=True, exit_on_error=False, description="watch")
    async def watch_workspace(self) -> None:
        """Poll for changes by other processes; never touches a widget."""
        previous = await take_stamp(self.core)
        while True:
            await asyncio.sleep(self.poll_seconds)
            current = await take_stamp(self.core)
            changes = compare(previous, current)
            previous = current
            if changes:
                self.post_message(WorkspaceChanged(changes))

    def request_rankings(self, *, rebuild: bool = False) -> None:
        """Recompute the rankings view; a rebuild (new entries, new instant) wins over a re-sort."""
        if self.snapshot is None:
            return
        self._generation += 1
        params = (self.sort, self.row_filter)
        if rebuild or self.model is None or self._building:
            self._building = True
            self.build_model(self.snapshot, self.offset_days, params, self._generation)
        else:
            self.refresh_view(self.model, params, self._generation)

    @work(group="rankings", exclusive=True, exit_on_error=False, description="rankings model")
    async def build_model(
        self,
        snapshot: EntriesSnapshot,
        offset_days: int,
        params: tuple[SortSpec, RowFilter],
        generation: int,
    ) -> None:
        base, policy = self.now(), self.core.policy
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
        self.post_message(RankingsReady(model, view, generation))
        if snapshot.complete:
            await asyncio.to_thread(model.warm)

    @work(group="rankings", exclusive=True, exit_on_error=False, description="rankings view")
    async def refresh_view(
        self, model: RankingModel, params: tuple[SortSpec, RowFilter], generation: int
    ) -> None:
        view = await asyncio.to_thread(model.view, *params)
        self.post_message(RankingsReady(model, view, generation))

    @work(group="detail", exclusive=True, exit_on_error=False, description="entry detail")
    async def load_detail(self, scope: ScopeKey, row: RankRow, when: datetime) -> None:
        history: list[AuditRecord] = []
        if self.core.db is not None:
            history = await self.core.audit.history(scope, row.entry.id)
        points = projection(row.entry, when, PROJECTION_DAYS, self.core.policy)
        self.post_message(DetailLoaded(scope, row, history, points, when))

    @work(group="recall", exclusive=True, exit_on_error=False, description="recall")
    async def run_recall(self, scope: ScopeKey, query: str) -> None:
        hits = await self.core.search(scope, query, limit=10)
        injection = await self.core.recall(scope, query, now=self.now())
        budget = self.core.config.recall.token_budget
        self.post_message(RecallDone(scope, query, hits, injection, budget))

    @work(group="action", exit_on_error=False, description="action")
    async def apply_action(self, action: Action) -> None:
        self.post_message(ActionDone(await perform(self.core, action)))

    # --- results --------------------------------------------------------------------
    def pane(self, kind: type[PaneT]) -> PaneT | None:
        """The pane of that type, or None while the app is shutting down."""
        try:
            return self.query_one(kind)
        except NoMatches:
            return None

    def on_scopes_loaded(self, message: ScopesLoaded) -> None:
        self.scope_rows = message.counts
        self.known_scopes = [row.scope for row in message.counts]
        if table := self.pane(ScopesTable):
            table.show(message.counts, self.scope)

    def on_entries_loaded(self, message: EntriesLoaded) -> None:
        if message.snapshot.scope != self.scope:
            return
        self.snapshot = message.snapshot
        self.request_rankings(rebuild=True)

    def on_rankings_ready(self, message: RankingsReady) -> None:
        if message.generation != self._generation:
            return
        self._building = False
        self.model, self.view = message.model, message.view
        counts = message.model.baseline or message.model.counts()
        self._baseline = (message.model.entries, counts, message.model.base)
        position = None if self.current_id is None else self.model.index_of(self.current_id)
        if position is None or position not in set(message.view.indices):
            first = message.view.ids(1)
            self.current_id = first[0] if first else None
        if pane := self.pane(RankingsPane):
            pane.show(message.view, str(self.zone), self.current_id)
            self._load_current_detail()
        if not message.view.complete and not self._whole_requested:
            self._whole_requested = True
            self.call_after_refresh(self.load_entries, self.scope, whole=True)
        if not self._others_started:
            self.call_after_refresh(self.load_others)

    def on_detail_loaded(self, message: DetailLoaded) -> None:
        pane = self.pane(DetailPane)
        if pane and message.scope == self.scope and message.row.entry.id == self.current_id:
            pane.show(message.row, message.history, message.projection, message.when)

    def on_archive_loaded(self, message: ArchiveLoaded) -> None:
        if message.state.scope != self.scope:
            return
        if (summary := self.pane(ArchiveSummary)) and (pane := self.pane(ArchivePane)):
            summary.show(message.state, self.zone)
            pane.show(message.state)

    def on_activity_loaded(self, message: ActivityLoaded) -> None:
        if message.scope != self.scope:
            return
        seen = {r.id for r in message.records}
        merged = message.records + [r for r in self.activity if r.id not in seen]
        self.activity = sorted(merged, key=lambda r: -r.id)[:FEED_LIMIT]
        if feed := self.pane(ActivityFeed):
            feed.show(self.activity)
            self.query_one("#recent-activity", Static).update(recent_text(self.activity, self.zone))

    def on_recall_done(self, message: RecallDone) -> None:
        pane = self.pane(RecallPane)
        if pane and message.scope == self.scope:
            pane.show(message.query, message.hits, message.injection, message.budget)

    def on_action_done(self, message: ActionDone) -> None:
        self.notify(message.summary, title="done")
        self.reload_all()

    def on_workspace_changed(self, message: WorkspaceChanged) -> None:
        changes = message.changes
        if changes.long_term or changes.files or changes.database:
            self.load_scopes()
        if self.scope.value in changes.long_term:
            self.load_entries(self.scope)
        self.load_archive(self.scope)
        if changes.audit or changes.database:
            self.load_activity(self.scope, self.activity[0].id if self.activity else 0)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title="error", severity="error")
            if event.worker.group == "rankings":
                self._building = False
            if not self._others_started:
                self.load_others()

    # --- pane requests --------------------------------------------------------------
    @on(ScopesTable.RowSelected, "#scopes")
    def _scope_selected(self, event: ScopesTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.choose_scope(ScopeKey(event.row_key.value))

    @on(RankingsPane.SortRequested)
    def _sort_requested(self, message: RankingsPane.SortRequested) -> None:
        self.sort_by(message.key)

    @on(RankingsPane.FilterChanged)
    def _filter_changed(self, message: RankingsPane.FilterChanged) -> None:
        self.row_filter = message.filter
        self.request_rankings()

    @on(RankingsPane.EntryHighlighted)
    def _entry_highlighted(self, message: RankingsPane.EntryHighlighted) -> None:
        if message.entry_id != self.current_id:
            self.current_id = message.entry_id
            self._load_current_detail()

    @on(RankingsPane.EntryChosen)
    def _entry_chosen(self, message: RankingsPane.EntryChosen) -> None:
        self.current_id = message.entry_id
        self._load_current_detail()
        self.show_tab("tab-entry")

    @on(RecallPane.QuerySubmitted)
    def _recall(self, message: RecallPane.QuerySubmitted) -> None:
        self.run_recall(self.scope, message.query)

    def _load_current_detail(self) -> None:
        row = self.current_row()
        if row is not None and self.model is not None:
            self.load_detail(self.scope, row, self.model.when)

    def current_row(self) -> RankRow | None:
        if self.model is None or self.current_id is None:
            return None
        return self.model.row_for(self.current_id)

    # --- navigation -----------------------------------------------------------------
    def choose_scope(self, scope: ScopeKey) -> None:
        if scope == self.scope:
            return
        self.scope = scope
        self.snapshot = self.model = self.view = None
        self.current_id = None
        self.activity = []
        self._update_title()
        self.query_one(ScopesTable).show(self.scope_rows, scope)
        self.load_entries(scope)
        self.load_archive(scope)
        self.load_activity(scope, 0)

    def show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def sort_by(self, key: ColumnKey) -> None:
        self.sort = self.sort.toggled(key)
        self.request_rankings()

    def action_show_tab(self, tab: str) -> None:
        self.show_tab(tab)

    def action_focus_filter(self) -> None:
        self.show_tab("tab-rankings")
        self.query_one("#rank-filter", Input).focus()

    def action_sort_next(self) -> None:
        keys = [c.key for c in COLUMNS]
        self.sort_by(keys[(keys.index(self.sort.key) + 1) % len(keys)])

    def action_sort_reverse(self) -> None:
        self.sort = SortSpec(self.sort.key, not self.sort.descending)
        self.request_rankings()

    def action_what_if(self, days: int) -> None:
        self.offset_days = max(0, self.offset_days + days)
        self.request_rankings(rebuild=True)

    def action_what_if_reset(self) -> None:
        self.offset_days = 0
        self.request_rankings(rebuild=True)

    def action_refresh(self) -> None:
        self.reload_all()

    # --- actions (confirmed, then through the core) ---------------------------------
    def _confirm(self, action: Action) -> None:
        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.apply_action(action)

        self.push_screen(
            ConfirmScreen(action.question(), action.detail(), danger=action.danger), answered
        )

    def _entry_action(self, choose: Callable[[RankRow], Kind]) -> None:
        row = self.current_row()
        if row is None:
            self.notify("highlight an entry in Rankings first", severity="warning")
            return
        self._confirm(Action(choose(row), self.scope, row.entry.id, row.entry.content))

    def action_toggle_pin(self) -> None:
        self._entry_action(lambda row: Kind.UNPIN if row.entry.pinned else Kind.PIN)

    def action_toggle_archive(self) -> None:
        self._entry_action(
            lambda row: (
                Kind.RESTORE
                if row.entry.archived or row.status is not Status.ACTIVE
                else Kind.ARCHIVE
            )
        )

    def action_forget(self) -> None:
        self._entry_action(lambda row: Kind.FORGET)

    def action_consolidate(self) -> None:
        self._confirm(Action(Kind.CONSOLIDATE, self.scope))

    def action_edit(self) -> None:
        row = self.current_row()
        if row is None:
            self.notify("highlight an entry in Rankings first", severity="warning")
            return
        entry = row.entry

        def edited(content: str | None) -> None:
            if content:
                self.apply_action(Action(Kind.EDIT, self.scope, entry.id, entry.content, content))

        self.push_screen(EditScreen(entry.id, entry.content), edited)


def make_app(
    core: MemoryCore,
    *,
    clock: Clock | None = None,
    scope: ScopeKey | None = None,
    manage_core: bool = False,
    poll_seconds: float = POLL_SECONDS,
    head_bytes: int = HEAD_BYTES,
) -> ChatmemApp:
    """The one factory the CLI, the tests and the bench use.

    `clock` fixes the app's "now" (snapshots, tests); by default it is the core's clock.
    `scope` is the scope shown first (default `main`).
    With `manage_core` the app opens the core when it mounts and closes it on exit (for
    runners that start the app in their own event loop, like snapshot tests).
    """
    return ChatmemApp(
        core,
        clock=clock,
        scope=scope,
        manage_core=manage_core,
        poll_seconds=poll_seconds,
        head_bytes=head_bytes,
    )


__all__ = ["ChatmemApp", "make_app"]
