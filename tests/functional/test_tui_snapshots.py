"""SVG snapshots of the main screens of the demo workspace at a fixed clock and size.

Regenerate after a deliberate change with `pytest tests/functional/test_tui_snapshots.py
--snapshot-update` and look at the report before committing the new SVGs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from adapters.demo import LI_LEI
from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tests.functional.tui_support import (
    NOW,
    SIZE,
    copy_template,
    make_template,
    settle,
    until,
    until_screen,
)
from tui import ChatmemApp, make_app
from tui.screens.confirm import ConfirmScreen
from tui.screens.help import HelpScreen
from tui.widgets.detail import DetailPane
from tui.widgets.ranktable import RankTable


@pytest.fixture(autouse=True)
def _both_backends() -> None:
    """Not here: a snapshot renders the demo workspace the TUI opens itself (SQLite);
    one picture per screen. The TUI on PostgreSQL is tested in test_tui*.py."""


@pytest.fixture
def ws(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_template(make_template(tmp_path_factory), tmp_path)


STILL = 3600.0
"""Seconds between the app's polls for other processes' changes: never, during a snapshot.
A poll that notices the core's own start-up writes reloads the panes, and under load that
reload could land between `settle` and the screenshot (the polling has tests of its own in
test_tui_live.py)."""


def demo_app(ws: Path, scope: ScopeKey | None = None) -> ChatmemApp:
    """The app owns its core here: the snapshot runner starts its own event loop."""
    clock = ManualClock(NOW)
    core = MemoryCore(Config(workspace=str(ws)), clock=clock)
    return make_app(core, clock=clock, scope=scope, manage_core=True, poll_seconds=STILL)


async def highlight(pilot: Pilot[None], content_part: str) -> None:
    app = pilot.app
    assert isinstance(app, ChatmemApp) and app.view is not None
    rows = app.view.first_rows(100)
    row = next(i for i, r in enumerate(rows) if content_part in r.entry.content)
    wanted = rows[row].entry.id
    app.query_one(RankTable).move_cursor(row)
    pane = app.query_one(DetailPane)
    await until(
        pilot,
        lambda: app.current_id == wanted and pane.entry_id == wanted,
        what=f"entry {wanted} highlighted and shown",
    )
    await settle(pilot)


def test_rankings_first_screen(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(demo_app(ws), terminal_size=SIZE, run_before=settle)


def test_entry_detail_with_projection(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_entry(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await highlight(pilot, "Rust")
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(demo_app(ws), terminal_size=SIZE, run_before=open_entry)


def test_what_if_ninety_days(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def later(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        await settle(pilot)

    assert snap_compare(demo_app(ws), terminal_size=SIZE, run_before=later)


def test_archive_state_of_a_failing_scope(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def archive_tab(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)

    assert snap_compare(demo_app(ws, LI_LEI), terminal_size=SIZE, run_before=archive_tab)


def test_recall_hits_and_injection(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def recall(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("4")
        pilot.app.query_one("#recall-query", Input).focus()
        await pilot.press(*"花生 Rust", "enter")
        await settle(pilot)
        pilot.app.query_one("#recall-hits", DataTable).focus()
        await settle(pilot)

    assert snap_compare(demo_app(ws), terminal_size=SIZE, run_before=recall)


def test_first_screen_at_80_by_24(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    """A new user's default terminal: the rankings keep the content, the sidebar waits
    behind `b`, and the footer starts with `? Help`."""
    assert snap_compare(demo_app(ws), terminal_size=(80, 24), run_before=settle)


def test_key_help_at_80_by_24(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def help_screen(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await until_screen(pilot, HelpScreen)
        await settle(pilot)

    assert snap_compare(demo_app(ws), terminal_size=(80, 24), run_before=help_screen)


def test_confirmation_modal(ws: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def ask(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await highlight(pilot, "游泳")
        await pilot.press("x")
        await until_screen(pilot, ConfirmScreen)
        await settle(pilot)

    assert snap_compare(demo_app(ws), terminal_size=SIZE, run_before=ask)
