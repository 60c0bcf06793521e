"""The TUI driven by Pilot over a demo workspace: what every pane holds, what every action
writes, and that changes made by another process show up by themselves."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import random
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual.command import Command, CommandList, CommandPalette
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Select, Static, TabbedContent, TextArea
from textual.worker import WorkerState

from adapters.demo import ALICE, LI_LEI, build_demo
from memory_core.base.clock import ManualClock
from memory_core.base.entries import ArchiveReason, MemoryEntry
from memory_core.base.policy import DEFAULT_POLICY
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.decay import decay_all
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.scoring import Status, status_of
from memory_core.recall.request import SearchRequest
from tests.support import unbound_environ
from tui import ChatmemApp, make_app
from tui.capture import screen_text
from tui.commands import app_commands
from tui.messages import ArchiveLoaded, RankingsReady, ScopesLoaded
from tui.model import COLUMNS, RankingModel, what_if
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.screens.help import HelpScreen
from tui.widgets.detail import DetailPane
from tui.widgets.ranktable import GAP, RankTable

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


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory)


@pytest.fixture
def demo_ws(tmp_path: Path, demo_template: Path) -> Path:
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


# --- the first screen and the scopes ---------------------------------------------------


async def test_first_screen_is_main_ranked_by_score_with_archive_summary(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        app = run.app
        assert app.scope == MAIN
        assert {type(m) for m in run.messages} >= {ScopesLoaded, RankingsReady, ArchiveLoaded}
        scores = [float(cell.split()[0]) for cell in run.column("#rankings", "score")]
        assert scores == sorted(scores, reverse=True) and len(scores) == 13
        assert run.column("#rankings", "#") == [str(n) for n in range(1, 14)]
        assert "对花生过敏" in run.rows("#rankings")[0][-1]
        # every scope, with active / archived / daily notes / unarchived / pending
        scopes = {row[0].strip("▶ ").strip(): row[1:] for row in run.rows("#scopes")}
        assert len(scopes) == 4
        assert scopes["main"] == ["10", "3", "3", "2", "0"]
        assert scopes["telegram:peer:20010001"] == ["4", "1", "1", "0", "2"]
        assert scopes["telegram:peer:20010002"] == ["4", "0", "0", "4", "0"]
        summary = run.text("#archive-summary")
        assert "2 unarchived · 0 pending · 8 archived" in summary
        assert "last run 03-01 00:00: 2 moved, 6 summarised, 0 failed" in summary
        assert "summaries 1 day, 1 month" in summary
        assert "3 archived · 2 forgotten" in summary
        assert "scope main" in app.sub_title


async def test_choosing_a_scope_filters_every_pane(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.choose_scope(LI_LEI)
        contents = run.column("#rankings", "content")
        assert len(contents) == 4 and all(
            any("\u4e00" <= ch <= "\u9fff" for ch in c) for c in contents
        )
        summary = run.text("#archive-summary")
        assert "4 unarchived" in summary and "failing 4 msg, 5 attempts" in summary
        assert "archive_backlog since" in summary
        assert run.rows("#activity")
        assert all(r.scope == LI_LEI.value for r in run.app.activity)
        assert "周末在咖啡店兼职做咖啡师" in run.column("#activity", "content")
        assert "scope telegram:peer:20010002" in run.app.sub_title
        assert run.rows("#scopes")[3][0].startswith("▶")


# --- rankings: sorting and filtering ---------------------------------------------------


async def test_rankings_sort_by_every_column_and_reverse(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        model = run.app.model
        assert model is not None
        table = run.app.query_one(RankTable)
        for column in COLUMNS:
            run.app.sort_by(column.key)
            await run.until(lambda: table.sort == run.app.rankings.sort, what=column.key)
            view = run.app.view
            assert view is not None and view.sort.key == column.key
            keys = model.column(column.key)
            shown = [keys[i] for i in view.indices]
            assert shown == sorted(shown, reverse=view.sort.descending), column.key
            assert table.cells_at(0)[1].plain == view.row(0).entry.id
        # s cycles to the next column, r reverses
        run.app.sort_by("score")
        await run.settle()
        await run.pilot.press("s")
        await run.settle()
        assert run.app.rankings.sort.key == "score_7"
        before = run.column("#rankings", "id")
        await run.pilot.press("r")
        await run.settle()
        assert run.app.rankings.sort.descending is False
        assert run.app.query_one(RankTable).header_cells()[5].plain == "+7d ▲"
        assert run.column("#rankings", "id") != before


async def test_clicking_a_header_sorts_by_it(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        columns = run.app.query_one(RankTable).columns()
        keys = [column.key for column, _ in columns]
        x = sum(width + GAP for _, width in columns[: keys.index("score_30")]) + 1
        await run.pilot.click("#rankings", offset=(x, 0))
        await run.settle()
        assert run.app.rankings.sort.key == "score_30" and run.app.rankings.sort.descending
        later = [float(s) for s in run.column("#rankings", "+30d")]
        assert later == sorted(later, reverse=True) and later[0] == 0.65


async def test_rankings_filter_by_text_and_category(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("slash")
        assert isinstance(run.app.focused, Input)
        await run.pilot.press(*"咖啡")
        await run.settle()
        assert [c for c in run.column("#rankings", "content")] == [
            "喜欢喝手冲咖啡，不加糖，偏爱深烘"
        ]
        assert "matching (of 13)" in run.text("#rank-status")
        run.app.query_one("#rank-filter", Input).value = ""
        run.app.query_one("#rank-category", Select).value = "preference"
        await run.settle()
        categories = run.column("#rankings", "category")
        assert categories and set(categories) == {"preference"} and len(categories) == 4


# --- decay what-if -----------------------------------------------------------------------


async def test_what_if_shows_the_future_without_writing(demo_ws: Path) -> None:
    memory = demo_ws / "MEMORY.md"
    before = (memory.read_bytes(), memory.stat().st_mtime_ns)
    async with running(demo_ws) as run:
        audit_before = await run.core.audit.last_id()
        rust = await run.highlight("Rust")
        assert run.app.model.row_for(rust).status is Status.ACTIVE  # type: ignore[union-attr]
        await run.pilot.press("greater_than_sign")
        await run.settle()
        view = run.app.view
        assert view is not None and view.offset_days == 30
        assert "WHAT-IF +30 d: 2026-03-31 · read-only (0: now)" in run.text("#rank-when")
        statuses = dict(
            zip(run.column("#rankings", "id"), run.column("#rankings", "status"), strict=True)
        )
        assert statuses[rust] == "archived"
        assert "at +30 d:" in run.text("#rank-counts") and "archived (+" in run.text("#rank-counts")
        for _ in range(5):
            await run.pilot.press("greater_than_sign")
        await run.settle()
        assert run.app.view is not None and run.app.view.offset_days == 180
        assert run.app.view.counts.forgotten >= 2
        assert "to forget" in run.column("#rankings", "status")
        await run.pilot.press("minus", "0")
        await run.settle()
        assert run.app.view is not None and run.app.view.offset_days == 0
        assert "now 2026-03-01 12:00" in run.text("#rank-when")
        assert await run.core.audit.last_id() == audit_before
    assert (memory.read_bytes(), memory.stat().st_mtime_ns) == before


def test_what_if_agrees_with_consolidation() -> None:
    """The TUI's per-entry rule gives what `decay_all` (a real consolidation) would."""
    rng = random.Random(7)
    entries = []
    for n in range(400):
        last = NOW - timedelta(days=rng.randint(0, 400), hours=rng.randint(0, 23))
        entries.append(
            MemoryEntry(
                id=f"e{n}",
                content=f"memory {n}",
                category=rng.choice(["fact", "todo", "preference"]),
                score=rng.uniform(0.01, 1.0),
                created_at=last,
                last_activated=last,
                scored_at=last + timedelta(days=rng.randint(0, 30)),
                pinned=rng.random() < 0.1,
                archived=rng.choice([None, None, None, ArchiveReason.MANUAL]),
                expires_at=NOW + timedelta(days=rng.randint(-30, 60))
                if rng.random() < 0.3
                else None,
            )
        )
    for days in (0, 7, 45, 200):
        when = NOW + timedelta(days=days)
        result = decay_all(entries, when, DEFAULT_POLICY)
        expected = {e.id: (e.score, status_of(e)) for e in result.entries}
        expected |= {
            c.entry_id: (c.old_score, Status.FORGOTTEN)
            for c in result.changes
            if c.kind == "forget"
        }
        for entry in entries:
            score, status = what_if(entry, when, DEFAULT_POLICY)
            assert status is expected[entry.id][1], (entry, days)
            assert score == pytest.approx(expected[entry.id][0])
        model = RankingModel(entries, NOW, days)
        assert model.counts().forgotten == sum(
            1 for v in expected.values() if v[1] is Status.FORGOTTEN
        )


