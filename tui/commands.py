"""Command palette entries (ctrl+p): every action, what-if step, sort, scope and tab."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from memory_core.base.scope import ScopeKey, printable_key
from tui.model import COLUMNS, ColumnKey

Command = tuple[str, Callable[[], object], str]


class CommandsHost(Protocol):
    """What the palette offers of the app: its actions, sorts, tabs and known scopes."""

    TABS: ClassVar[tuple[tuple[str, str], ...]]
    known_scopes: list[ScopeKey]

    def action_toggle_pin(self) -> None: ...
    def action_toggle_archive(self) -> None: ...
    def action_forget(self) -> None: ...
    def action_undo_forget(self) -> None: ...
    def action_edit(self) -> None: ...
    def action_consolidate(self) -> None: ...
    def action_what_if(self, days: int) -> None: ...
    def action_what_if_reset(self) -> None: ...
    def action_refresh(self) -> None: ...
    def sort_by(self, key: ColumnKey) -> None: ...
    def show_tab(self, tab: str) -> None: ...
    def choose_scope(self, scope: ScopeKey) -> None: ...


def app_commands(app: CommandsHost) -> list[Command]:
    commands: list[Command] = [
        ("Pin / unpin the highlighted entry", app.action_toggle_pin, "p"),
        ("Archive / restore the highlighted entry", app.action_toggle_archive, "a"),
        ("Forget the highlighted entry", app.action_forget, "x: deleted from the file"),
        ("Undo forget: restore the entry forgotten last", app.action_undo_forget, "u"),
        ("Edit the highlighted entry's content", app.action_edit, "e"),
        ("Run consolidation now", app.action_consolidate, "C: decay, archive, forget"),
        ("What-if: one day later", lambda: app.action_what_if(1), "+"),
        ("What-if: one day earlier", lambda: app.action_what_if(-1), "-"),
        ("What-if: 30 days later", lambda: app.action_what_if(30), ">"),
        ("What-if: 180 days later", lambda: app.action_what_if(180), ""),
        ("What-if: back to now", app.action_what_if_reset, "0"),
        ("Refresh everything", app.action_refresh, "ctrl+r"),
    ]
    for column in COLUMNS:
        commands.append(
            (f"Sort rankings by {column.title}", partial(app.sort_by, column.key), "again reverses")
        )
    for tab, title in app.TABS:
        commands.append((f"Show {title}", partial(app.show_tab, tab), ""))
    for scope in app.known_scopes:
        commands.append((f"Scope: {printable_key(scope)}", partial(app.choose_scope, scope), ""))
    return commands


class ChatmemCommands(Provider):
    def _commands(self) -> list[Command]:
        return app_commands(cast(CommandsHost, self.app))

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            yield DiscoveryHit(title, callback, help=help_text or None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(title), callback, text=title, help=help_text or None
                )
