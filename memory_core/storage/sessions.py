"""Sessions and their messages as values: what a history backend stores and returns.

Apart from the SQLite store (history.py) so that the storage interfaces (interfaces.py),
the other backends and the conversation layer can speak of sessions and messages without
importing an implementation of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from memory_core.base.sql import Connection


class ArchiveState(StrEnum):
    FALSE = "false"
    PENDING = "pending"
    TRUE = "true"


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    scope: str
    session_id: str
    role: str
    speaker: str
    content: str
    created_at: datetime
    archived: ArchiveState
    archive_attempts: int
    archive_next_at: datetime | None
    compacted: bool
    meta: dict[str, Any]
    speaker_id: str | None = None
    """The sender's platform id (a group member), when the front end gave one."""


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    scope: str
    started_at: datetime
    last_at: datetime
    status: str
    extract_attempts: int
    next_extract_at: datetime | None
    flushed_at: datetime | None


@dataclass(frozen=True, slots=True)
class CapReport:
    removed: list[int]
    over_soft: bool
    overflow: bool
    """True when the hard cap is still exceeded by unarchived messages: archive now."""


@dataclass(frozen=True, slots=True)
class TurnContext:
    messages: list[StoredMessage]
    """Newest live messages of the session, oldest first, its summary in front."""
    chars: int
    """Characters of the session's live messages (SQLite `LENGTH`)."""


AfterInsert = Callable[[Connection, int], None]
"""A step of a message's insert transaction, given the new message id; it runs on the
database thread (`Database.write`), so it must not touch the event loop."""


SUMMARY_ROLE = "summary"
"""The role of a compaction summary (prompting.SUMMARY_ROLE; prompting imports this module)."""


def sql_length(text: str) -> int:
    """What SQLite's `LENGTH` gives for a text value: characters before the first NUL."""
    return len(text.partition("\x00")[0])