# --- entry detail ------------------------------------------------------------------------


async def test_entry_detail_shows_content_history_and_projection_plot(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        name = await run.highlight("王小明")
        await run.pilot.press("enter")
        await run.settle()
        tabs = run.app.query_one("#tabs")
        assert tabs.active == "tab-entry"  # type: ignore[attr-defined]
        meta = run.text("#detail-meta")
        assert f"[{name}] fact" in meta and "用户叫王小明，在上海做后端开发" in meta
        assert "pinned" in meta and "never" in meta
        actions = run.column("#detail-history", "action")
        assert actions[0] == "add" and actions.count("reinforce") == 5 and "pin" in actions
        pane = run.app.query_one(DetailPane)
        assert len(pane.projection) == 181 and len(set(pane.projection)) == 1  # pinned: flat
        plot = run.app.query_one("#detail-plot").render()
        assert "archive 0.2" in str(plot) and "forget 0.05" in str(plot)
        await run.pilot.press("1")
        decaying = await run.highlight("Rust")
        await run.pilot.press("2")
        await run.settle()
        assert pane.entry_id == decaying
        assert pane.projection[0] > pane.projection[-1] and pane.projection[-1] < 0.2


# --- archive state, recall, activity --------------------------------------------------


async def test_archive_pane_shows_history_states_failures_and_summaries(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("3")
        head = run.text("#archive-head")
        assert "summaries 1 day, 1 month · 1 raw archive file" in head
        summaries = run.text("#archive-summaries")
        assert "days: 2026-02-17" in summaries and "months: 2025-12" in summaries
        why = dict(
            zip(
                run.column("#archive-entries", "content"),
                run.column("#archive-entries", "why"),
                strict=True,
            )
        )
        assert why["Reads technical books on a Kindle Paperwhite"] == "manual"
        assert why["Renew the passport before the trip to Japan"] == "expired"
        assert why["Deploys the side project on a Hetzner VPS with Docker Compo…"] == (
            "score below archive line"
        )
        forgotten = run.column("#archive-forgotten", "content")
        assert "Old phone number 138-0000-0000" in forgotten and any("年糕" in c for c in forgotten)
        sessions = {r[0]: r[3:] for r in run.rows("#archive-sessions")}
        assert sessions["main-0004"] == ["2", "0", "0"] and sessions["main-0001"] == ["0", "0", "4"]

        await run.choose_scope(LI_LEI)
        failures = run.rows("#archive-failures")
        assert failures == [["lilei-0001", "4", "5", "2026-03-01 10:40", "2026-03-01 22:40"]]
        backlog = run.text("#archive-backlog")
        assert "2026-03-01 10:40" in backlog and '"attempts": 5' in backlog

        await run.choose_scope(ALICE)
        assert {r[0]: r[3:] for r in run.rows("#archive-sessions")}["alice-0002"] == ["0", "2", "0"]


async def test_recall_shows_hits_highlights_and_the_injection_block(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("4")
        run.app.query_one("#recall-query", Input).focus()
        await run.pilot.press(*"Hetzner docker", "enter")
        await run.settle()
        await run.until(lambda: "for 'Hetzner docker'" in run.text("#recall-status"))
        table = run.table("#recall-hits")
        assert table.row_count >= 1
        score, where, _kind, text = table.get_row_at(0)
        assert float(str(score)) > 0 and ":" in str(where)
        assert isinstance(text, Text)
        marked = {text.plain[s.start : s.end].lower() for s in text.spans}
        assert "hetzner" in marked and "docker" in marked
        injection = await run.core.finder.recall(MAIN, "Hetzner docker", now=NOW)
        assert injection.block and run.text("#recall-block") == injection.block
        assert f"{injection.tokens} / 2048 tokens" in run.text("#recall-budget")


async def test_activity_feed_lists_audit_events_with_their_source(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("5")
        sources = run.column("#activity", "source")
        actions = run.column("#activity", "action")
        assert "extract (/new)" in sources and "user" in sources
        assert {"add", "reinforce", "archive", "forget", "pin"} <= set(actions)
        at = run.column("#activity", "at")
        assert at == sorted(at, reverse=True)


async def test_snapshot_tab_shows_each_section_with_its_tokens(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("6")
        await run.settle()
        expected = await run.core.snapshots.build(MAIN, now=NOW)
        assert run.column("#snapshot-sections", "section") == [s.title for s in expected.sections]
        meters = run.column("#snapshot-sections", "tokens")
        for section, meter in zip(expected.sections, meters, strict=True):
            assert meter.startswith(f"{section.tokens} / {section.limit} tokens")
        assert f"{expected.tokens} of {expected.budget} tokens" in run.text("#snapshot-head")
        ranked = expected.section("Ranked Index").text.splitlines()[0]
        assert ranked and ranked in run.text("#snapshot-text")
        # Shown, never written: the tab previews a rebuild.
        assert not (demo_ws / run.core.workspace.relative(run.core.snapshots.path(MAIN))).exists()
        await run.core.memories.capture(MAIN, "我的猫叫小橘")
        await run.pilot.press("ctrl+r")
        await run.settle()
        assert "小橘" in run.column("#entities", "name")
        assert run.column("#entities", "name") == [
            e.name for e in await run.core.memories.entities(MAIN)
        ]


# --- actions -----------------------------------------------------------------------------


async def confirm(run: Running, key: str, answer: str = "y") -> None:
    await run.pilot.press(key)
    await run.until_screen(ConfirmScreen)
    await run.pilot.press(answer)
    await run.until_gone(ConfirmScreen)
    await run.settle()


async def test_pin_writes_pinned_into_the_meta_line(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        rust = await run.highlight("Rust")
        await confirm(run, "p")
        assert '"pinned": true' in meta_of((demo_ws / "MEMORY.md").read_text(), rust)
        history = await run.core.audit.history(MAIN, rust)
        assert history[-1].action == "pin" and history[-1].source == "tui"
        assert run.app.model is not None and run.app.model.row_for(rust).entry.pinned  # type: ignore[union-attr]
        await confirm(run, "p")
        assert '"pinned"' not in meta_of((demo_ws / "MEMORY.md").read_text(), rust)


async def test_cancelled_action_writes_nothing(demo_ws: Path) -> None:
    before = (demo_ws / "MEMORY.md").read_bytes()
    async with running(demo_ws) as run:
        await run.highlight("Rust")
        await confirm(run, "x", "n")
        await confirm(run, "C", "escape")
        assert not isinstance(run.app.screen, ConfirmScreen)
    assert (demo_ws / "MEMORY.md").read_bytes() == before


async def test_forget_removes_the_block_and_audits_it(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        swim = await run.highlight("游泳")
        await confirm(run, "x")
        text = (demo_ws / "MEMORY.md").read_text()
        assert f"[{swim}]" not in text and "游泳" not in text
        record = (await run.core.audit.forgotten(MAIN))[0]
        assert (record.entry_id, record.source, record.content) == (
            swim,
            "tui",
            "每周三晚上去游泳，一次 1500 米",
        )
        assert swim not in run.column("#rankings", "id")
        assert "每周三晚上去游泳，一次 1500 米" in run.column("#archive-forgotten", "content")


async def test_a_forget_is_undone_with_u(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("u")  # nothing forgotten yet: says so, changes nothing
        await run.until(lambda: any("nothing was forgotten" in n for n in notices(run)))
        swim = await run.highlight("游泳")
        await confirm(run, "x")
        assert f"[{swim}]" not in (demo_ws / "MEMORY.md").read_text()
        assert any("Press u to restore it" in n for n in notices(run))
        await run.pilot.press("u")
        await run.settle()
        entry = next(
            e for e in parse_memory((demo_ws / "MEMORY.md").read_text()).entries if e.id == swim
        )
        assert entry.content == "每周三晚上去游泳，一次 1500 米"
        history = await run.core.audit.history(MAIN, swim)
        assert [(r.action, r.source) for r in history[-2:]] == [
            ("forget", "tui"),
            ("restore", "tui"),
        ]
        assert swim in run.column("#rankings", "id")
        # once undone, u has nothing left to undo
        await run.pilot.press("u")
        await run.until(lambda: sum("nothing was forgotten" in n for n in notices(run)) == 2)
        assert any(title.startswith("Undo forget") for title, _, _ in app_commands(run.app))


async def test_archive_then_restore(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        hike = await run.highlight("佘山")
        await confirm(run, "a")
        parsed = parse_memory((demo_ws / "MEMORY.md").read_text())
        assert next(e for e in parsed.entries if e.id == hike).archived is ArchiveReason.MANUAL
        assert "archived" in run.text("#detail-meta")
        await run.highlight("佘山")
        await confirm(run, "a")
        parsed = parse_memory((demo_ws / "MEMORY.md").read_text())
        assert next(e for e in parsed.entries if e.id == hike).archived is None
        actions = [r.action for r in await run.core.audit.history(MAIN, hike)]
        assert actions[-2:] == ["archive", "restore"]


async def test_edit_content(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        entry_id = await run.highlight("changelog")
        await run.pilot.press("e")
        await run.until_screen(EditScreen)
        assert isinstance(run.app.screen, EditScreen)
        run.app.screen.query_one(TextArea).text = "Workflow: changelog, then tag, then announce"
        await run.pilot.press("ctrl+s")
        await run.settle()
        entry = next(
            e for e in parse_memory((demo_ws / "MEMORY.md").read_text()).entries if e.id == entry_id
        )
        assert entry.content == "Workflow: changelog, then tag, then announce"
        assert (await run.core.audit.history(MAIN, entry_id))[-1].action == "edit"
        assert "then announce" in run.text("#detail-meta")


async def test_consolidation_now_changes_scores(demo_ws: Path) -> None:
    before = {e.id: e.score for e in parse_memory((demo_ws / "MEMORY.md").read_text()).entries}
    async with running(demo_ws) as run:
        run.clock.advance(timedelta(days=40))
        await confirm(run, "C")
        after = {e.id: e.score for e in parse_memory((demo_ws / "MEMORY.md").read_text()).entries}
        changed = [i for i in after if after[i] < before[i]]
        assert len(changed) >= 8
        recent = await run.core.audit.recent(MAIN, limit=20)
        assert any(r.source == "consolidate" and r.action in ("archive", "forget") for r in recent)
        scores = dict(
            zip(run.column("#rankings", "id"), run.column("#rankings", "score"), strict=True)
        )
        assert all(
            float(scores[i].split()[0]) == pytest.approx(after[i], abs=0.006) for i in scores
        )


async def test_command_palette_offers_every_action(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        titles = [title for title, _, _ in app_commands(run.app)]
        for word in (
            "Pin",
            "Archive",
            "Forget",
            "Edit",
            "consolidation",
            "What-if",
            "Sort rankings by hits",
        ):
            assert any(word in t for t in titles), word
        assert "Scope: telegram:peer:20010002" in titles
        await run.highlight("Rust")
        await run.pilot.press("ctrl+p")
        await run.until_screen(CommandPalette)
        await run.pilot.press(*"Forget the highlighted")
        await run.until(
            lambda: palette_offers(run.app, "Forget the highlighted entry"),
            what="the palette offers the forget command",
        )
        await run.pilot.press("enter")
        await run.until_screen(ConfirmScreen)
        assert isinstance(run.app.screen, ConfirmScreen)
        assert "Forget [" in str(run.app.screen.question)
        await run.pilot.press("n")


# --- a new user's first hour (issue 11, item 14) ----------------------------------------

BROKEN_BLOCK = (
    "### [0badb10c] fact | 0.50 | 2026-02-01 | zero\n"
    '<!-- chatmem: {"score": 0.5} -->\n'
    "The office moved to 虹桥 in February\n\n"
)


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


async def test_quarantined_blocks_are_counted_in_the_sidebar_and_shown_verbatim(
    demo_ws: Path,
) -> None:
    memory = demo_ws / "MEMORY.md"
    text = memory.read_text(encoding="utf-8")
    cut = text.index("## Archived")
    memory.write_text(text[:cut] + BROKEN_BLOCK + text[cut:], encoding="utf-8")
    line = text[:cut].count("\n") + 1
    async with running(demo_ws) as run:
        assert "quarantined 1 block (Archive tab)" in run.text("#archive-summary")
        scopes = [row[0] for row in run.rows("#scopes")]
        assert scopes[0] == "▶ main !1" and not any("!" in s for s in scopes[1:])
        await run.pilot.press("3")
        shown = run.text("#archive-quarantine")
        assert "1 in MEMORY.md, kept verbatim" in shown
        assert f"line {line}: hits 'zero' is not a whole number" in shown
        assert BROKEN_BLOCK.strip() in shown
        # the rankings still show every readable entry
        assert len(run.column("#rankings", "id")) == 13
        told = [n for n in notices(run) if "could not be read" in n]
        assert told == [
            "1 block of MEMORY.md could not be read; they are kept verbatim in the file "
            "(Archive tab, key 3)"
        ]
        await run.choose_scope(LI_LEI)
        assert "quarantined" not in run.text("#archive-summary")
        assert run.text("#archive-quarantine") == "Quarantined blocks  none"
    assert BROKEN_BLOCK.strip() in memory.read_text(encoding="utf-8")


async def test_escape_and_enter_leave_the_filter_box(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        table = run.app.query_one(RankTable)
        box = run.app.query_one("#rank-filter", Input)
        await run.pilot.press("slash", *"咖啡", "enter")
        await run.settle()
        assert run.app.focused is table and box.value == "咖啡"
        assert run.column("#rankings", "content") == ["喜欢喝手冲咖啡，不加糖，偏爱深烘"]
        await run.pilot.press("slash")
        assert run.app.focused is box
        await run.pilot.press("escape")
        assert run.app.focused is table
        await run.pilot.press("3")
        assert run.app.query_one(TabbedContent).active == "tab-archive"
        assert box.value == "咖啡"


async def test_number_keys_switch_tabs_and_never_type_into_a_box(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        app = run.app
        tabs = app.query_one(TabbedContent)
        boxes = list(app.query(Input))

        def typed() -> list[str]:
            return [box.value for box in boxes if box.value]

        # from the table to every tab and back: focus lands on each tab's own widget
        for key, tab, widget in (
            ("2", "tab-entry", "#detail-meta-scroll"),
            ("3", "tab-archive", "#archive-pane"),
            ("4", "tab-recall", "#recall-hits"),
            ("5", "tab-activity", "#activity"),
            ("1", "tab-rankings", "#rankings"),
        ):
            await run.pilot.press(key)
            assert tabs.active == tab
            assert app.focused is app.query_one(widget), tab
        # the category menu does not take digits either
        app.query_one("#rank-category", Select).focus()
        await run.pilot.press("3")
        assert tabs.active == "tab-archive" and not isinstance(app.focused, Input)
        await run.pilot.press("1")
        assert tabs.active == "tab-rankings" and app.focused is app.query_one(RankTable)
        assert typed() == []
        # a box that wants digits gets them; Escape leaves it and digits switch tabs again
        await run.pilot.press("f", *"2026")
        assert app.query_one("#recall-query", Input).value == "2026"
        await run.pilot.press("escape", "1")
        assert tabs.active == "tab-rankings" and typed() == ["2026"]


async def test_question_mark_and_f1_show_every_key(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        app = run.app
        shown = ""
        for key in ("question_mark", "f1"):
            await run.pilot.press(key)
            await run.until_screen(HelpScreen)
            assert isinstance(app.screen, HelpScreen), key
            shown = run.text_of(app.screen.query_one("#help-text"))
            await run.pilot.press(key)
            await run.until_gone(HelpScreen)
            assert not isinstance(app.screen, HelpScreen), key
        app_bindings = list(Binding.make_bindings(ChatmemApp.BINDINGS))
        assert app_bindings[0].key == "question_mark"  # first in the footer
        missing = []
        for owner in (ChatmemApp, RankTable, ConfirmScreen, EditScreen, HelpScreen):
            for binding in Binding.make_bindings(owner.BINDINGS):
                display = app.get_key_display(binding)
                what = binding.tooltip or binding.description
                if not any(display in line and what in line for line in shown.splitlines()):
                    missing.append(f"{owner.__name__}: {binding.key} ({what})")
        assert missing == []


async def test_f_focuses_the_recall_query(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        app = run.app
        await run.pilot.press("f")
        assert app.query_one(TabbedContent).active == "tab-recall"
        assert app.focused is app.query_one("#recall-query", Input)
        await run.pilot.press(*"喜欢", "enter")
        await run.settle()
        box = app.query_one("#recall-query", Input)
        assert app.focused is box and run.rows("#recall-hits")
        # keys typed after Enter go on typing: none of them fires an app command
        sort_before = run.app.rankings.sort
        await run.pilot.press("question_mark", "s", "x")
        await run.settle()
        assert not isinstance(app.screen, HelpScreen | ConfirmScreen)
        assert app.focused is box and box.value == "喜欢?sx"
        assert run.app.rankings.sort == sort_before
        # Escape leaves the box for the hits
        await run.pilot.press("escape")
        assert app.focused is app.query_one("#recall-hits")


async def test_the_recall_tab_reruns_for_a_new_scope(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("4")
        run.app.query_one("#recall-query", Input).focus()
        await run.pilot.press(*"喜欢", "enter")
        await run.settle()
        main_hits = run.column("#recall-hits", "where")
        assert main_hits and all(not w.startswith("memory/scopes/") for w in main_hits)
        expected = [
            h.location
            for h in await run.core.finder.search(LI_LEI, SearchRequest("喜欢", limit=10))
        ]
        assert expected and all(w.startswith("memory/scopes/") for w in expected)
        await run.choose_scope(LI_LEI)
        await run.until(lambda: run.column("#recall-hits", "where") == expected)
        injection = await run.core.finder.recall(LI_LEI, "喜欢", now=NOW)
        assert injection.block and run.text("#recall-block") == injection.block
        assert "in scope telegram:peer:20010002" in run.text("#recall-status")


async def test_what_if_is_read_only(demo_ws: Path) -> None:
    memory = demo_ws / "MEMORY.md"
    before = memory.read_bytes()
    async with running(demo_ws) as run:
        await run.highlight("Rust")
        await run.pilot.press("greater_than_sign")
        await run.settle()

        def refusals() -> list[str]:
            return [n for n in notices(run) if "read-only" in n]

        def answered(count: int) -> bool:
            """The `count`th action has had its answer: a refusal (or, wrongly, a dialog)."""
            dialog = isinstance(run.app.screen, ConfirmScreen | EditScreen)
            return len(refusals()) >= count or dialog

        for count, key in enumerate(("p", "a", "x", "e", "C"), start=1):
            await run.pilot.press(key)
            await run.until(partial(answered, count), what=f"an answer to {key}")
            assert not isinstance(run.app.screen, ConfirmScreen | EditScreen), key
        assert len(refusals()) == 5 and "press 0 to go back to now" in refusals()[0]
        # the palette's entries run the same actions
        run.app.action_forget()
        await run.until(partial(answered, 6), what="an answer to the palette's forget")
        assert not isinstance(run.app.screen, ConfirmScreen)
        await run.settle()
        assert memory.read_bytes() == before
        # back at now, actions ask again
        await run.pilot.press("0")
        await run.settle()
        await run.pilot.press("p")
        await run.until_screen(ConfirmScreen)
        assert isinstance(run.app.screen, ConfirmScreen)
        await run.pilot.press("n")
    assert memory.read_bytes() == before


def below_the_forget_line(ws: Path, content_part: str) -> None:
    """Rewrite one entry of MEMORY.md with a score under 0.05 as of NOW (not yet
    consolidated: still in the file)."""
    memory = ws / "MEMORY.md"
    parsed = parse_memory(memory.read_text(encoding="utf-8"))
    entries = [
        e.with_(score=0.03, scored_at=NOW, last_activated=NOW) if content_part in e.content else e
        for e in parsed.entries
    ]
    memory.write_text(render_memory(entries, now=NOW), encoding="utf-8")


async def test_header_and_sidebar_counts_agree(demo_ws: Path) -> None:
    below_the_forget_line(demo_ws, "Rust")
    async with running(demo_ws) as run:
        header = run.text("#rank-counts")
        assert header == "now: 9 active · 4 archived, 1 to forget"
        assert run.rows("#scopes")[0][1:3] == ["9", "4"]
        summary = run.text("#archive-summary")
        assert "memories 4 archived (1 to forget) · 2 forgotten" in summary
        statuses = run.column("#rankings", "status")
        assert statuses.count("active") + statuses.count("pinned") == 9
        assert statuses.count("to forget") == 1
        # "forgotten" means deleted wherever it is shown: never in the rankings
        assert "forgotten" not in header and "forgotten" not in statuses


async def test_pinned_entries_say_pinned_and_archived_ones_count_down_nothing(
    demo_ws: Path,
) -> None:
    async with running(demo_ws) as run:
        rows = {row[1]: row for row in run.rows("#rankings")}
        titles = [c.title for c in COLUMNS]
        status, to_archive = titles.index("status"), titles.index("→arch")
        view = run.app.view
        assert view is not None
        for entry_row in view.first_rows(view.matching):
            cells = rows[entry_row.entry.id]
            if entry_row.entry.pinned:
                assert cells[status] == "pinned" and cells[to_archive].strip() == "never"
            elif entry_row.status is Status.ARCHIVED:
                assert cells[status] == "archived" and cells[to_archive].strip() == "—"
            else:
                assert cells[status] == "active" and cells[to_archive].strip().endswith("d")
        statuses = [rows[i][status] for i in rows]
        assert statuses.count("pinned") == 1 and statuses.count("archived") == 3
        # the detail pane agrees, and sorting by →arch puts the archived ones first
        await run.highlight("Hetzner")
        meta = run.text("#detail-meta")
        line = next(x for x in meta.splitlines() if x.strip().startswith("archive in"))
        assert line.split() == ["archive", "in", "—"]
        run.app.sort_by("to_archive")
        await run.settle()
        firsts = run.column("#rankings", "status")[:3]
        assert firsts == ["archived"] * 3


async def test_headers_are_not_cut_by_the_sort_arrow(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        table = run.app.query_one(RankTable)
        for column in COLUMNS:
            for _ in range(2):
                run.app.sort_by(column.key)
                # the table is drawn in the order asked for (the second time round,
                # the same column reversed)
                await run.until(lambda: table.sort == run.app.rankings.sort, what=column.key)
                arrow = "▼" if table.sort.descending else "▲"
                header = table.render_line(0).text
                assert f"{column.title} {arrow}" in header, header


async def test_usable_at_80_by_24(demo_ws: Path) -> None:
    async with running(demo_ws, size=(80, 24)) as run:
        app = run.app
        screen = screen_text(app)
        lines = screen.splitlines()
        assert len(lines) == 24 and max(cell_len(line) for line in lines) <= 80
        # the rankings show what each memory says, without scrolling sideways
        table = app.query_one(RankTable)
        assert table.line_width <= table.scrollable_content_region.width
        assert {"rank", "id", "score", "status", "content"} <= set(table.visible_keys())
        assert "对花生过敏，点外卖时要提醒" in screen and "now: 10 active · 3 archived" in screen
        assert "? Help" in lines[-1] and "/ Filter" in lines[-1]
        # the sidebar makes room, and comes back with b
        assert not app.query_one("#sidebar").display
        await run.pilot.press("b")
        await run.settle()
        assert app.query_one("#sidebar").display and "Archive state" in screen_text(app)
        await run.pilot.press("b")
        # the help fits
        await run.pilot.press("question_mark")
        await run.until_screen(HelpScreen)
        box = app.screen.query_one("#help-box")
        await run.until(lambda: bool(box.region), what="the help laid out")
        assert box.region.right <= 80 and box.region.bottom <= 24
        await run.pilot.press("escape")
        await run.until_gone(HelpScreen)
        # so does a confirmation
        await run.highlight("Rust")
        await run.pilot.press("p")
        await run.until_screen(ConfirmScreen)
        box = app.screen.query_one("#confirm-box")
        await run.until(lambda: bool(box.region), what="the confirmation laid out")
        assert box.region.right <= 80
        await run.pilot.press("n")


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_palette_key_covers_the_footer_keys_it_is_docked_over(
    demo_ws: Path, size: tuple[int, int]
) -> None:
    """When the footer's keys do not fit they scroll beneath the palette key docked at
    the right; a letter of theirs once showed in the last column ("palettet")."""
    async with running(demo_ws, size=size) as run:
        footer = screen_text(run.app).splitlines()[-1]
        assert footer.endswith("▏^p palette"), footer
        assert "? Help" in footer


async def test_footer_and_what_if_banner_fit_at_120_columns(demo_ws: Path) -> None:
    async with running(demo_ws, size=(120, 40)) as run:
        footer = screen_text(run.app).splitlines()[-1]
        shown: dict[str, Binding] = {}
        for binding in Binding.make_bindings(ChatmemApp.BINDINGS):
            if binding.show:
                shown.setdefault(binding.action, binding)  # the footer shows the first key
        for binding in shown.values():
            assert f"{run.app.get_key_display(binding)} {binding.description}" in footer
        assert footer.rstrip().endswith("palette")
        await run.pilot.press("greater_than_sign")
        await run.settle()
        assert "WHAT-IF +30 d: 2026-03-31 · read-only (0: now)" in screen_text(run.app)


async def test_a_loading_state_shows_until_the_first_rankings(demo_ws: Path) -> None:
    """The first screen says it is loading, instead of an empty layout that looks like an
    empty workspace."""
    release = asyncio.Event()
    clock = ManualClock(NOW)
    async with MemoryCore.open(Config(workspace=str(demo_ws)), clock=clock) as core:
        app = make_app(core, clock=clock)
        head = app.loader.head

        async def held_head(scope: ScopeKey) -> object:
            await release.wait()
            return await head(scope)

        app.loader.head = held_head  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            run = Running(pilot, app, core, clock)
            await run.until(
                lambda: "loading the memories of scope main" in run.text("#rank-status")
            )
            assert app.view is None and "loading memories" in run.text("#archive-summary")
            release.set()
            await run.settle()
            assert "loading" not in run.text("#rank-status")
            assert "loading" not in run.text("#archive-summary")
            assert "loading" not in run.text("#recent-activity")
            assert run.rows("#rankings")


# --- live --------------------------------------------------------------------------------


async def test_a_capture_by_another_process_appears_within_two_seconds(
    demo_ws: Path, tmp_path: Path
) -> None:
    env = unbound_environ()
    async with running(demo_ws) as run:
        process = await asyncio.create_subprocess_exec(
            str(CHATMEM),
            "capture",
            "Moved the VPS to Falkenstein",
            "--category",
            "fact",
            "--importance",
            "high",
            "--workspace",
            str(demo_ws),
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if "Moved the VPS to Falkenstein" in run.column("#rankings", "content"):
                break
            await run.pilot.pause(0.05)
        else:
            raise AssertionError("the captured memory did not appear within 2 s")
        waited = 2.0 - (deadline - time.monotonic())
        while time.monotonic() < deadline + 2.0 and not any(
            "Falkenstein" in c for c in run.column("#activity", "content")
        ):
            await run.pilot.pause(0.05)
        assert any("Falkenstein" in c for c in run.column("#activity", "content"))
        assert waited < 2.0
        # the other process merged at its own (real) clock, decaying everything to that
        # day; whatever it wrote, the scopes pane and the rankings agree on it
        model = run.app.model
        assert model is not None
        await run.settle()
        assert run.rows("#scopes")[0][1] == str(model.counts().active)


# --- large files -------------------------------------------------------------------------


def big_memory(n: int) -> str:
    rng = random.Random(n)
    entries = []
    for i in range(n):
        last = NOW - timedelta(days=rng.randint(0, 200), seconds=rng.randint(0, 86_399))
        entries.append(
            MemoryEntry(
                id=f"{i:08x}",
                content=f"memory {i} about topic {rng.randint(0, 999)}",
                category=rng.choice(["fact", "preference", "todo", "workflow"]),
                score=rng.uniform(0.05, 1.0),
                created_at=last,
                last_activated=last,
                scored_at=last,
                hits=rng.randint(0, 9),
            )
        )
    return render_memory(entries, now=NOW)


async def test_a_large_file_shows_its_head_first_then_everything(tmp_path: Path) -> None:
    ws = tmp_path / "big"
    ws.mkdir()
    (ws / "MEMORY.md").write_text(big_memory(3000), encoding="utf-8")
    clock = ManualClock(NOW)
    async with MemoryCore.open(Config(workspace=str(ws)), clock=clock) as core:
        seen: list[Message] = []
        app = make_app(core, clock=clock, head_bytes=64 * 1024)
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            run = Running(pilot, app, core, clock, seen)
            await run.settle()
            views = [m.view for m in seen if isinstance(m, RankingsReady)]
            assert not views[0].complete and views[0].matching and views[0].expected_total == 3000
            assert views[-1].complete and views[-1].total == 3000
            assert "3,000 entries" in run.text("#rank-status")
            scores = [r.score for r in views[-1].first_rows(3000)]
            assert scores == sorted(scores, reverse=True)
            table = app.query_one(RankTable)
            last = views[-1].row(2999).entry.id
            await pilot.press("end")
            await run.until(lambda: app.current_id == last, what="the last entry highlighted")
            await run.settle()
            assert table.cursor_row == 2999 and table.cells_at(2999)[0].plain == "3000"
            # only what was on screen was ever turned into cells
            assert len(table._rows) < 100


def test_the_tui_imports_only_the_core() -> None:
    """No adapter (bot) code is needed to inspect a workspace."""
    probe = (
        "import importlib, pkgutil, sys, tui\n"
        "for info in pkgutil.walk_packages(tui.__path__, 'tui.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'adapters', 'telegram', 'dingtalk_stream', 'openai_server'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
