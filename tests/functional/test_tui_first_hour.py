"""The TUI in a new user's first hour: quarantined blocks shown, keys that never type into a box, help for every key, counts that agree, and a screen usable at 80 by 24."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.binding import Binding
from textual.widgets import Input, Select, TabbedContent

from adapters.demo import LI_LEI
from memory_core.base.clock import ManualClock
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.scoring import Status
from memory_core.recall.request import SearchRequest
from tests.functional.tui_support import (
    NOW,
    SIZE,
    Running,
    demo_template_fixture,  # noqa: F401  (a fixture)
    demo_ws_fixture,  # noqa: F401  (a fixture)
    notices,
    running,
)
from tui import ChatmemApp, make_app
from tui.capture import screen_text
from tui.model import COLUMNS
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen
from tui.screens.help import HelpScreen
from tui.widgets.ranktable import RankTable

# --- a new user's first hour (issue 11, item 14) ----------------------------------------

BROKEN_BLOCK = (
    "### [0badb10c] fact | 0.50 | 2026-02-01 | zero\n"
    '<!-- chatmem: {"score": 0.5} -->\n'
    "The office moved to 虹桥 in February\n\n"
)


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
