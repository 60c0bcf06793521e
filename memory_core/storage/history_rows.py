"""Rows of the `sessions` and `messages` tables read back as values (pure, no I/O).

Apart from the store (history.py) that runs the statements: the columns a statement
selects and the decoding of what it returns belong together, and both are the same for
every reader of those rows (the store, the tests' own checks of what was stored).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_core.base.clock import parse_when
from memory_core.storage.sessions import ArchiveState, Session, StoredMessage

MESSAGE_COLUMNS = (
    "id, scope, session_id, role, speaker, content, created_at, archived, archive_attempts,"
    " archive_next_at, compacted, meta, speaker_id"
)
SESSION_COLUMNS = (
    "id, scope, started_at, last_at, status, extract_attempts, next_extract_at, flushed_at"
)

_ARCHIVE_STATES = {state.value: state for state in ArchiveState}


@functools.lru_cache(maxsize=4096)
def _when(text: str) -> datetime:
    """`parse_when`, remembered: every turn re-reads the same few dozen message times."""
    return parse_when(text)


def message_from_row(row: Sequence[Any]) -> StoredMessage:
    meta = row[11]
    return StoredMessage(
        id=int(row[0]),
        scope=row[1],
        session_id=row[2],
        role=row[3],
        speaker=row[4],
        content=row[5],
        created_at=_when(row[6]),
        archived=_ARCHIVE_STATES.get(row[7]) or ArchiveState(row[7]),
        archive_attempts=int(row[8]),
        archive_next_at=_when(row[9]) if row[9] else None,
        compacted=bool(row[10]),
        meta=json.loads(meta) if meta and meta != "{}" else {},
        speaker_id=row[12],
    )


def session_from_row(row: Sequence[Any]) -> Session:
    return Session(
        id=row[0],
        scope=row[1],
        started_at=parse_when(row[2]),
        last_at=parse_when(row[3]),
        status=row[4],
        extract_attempts=int(row[5]),
        next_extract_at=parse_when(row[6]) if row[6] else None,
        flushed_at=parse_when(row[7]) if row[7] else None,
    )


def maybe_when(value: object) -> datetime | None:
    """A time column that may be NULL (or empty)."""
    return parse_when(value) if isinstance(value, str) and value else None
