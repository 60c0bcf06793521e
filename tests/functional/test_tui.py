"""The TUI driven by Pilot over a demo workspace: what every pane holds, what every action
writes, and that changes made by another process show up by themselves."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Input, Select

from adapters.demo import ALICE, LI_LEI
from memory_core.base.entries import ArchiveReason, MemoryEntry
from memory_core.base.policy import DEFAULT_POLICY
from memory_core.base.scope import MAIN
from memory_core.longterm.decay import decay_all
from memory_core.longterm.scoring import Status, status_of
from tests.functional.tui_support import (
    NOW,
    demo_template_fixture,  # noqa: F401  (a fixture)
    demo_ws_fixture,  # noqa: F401  (a fixture)
    running,
)
from tui.messages import ArchiveLoaded, RankingsReady, ScopesLoaded
from tui.model import COLUMNS, RankingModel, what_if
from tui.widgets.detail import DetailPane
from tui.widgets.ranktable import GAP, RankTable

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
