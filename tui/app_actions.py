"""The app's writes: each is confirmed in a modal, then done by the core's own method
(which takes the scope's locks, writes atomically and audits with source 'tui')."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from textual.binding import Binding
from textual.worker import Worker

from memory_core.longterm.scoring import Status
from tui.actions import Action, Kind, perform
from tui.app_rankings import Rankings
from tui.host import CoreView, Dialogs
from tui.messages import ActionDone
from tui.model import RankRow
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen


class ActionsHost(CoreView, Dialogs, Protocol):
    """What a write uses of the app: the highlighted row, the what-if offset (a what-if
    view is read-only) and the forget that `u` undoes."""

    rankings: Rankings
    last_forgotten: Action | None

    def current_row(self) -> RankRow | None: ...


def toggle_pin(row: RankRow) -> Kind:
    return Kind.UNPIN if row.entry.pinned else Kind.PIN


def toggle_archive(row: RankRow) -> Kind:
    archived = row.entry.archived is not None or row.status is not Status.ACTIVE
    return Kind.RESTORE if archived else Kind.ARCHIVE


def forget(row: RankRow) -> Kind:
    return Kind.FORGET


def done(app: ActionsHost, message: ActionDone) -> None:
    """Say what was done; after a forget, remember it (for `u`) and say how to undo it."""
    action = message.action
    if action is not None and action.kind is Kind.FORGET:
        app.last_forgotten = action
        undo = app.get_key_display(Binding("u", ""))
        app.notify(
            f"{message.summary}\nPress {undo} to restore it (or ctrl+p: Undo forget).",
            title="forgotten",
            timeout=15,
            markup=False,
        )
    else:
        app.notify(message.summary, title="done", markup=False)


def run(app: ActionsHost, action: Action) -> Worker[None]:
    async def work() -> None:
        app.post_message(ActionDone(await perform(app.core, action), action))

    worker: Worker[None] = app.run_worker(
        work, group="action", exit_on_error=False, description=action.kind.value
    )
    return worker


def refuses(app: ActionsHost) -> bool:
    """True (and says why) while the rankings show a what-if instant.

    The screen then shows scores, statuses and even which action a key would take
    (archive or restore) as of a day that has not come; writing now from that picture
    would do something else than what it shows, so the view stays read-only."""
    days = app.rankings.offset_days
    if not days:
        return False
    app.notify(
        f"the what-if view (+{days} d) is read-only: press 0 to go back to now first",
        title="nothing changed",
        severity="warning",
    )
    return True


def confirm(app: ActionsHost, action: Action) -> None:
    """Ask first; do it only on yes."""
    if refuses(app):
        return

    def answered(confirmed: bool | None) -> None:
        if confirmed:
            run(app, action)

    app.push_screen(
        ConfirmScreen(action.question(), action.detail(), danger=action.danger), answered
    )


def entry_action(app: ActionsHost, choose: Callable[[RankRow], Kind]) -> None:
    """Confirm, then apply `choose(row)` to the highlighted entry."""
    if refuses(app):
        return
    row = app.current_row()
    if row is None:
        app.notify("highlight an entry in Rankings first", severity="warning")
        return
    confirm(app, Action(choose(row), app.scope, row.entry.id, row.entry.content))


def undo_forget(app: ActionsHost) -> None:
    """Bring back the entry forgotten last in this session (through `core.memories.restore`, which
    takes it from the scope's kept forgotten entries). No confirmation: it undoes one."""
    forgotten = app.last_forgotten
    if forgotten is None:
        app.notify("nothing was forgotten here to restore", severity="warning")
        return
    app.last_forgotten = None
    run(app, Action(Kind.RESTORE, forgotten.scope, forgotten.entry_id, forgotten.content))


def edit(app: ActionsHost) -> None:
    """The edit modal is the confirmation: Save writes, Escape does nothing."""
    if refuses(app):
        return
    row = app.current_row()
    if row is None:
        app.notify("highlight an entry in Rankings first", severity="warning")
        return
    entry = row.entry

    def edited(content: str | None) -> None:
        if content:
            run(app, Action(Kind.EDIT, app.scope, entry.id, entry.content, content))

    app.push_screen(EditScreen(entry.id, entry.content), edited)
