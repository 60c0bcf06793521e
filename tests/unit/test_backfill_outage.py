"""Vector backfills during a database outage: one warning, not a line per scope and try."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memory_core.base.clock import ManualMonotonic
from memory_core.base.errors import DatabaseUnreachable
from memory_core.storage.vectors.backfill import Backfills
from testkit.embedder import ConceptEmbedder


class Away:
    """A database whose server is away."""

    backend = "postgres"

    async def read(self, work: Any) -> Any:
        raise DatabaseUnreachable("the database is unreachable: connection refused")

    async def write(self, work: Any) -> Any:
        raise DatabaseUnreachable("the database is unreachable: connection refused")


async def test_backfills_in_an_outage_say_so_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memory_core")
    backfills = Backfills(
        Away(),  # type: ignore[arg-type]
        ConceptEmbedder(),
        writer=None,  # type: ignore[arg-type]
        on_stored=lambda sid, stored: None,
        batch_size=8,
        monotonic=ManualMonotonic(),
    )
    for sid in range(1, 21):
        backfills.schedule(sid)
        await backfills.drain()
    said = [r.getMessage() for r in caplog.records]
    assert [m for m in said if "vector backfill paused" in m] != []
    assert len([m for m in said if "vector backfill" in m]) == 1, said
    assert not [m for m in said if "not updated" in m], said
    assert not [r for r in caplog.records if r.exc_info]
