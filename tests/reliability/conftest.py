"""Fixtures of the reliability suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PostgresServer


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of the test's own, for tests that stop and start it (the shared
    server must not stop under other tests)."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()
