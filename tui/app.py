"""The chatmem TUI: live inspection of a workspace a bot may be using at the same time.

State lives here (scope, what-if offset, sort, filter); workers read through the core and
post messages; message handlers hand the results to the panes. The reading workers are in
`app_loads`, the rankings pipeline in `app_rankings`, the writes (confirmed, through the
core's methods) in `app_actions`, the bindings and the help written from them in `keys`.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, TypeVar

from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import (
    Footer,
    Header,
    Input,
    Select,
    Static,
    TabbedContent,
    TabPane,
    Tabs,
)
from textual.worker import Worker, WorkerState

from memory_core.base.clock import Clock, Sleep, ensure_aware, system_sleep
from memory_core.base.records import AuditRecord
from memory_core.base.scope import MAIN, ScopeKey, printable_key
from memory_core.base.wording import counted
from memory_core.engine import MemoryCore
from tui import app_actions, keys
from tui.actions import Action, Kind
from tui.app_loads import Loads
from tui.app_rankings import Rankings
from tui.commands import ChatmemCommands
from tui.loading import HEAD_BYTES, EntryLoader
from tui.messages import (
    ActionDone,
    ActivityLoaded,
    ArchiveLoaded,
    DetailLoaded,
    EntriesLoaded,
    RankingsReady,
    RecallDone,
    ScopesLoaded,
    SnapshotLoaded,
    WorkspaceChanged,
)
from tui.model import ColumnKey, RankingModel, RankingView, RankRow
from tui.overview import ScopeCounts
from tui.screens.help import HelpScreen
from tui.widgets.activity import ActivityFeed, merged_feed, recent_text
from tui.widgets.archive import ArchivePane, ArchiveSummary
from tui.widgets.detail import DetailPane
from tui.widgets.rankings import LOADING, RankingsPane
from tui.widgets.ranktable import RankTable
from tui.widgets.recall import RecallPane
from tui.widgets.scopes import ScopesTable
from tui.widgets.snapshot import SnapshotPane

POLL_SECONDS = 0.5
NARROW = 130
"""Below this many columns the sidebar takes a share of the width instead of its own."""
COMPACT = 100
"""Below this many columns the sidebar starts hidden (`b` shows it), so that the rankings
keep room for what each memory says."""
PaneT = TypeVar("PaneT", bound=Widget)


class ChatmemApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "chatmem"
    COMMANDS = App.COMMANDS | {ChatmemCommands}
    TABS: ClassVar[tuple[tuple[str, str], ...]] = keys.TABS
    BINDINGS: ClassVar[list[BindingType]] = keys.BINDINGS
    MAIN_WIDGETS: ClassVar[dict[str, str]] = keys.MAIN_WIDGETS

    def __init__(
        self,
        core: MemoryCore,
        *,
        clock: Clock | None = None,
        scope: ScopeKey | None = None,
        manage_core: bool = False,
        poll_seconds: float = POLL_SECONDS,
        head_bytes: int = HEAD_BYTES,
        sleep: Sleep = system_sleep,
    ) -> None:
        super().__init__()
        self.core = core
        self.clock = clock
        self.manage_core = manage_core
        self.poll_seconds = poll_seconds
        self.sleep = sleep
        """Waits `poll_seconds` between two looks for other processes' changes."""
        self.zone = core.tz
        self.loader = EntryLoader(core, head_bytes)
        self.scope: ScopeKey = scope or MAIN
        self.known_scopes: list[ScopeKey] = [self.scope]
        self.scope_rows: list[ScopeCounts] = []
        self.rankings = Rankings(self)
        self.current_id: str | None = None
        self.activity: list[AuditRecord] = []
        self.recall_query: str | None = None
        """The last Recall query: run again when the scope changes."""
        self._sidebar_wanted: bool | None = None
        """Shown or hidden by `b`; None: by the terminal's width."""
        self.last_forgotten: Action | None = None
        """The forget done last here, which `u` undoes (None once undone)."""
        self._quarantine_told: dict[ScopeKey, int] = {}
        self.loads = Loads(self)

    # --- layout ---------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Static("Scopes  (Enter chooses)", classes="pane-title")
                yield ScopesTable(id="scopes")
                yield Static("Archive state", classes="pane-title")
                yield ArchiveSummary(LOADING, id="archive-summary")
                yield Static("Recent activity  (5: all)", classes="pane-title recent")
                yield Static(LOADING, id="recent-activity", classes="recent")
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
                with TabPane("Snapshot", id="tab-snapshot"):
                    yield SnapshotPane(id="snapshot-pane")
        yield Footer(compact=True)

    async def on_mount(self) -> None:
        if self.manage_core:
            await self.core.start()
        self._update_title()
        self.query_one(RankingsPane).waiting_for(str(self.scope))
        # Rankings first: the other panes load once the first rankings are on screen, so
        # a large scope's first page is not slowed down by work nobody is looking at yet.
        self.loads.entries(self.scope)
        self.loads.watch()
        self.query_one(RankTable).focus()

    async def on_unmount(self) -> None:
        if self.manage_core:
            await self.core.close()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")
        self._place_sidebar()

    def _place_sidebar(self) -> None:
        wanted = self._sidebar_wanted
        try:
            sidebar = self.query_one("#sidebar")
        except NoMatches:  # shutting down
            return
        sidebar.display = wanted if wanted is not None else self.size.width >= COMPACT

    def action_toggle_sidebar(self) -> None:
        self._sidebar_wanted = not self.query_one("#sidebar").display
        self._place_sidebar()

    def now(self) -> datetime:
        return ensure_aware((self.clock or self.core.now)()).replace(microsecond=0)

    def _update_title(self) -> None:
        when = self.now().astimezone(self.zone).strftime("%Y-%m-%d %H:%M")
        self.sub_title = (
            f"{self.core.workspace.root.name} · scope {printable_key(self.scope)} · {when}"
        )

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
        self.rankings.entries_loaded(message.snapshot)

    def on_rankings_ready(self, message: RankingsReady) -> None:
        if not self.rankings.accept(message):
            return
        view = message.view
        position = None if self.current_id is None else message.model.index_of(self.current_id)
        if position is None or position not in set(view.indices):
            first = view.ids(1)
            self.current_id = first[0] if first else None
        if pane := self.pane(RankingsPane):
            try:
                pane.show(view, str(self.zone), self.current_id)
            except NoMatches:
                return  # a load that ends while the app closes: its widgets are gone
            self._load_current_detail()
        if not view.complete:
            self.loads.whole_after_head()
        if not self.loads.others_started:
            self.call_after_refresh(self.loads.others)

    def on_detail_loaded(self, message: DetailLoaded) -> None:
        pane = self.pane(DetailPane)
        if pane and message.scope == self.scope and message.row.entry.id == self.current_id:
            pane.show(message.row, message.history, message.projection, message.when)

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        if message.scope == self.scope and (pane := self.pane(SnapshotPane)):
            pane.show(message.snapshot, message.path, message.enabled)
            pane.show_entities(message.entities)

    def on_archive_loaded(self, message: ArchiveLoaded) -> None:
        if message.state.scope != self.scope:
            return
        if (summary := self.pane(ArchiveSummary)) and (pane := self.pane(ArchivePane)):
            summary.show(message.state, self.zone)
            pane.show(message.state)
        self._tell_quarantine(
            message.state.scope, len(message.state.quarantined), message.state.path
        )

    def _tell_quarantine(self, scope: ScopeKey, count: int, path: str) -> None:
        """Say once (per scope and count) that part of a file could not be read: the
        sidebar that counts it may be hidden on a narrow terminal, and a person who
        thinks a memory vanished should learn that its text is kept."""
        if count and self._quarantine_told.get(scope) != count:
            self.notify(
                f"{counted(count, 'block')} of {path} could not be read; they are kept verbatim in the "
                "file (Archive tab, key 3)",
                title=f"quarantined in scope {scope}",
                severity="warning",
                markup=False,
            )
        self._quarantine_told[scope] = count

    def on_activity_loaded(self, message: ActivityLoaded) -> None:
        if message.scope != self.scope:
            return
        self.activity = merged_feed(message.records, self.activity)
        if feed := self.pane(ActivityFeed):
            feed.show(self.activity)
            self.query_one("#recent-activity", Static).update(recent_text(self.activity, self.zone))

    def on_recall_done(self, message: RecallDone) -> None:
        pane = self.pane(RecallPane)
        if pane and message.scope == self.scope:
            pane.show(message.query, message.hits, message.injection, message.budget, message.scope)

    def on_workspace_changed(self, message: WorkspaceChanged) -> None:
        self.loads.changed(message.changes)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title="error", severity="error")
            if event.worker.group == "rankings":
                self.rankings.failed()
            if not self.loads.others_started:
                self.loads.others()

    # --- pane requests --------------------------------------------------------------
    @on(ScopesTable.RowSelected, "#scopes")
    def _scope_selected(self, event: ScopesTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.choose_scope(ScopeKey(event.row_key.value))

    @on(RankingsPane.SortRequested)
    def _sort_requested(self, message: RankingsPane.SortRequested) -> None:
        self.rankings.sort_by(message.key)

    @on(RankingsPane.FilterChanged)
    def _filter_changed(self, message: RankingsPane.FilterChanged) -> None:
        self.rankings.filter_by(message.filter)

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
        self.recall_query = message.query
        self.loads.recall(self.scope, message.query)

    def _load_current_detail(self) -> None:
        row = self.current_row()
        if row is not None and self.model is not None:
            self.loads.detail(self.scope, row, self.model.when)

    def current_row(self) -> RankRow | None:
        if self.model is None or self.current_id is None:
            return None
        return self.model.row_for(self.current_id)

    @property
    def model(self) -> RankingModel | None:
        return self.rankings.model

    @property
    def view(self) -> RankingView | None:
        return self.rankings.view

    # --- navigation -----------------------------------------------------------------
    def choose_scope(self, scope: ScopeKey) -> None:
        if scope == self.scope:
            return
        self.scope = scope
        self.rankings.reset()
        self.current_id = None
        self.activity = []
        self._update_title()
        self.query_one(ScopesTable).show(self.scope_rows, scope)
        self.query_one(RankingsPane).waiting_for(str(scope))
        self.loads.scope_chosen(scope)
        if self.recall_query is not None:
            # The hits on screen belong to the old scope: never leave them standing.
            self.query_one(RecallPane).rerunning(self.recall_query, scope)
            self.loads.recall(scope, self.recall_query)

    def show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        self.focus_tab_widget(tab)

    def focus_tab_widget(self, tab: str) -> None:
        self.query_one(self.MAIN_WIDGETS[tab]).focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """A tab chosen with the mouse: focus its main widget unless the user is moving
        along the tab bar (the widget that had focus is hidden now)."""
        tab, focused = event.pane.id, self.focused
        if tab not in self.MAIN_WIDGETS or isinstance(focused, Tabs):
            return
        if focused is None or event.pane not in focused.ancestors:
            self.focus_tab_widget(tab)

    def action_show_tab(self, tab: str) -> None:
        self.show_tab(tab)

    def action_focus_filter(self) -> None:
        self.show_tab("tab-rankings")
        self.query_one("#rank-filter", Input).focus()

    def action_focus_recall(self) -> None:
        self.show_tab("tab-recall")
        self.query_one("#recall-query", Input).focus()

    def action_leave_box(self) -> None:
        """Escape: out of a text box or menu, back to the tab's main widget."""
        if isinstance(self.focused, Input | Select | Tabs):
            self.focus_tab_widget(self.query_one(TabbedContent).active)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(keys.help_sections(self.get_key_display)))

    def action_refresh(self) -> None:
        self.loads.everything()

    # --- rankings and what-if (nothing written) -------------------------------------
    def sort_by(self, key: ColumnKey) -> None:
        self.rankings.sort_by(key)

    def action_sort_next(self) -> None:
        self.rankings.sort_next()

    def action_sort_reverse(self) -> None:
        self.rankings.reverse()

    def action_what_if(self, days: int) -> None:
        self.rankings.what_if(days)

    def action_what_if_reset(self) -> None:
        self.rankings.what_if(None)

    # --- writes: confirmed in a modal, then through the core ------------------------
    def action_toggle_pin(self) -> None:
        app_actions.entry_action(self, app_actions.toggle_pin)

    def action_toggle_archive(self) -> None:
        app_actions.entry_action(self, app_actions.toggle_archive)

    def action_forget(self) -> None:
        app_actions.entry_action(self, app_actions.forget)

    def action_edit(self) -> None:
        app_actions.edit(self)

    def action_consolidate(self) -> None:
        app_actions.confirm(self, Action(Kind.CONSOLIDATE, self.scope))

    def action_undo_forget(self) -> None:
        app_actions.undo_forget(self)

    def on_action_done(self, message: ActionDone) -> None:
        app_actions.done(self, message)
        self.loads.everything()


def make_app(
    core: MemoryCore,
    *,
    clock: Clock | None = None,
    scope: ScopeKey | None = None,
    manage_core: bool = False,
    poll_seconds: float = POLL_SECONDS,
    head_bytes: int = HEAD_BYTES,
    sleep: Sleep = system_sleep,
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
        sleep=sleep,
    )


__all__ = ["ChatmemApp", "make_app"]
