"""What the search index tests share: a config and core that re-check files on every
search, and helpers that write files and read hits and chunk rows."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.scope import MAIN, ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from memory_core.recall.index import Hit
from memory_core.recall.index.long_term_lines import LINE_FROM, LINE_TO
from memory_core.recall.request import SearchRequest
from tests.conftest import START
from tests.support import (
    index_of,
    sql,
)

ROOT = Path(__file__).resolve().parents[2]


DATA = ROOT / "tests" / "data" / "recall_bilingual.json"


DAY = "memory/2026-03-01.md"


TODAY = START.date()


@pytest.fixture(name="eager_config")
def eager_config_fixture(config: Config) -> Config:
    """Search re-checks files on every call."""
    return config.model_copy(
        update={"recall": config.recall.model_copy(update={"sync_min_interval_seconds": 0.0})}
    )


@pytest.fixture(name="eager")
async def eager_fixture(eager_config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(eager_config, clock=clock) as core:
        yield core


def texts(hits: list[Hit]) -> list[str]:
    return [h.text for h in hits]


async def found(core: MemoryCore, query: str, scope: ScopeKey = MAIN, **kw: Any) -> list[str]:
    return texts(
        await core.finder.search(scope, SearchRequest(query, limit=20, min_score=0.0, **kw))
    )


async def chunk_rows(core: MemoryCore, scope: ScopeKey = MAIN) -> list[tuple[Any, ...]]:
    sid = await index_of(core).scope_id(scope)
    rows = await sql(
        core,
        f"SELECT c.path, {LINE_FROM} AS line, {LINE_TO}, c.kind, c.text, c.tokens, c.hidden"
        " FROM chunks AS c WHERE c.scope_id = ? ORDER BY c.path, line, c.text",
        sid,
    )
    return [tuple(r) for r in rows]


def write(core: MemoryCore, relative: str, text: str) -> Path:
    path = core.workspace.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def bump_mtime(path: Path) -> None:
    """Hand edits within one timestamp tick must still look changed to the sync."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
