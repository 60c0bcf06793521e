"""Shared fixtures: a temporary workspace, its config, a fixed clock and an open core."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core import engine
from memory_core.clock import ManualClock
from memory_core.config import Config, load_config
from memory_core.engine import MemoryCore

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
"""The instant every `clock` fixture starts at."""


@pytest.fixture(autouse=True)
def _no_proxy_for_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake servers listen on localhost; a proxy from the environment must not intercept."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(autouse=True)
def _words_alone_unless_dense(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A core ranks by words alone unless its test is marked `dense`: as for a user
    without the `vector` extra. Dense tests opt in and load the local model."""
    if request.node.get_closest_marker("dense") is None:
        monkeypatch.setattr(engine, "build_embedder", lambda settings: None)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def config(workspace: Path) -> Config:
    return load_config(None, env={}, workspace=workspace)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
async def core(config: Config, clock: ManualClock) -> AsyncIterator[MemoryCore]:
    async with MemoryCore.open(config, clock=clock) as opened:
        yield opened
