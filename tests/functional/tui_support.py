"""What the TUI tests share: the demo workspace made once and copied per test, entry ids
fixed so screens compare across runs, and `running`, the app on a real core under Pilot
with waits for its state."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App
from textual.command import Command, CommandList, CommandPalette
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.worker import WorkerState

from adapters.demo import build_demo
from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tui import ChatmemApp, make_app
from tui.model import COLUMNS
from tui.widgets.detail import DetailPane
from tui.widgets.ranktable import RankTable

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SIZE = (160, 42)
CHATMEM = Path(sys.executable).with_name("chatmem")


@contextmanager
def fixed_entry_ids() -> Iterator[None]:
    """Entry ids are random in the core; screens compared across runs need them fixed."""
    counter = itertools.count(1)

    def next_id(taken: set[str] | frozenset[str] = frozenset()) -> str:
        while True:
            candidate = hashlib.sha256(str(next(counter)).encode()).hexdigest()[:8]
            if candidate not in taken:
                return candidate

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("memory_core.longterm.merge.new_entry_id", next_id)
        yield


_TEMPLATES: dict[Path, Path] = {}


def make_template(factory: pytest.TempPathFactory) -> Path:
    """The demo workspace at NOW with fixed ids, built once per test session."""
    base = factory.getbasetemp()
    if base not in _TEMPLATES:
        path = factory.mktemp("template") / "demo"
        with fixed_entry_ids():
            asyncio.run(build_demo(path, now=NOW))
        _TEMPLATES[base] = path
    return _TEMPLATES[base]


def copy_template(template: Path, tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(template, target)
    return target


@pytest.fixture(scope="session", name="demo_template")
def demo_template_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory)


@pytest.fixture(name="demo_ws")
def demo_ws_fixture(tmp_path: Path, demo_template: Path) -> Path:
    return copy_template(demo_template, tmp_path)


async def settle(pilot: Pilot[None], limit: float = 15.0) -> None:
    """Wait until every load has finished and its results are drawn."""
    app = pilot.app
    assert isinstance(app, ChatmemApp)
    deadline = time.monotonic() + limit
    quiet = 0
    while time.monotonic() < deadline:
        await pilot.pause(0.03)
        busy = [
            w
            for w in app.workers
            if w.group != "watch" and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        ]
        ready = app.view is not None and app.view.complete
        quiet = quiet + 1 if not busy and ready else 0
        if quiet >= 3:
            return
    raise AssertionError("the app did not settle")


async def until(
    pilot: Pilot[None], check: Callable[[], bool], limit: float = 5.0, what: str = ""
) -> None:
    """Wait until `check()` holds, letting the app run between looks; fail after `limit`
    seconds. A state to wait for, never a pause long enough on a quiet machine."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"condition not reached: {what or check}"
        await pilot.pause(0.01)


def on_top(app: App[Any], kind: type[Screen[Any]]) -> bool:
    """A screen of `kind` is the app's screen and has composed and mounted its widgets
    (keys and queries reach them)."""
    return isinstance(app.screen, kind) and app.screen.is_mounted


async def until_screen(pilot: Pilot[None], kind: type[Screen[Any]], limit: float = 5.0) -> None:
    """Wait until a screen of `kind` is pushed and ready."""
    await until(pilot, lambda: on_top(pilot.app, kind), limit, f"{kind.__name__} shown")


async def until_gone(pilot: Pilot[None], kind: type[Screen[Any]], limit: float = 5.0) -> None:
    """Wait until no screen of `kind` is on top (it was dismissed or never came)."""
    await until(
        pilot, lambda: not isinstance(pilot.app.screen, kind), limit, f"{kind.__name__} closed"
    )


@dataclass
class Running:
    pilot: Pilot[None]
    app: ChatmemApp
    core: MemoryCore
    clock: ManualClock
    messages: list[Message] = field(default_factory=list)

    async def settle(self) -> None:
        await settle(self.pilot)

    async def until(self, check: Callable[[], bool], limit: float = 5.0, what: str = "") -> None:
        await until(self.pilot, check, limit, what)

    async def until_screen(self, kind: type[Screen[Any]]) -> None:
        await until_screen(self.pilot, kind)

    async def until_gone(self, kind: type[Screen[Any]]) -> None:
        await until_gone(self.pilot, kind)

    def table(self, selector: str) -> DataTable[object]:
        return self.app.query_one(selector, DataTable)

    def rows(self, selector: str) -> list[list[str]]:
        widget = self.app.query_one(selector)
        if isinstance(widget, RankTable):
            return [[c.plain for c in widget.cells_at(i)] for i in range(widget.row_count)]
        table = self.table(selector)
        return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]

    def column(self, selector: str, title: str) -> list[str]:
        widget = self.app.query_one(selector)
        if isinstance(widget, RankTable):
            titles = [c.title for c in COLUMNS]
        else:
            titles = [str(c.label).split(" ")[0] for c in self.table(selector).ordered_columns]
        index = titles.index(title)
        return [row[index] for row in self.rows(selector)]

    def text(self, selector: str) -> str:
        return self.text_of(self.app.query_one(selector, Static))

    @staticmethod
    def text_of(widget: Widget) -> str:
        assert isinstance(widget, Static)
        content = widget.content
        return content.plain if isinstance(content, Text) else str(content)

    async def highlight(self, content_part: str) -> str:
        """Put the rankings cursor on the entry whose content contains `content_part`."""
        view = self.app.view
        assert view is not None
        rows = view.first_rows(view.matching)
        row = next(i for i, r in enumerate(rows) if content_part in r.entry.content)
        wanted = rows[row].entry.id
        self.app.query_one(RankTable).move_cursor(row)
        # the app takes it as the current entry, and the entry pane shows it
        pane = self.app.query_one(DetailPane)
        await self.until(
            lambda: self.app.current_id == wanted and pane.entry_id == wanted,
            what=f"entry {wanted} highlighted and shown",
        )
        return wanted

    async def choose_scope(self, scope: ScopeKey) -> None:
        table = self.table("#scopes")
        table.focus()
        table.move_cursor(row=table.get_row_index(scope.value))
        await self.pilot.press("enter")
        await self.settle()
        assert self.app.scope == scope


@asynccontextmanager
async def running(
    ws: Path, *, scope: ScopeKey | None = None, size: tuple[int, int] = SIZE
) -> AsyncIterator[Running]:
    clock = ManualClock(NOW)
    async with MemoryCore.open(Config(workspace=str(ws)), clock=clock) as core:
        messages: list[Message] = []
        app = make_app(core, clock=clock, scope=scope)
        async with app.run_test(size=size, message_hook=messages.append) as pilot:
            run = Running(pilot, app, core, clock, messages)
            await run.settle()
            yield run


def meta_of(text: str, entry_id: str) -> str:
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith(f"### [{entry_id}]"))
    return lines[index + 1]


def palette_offers(app: App[Any], title: str) -> bool:
    """The command palette has finished searching what was typed and highlights the
    command `title` (Enter now runs that one)."""
    palette = app.screen
    if not isinstance(palette, CommandPalette) or not palette.is_mounted:
        return False
    searching = any(
        w.node is palette and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        for w in app.workers
    )
    option = palette.query_one(CommandList).highlighted_option
    return not searching and isinstance(option, Command) and option.hit.text == title


def notices(run: Running) -> list[str]:
    return [str(m.notification.message) for m in run.messages if isinstance(m, Notify)]
