"""Sessions and their messages as values: what a history backend stores and returns.

Apart from the SQLite store (history.py) so that the storage interfaces (interfaces.py),
the other backends and the conversation layer can speak of sessions and messages without
importing an implementation of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from memory_core.base.records import RecordedMessage
from memory_core.base.scope import ScopeKey
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
class NewMessage:
    """A message to store (`HistoryBackend.add_message`): its fields written once here,
    not copied into the signature of every backend and wrapper."""

    scope: ScopeKey
    session_id: str
    role: str
    content: str
    created_at: datetime
    speaker: str = ""
    speaker_id: str | None = None
    """The sender's platform id in a group (what `chatmem erase --person` finds their
    lines by), None when not known."""
    meta: dict[str, Any] | None = None
    indexed: bool = False
    """Store its search chunk in the same commit (a message never lacks its index row)."""
    used_entry_ids: Sequence[str] = ()
    """The long-term entries its prompt used (`activations`), recorded in the same commit."""
    archived: ArchiveState = ArchiveState.FALSE

    @classmethod
    def recorded(
        cls, scope: ScopeKey, session_id: str, message: RecordedMessage, *, indexed: bool
    ) -> NewMessage:
        """A message of a conversation held elsewhere (an import, a migration, a demo),
        stored with its own time, speaker, metadata and archive state; one in its archive
        file already is never indexed twice."""
        return cls(
            scope,
            session_id,
            message.role,
            message.content,
            message.at,
            speaker=message.speaker,
            speaker_id=message.speaker_id,
            meta=dict(message.meta or {}) or None,
            indexed=indexed and message.archived != ArchiveState.TRUE,
            archived=ArchiveState(message.archived),
        )

    def stored(self, message_id: int) -> StoredMessage:
        """The message as a backend returns it once stored under `message_id`."""
        return StoredMessage(
            id=message_id,
            scope=self.scope.value,
            session_id=self.session_id,
            role=self.role,
            speaker=self.speaker,
            content=self.content,
            created_at=self.created_at,
            archived=self.archived,
            archive_attempts=0,
            archive_next_at=None,
            compacted=False,
            meta=self.meta or {},
            speaker_id=self.speaker_id or None,
        )


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
