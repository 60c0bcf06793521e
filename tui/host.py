"""What the app's parts use of the app, as Protocols.

The app (tui/app.py) builds its parts (the loads, the rankings pipeline, the writes, the
command palette) and hands each itself; a part that imported the app for its type would
close a circle. Each part names what it needs here instead, and the app provides it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TypeVar

from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType
from textual.widget import AwaitMount
from textual.worker import Worker, WorkType

from memory_core.base.clock import Sleep
from memory_core.base.records import AuditRecord
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from tui.loading import EntryLoader

ResultT = TypeVar("ResultT")
ScreenT = TypeVar("ScreenT")


class Workers(Protocol):
    """Textual's side: background work whose results come back as messages."""

    def post_message(self, message: Message) -> bool: ...

    def run_worker(
        self,
        work: WorkType[ResultT],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[ResultT]: ...


class CoreView(Workers, Protocol):
    """The core, the scope on screen and the app's clock (what-if moves it)."""

    core: MemoryCore
    scope: ScopeKey

    def now(self) -> datetime: ...


class LoadsHost(CoreView, Protocol):
    """What the loaders read: the entry loader, the feed so far, the poll interval and
    the sleep between two polls (injected, so tests drive it)."""

    loader: EntryLoader
    activity: list[AuditRecord]
    poll_seconds: float
    sleep: Sleep

    def call_after_refresh(
        self, callback: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> bool: ...


class Dialogs(Protocol):
    """Textual's side of a write: notices, modals and the keys they name."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def push_screen(
        self,
        screen: Screen[ScreenT],
        callback: ScreenResultCallbackType[ScreenT] | None = None,
    ) -> AwaitMount: ...

    def get_key_display(self, binding: Binding) -> str: ...
