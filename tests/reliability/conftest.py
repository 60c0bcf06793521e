"""Fixtures of the reliability suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres import PostgresServer


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[PostgresServer]:
    """A PostgreSQL of the test's own, for tests that stop and start it (the shared
    server must not stop under other tests)."""
    (tmp_path / "own-postgres").mkdir()
    server = PostgresServer(tmp_path / "own-postgres")
    try:
        yield server
    finally:
        server.stop()
