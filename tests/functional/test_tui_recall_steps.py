"""The Recall tab shows what each ranking step contributed to the selected hit: the
same contributions `chatmem search --explain` prints."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from memory_core.base.records import explained
from memory_core.base.scope import MAIN
from memory_core.recall.index.steps import explaining
from memory_core.recall.request import SearchRequest
from tests.functional.tui_support import (  # noqa: F401  (fixtures)
    demo_template_fixture,
    demo_ws_fixture,
    running,
)


async def test_the_recall_tab_shows_the_selected_hits_ranking_steps(demo_ws: Path) -> None:
    async with running(demo_ws) as run:
        await run.pilot.press("4")
        run.app.query_one("#recall-query", Input).focus()
        await run.pilot.press(*"Hetzner docker", "enter")
        await run.settle()
        await run.until(lambda: "for 'Hetzner docker'" in run.text("#recall-status"))
        with explaining():
            hits = await run.core.finder.search(MAIN, SearchRequest("Hetzner docker", limit=10))
        assert len(hits) >= 2 and all(h.steps for h in hits)
        first = run.text("#recall-steps")
        assert first == f"ranking of {hits[0].location}: {explained(hits[0].steps)}"
        assert first.split(": ", 1)[1].startswith("words +")
        table = run.table("#recall-hits")
        table.focus()
        await run.pilot.press("down")
        await run.until(lambda: hits[1].location in run.text("#recall-steps"))
        assert run.text("#recall-steps").endswith(explained(hits[1].steps))
