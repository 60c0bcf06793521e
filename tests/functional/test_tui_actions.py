"""The TUI's writes: pin, archive and restore, forget and undo, edit, consolidation now, each confirmed first, and the command palette offering every action."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import TextArea

from memory_core.base.entries import ArchiveReason
from memory_core.base.scope import MAIN
from memory_core.longterm.memory_md_parser import parse_memory
from tests.functional.tui_support import (
    Running,
    demo_template_fixture,  # noqa: F401  (a fixture)
    demo_ws_fixture,  # noqa: F401  (a fixture)
    meta_of,
    notices,
    palette_offers,
    running,
)
from tui.commands import app_commands
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit import EditScreen

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
