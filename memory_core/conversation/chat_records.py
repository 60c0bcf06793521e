"""What the chat writes besides memories: its messages, and the events of its decisions.

A turn, a tool call, `/remember` and an extraction all store through here, so a message
and its index row, the entries its prompt used and its event-log lines are written the
same way wherever it comes from.
"""

from __future__ import annotations

from dataclasses import replace

from memory_core.base.merge_values import ChangeKind, MergeResult
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.memory_service import MemoryService
from memory_core.notes.event_log import decision_events, message_events
from memory_core.storage.interfaces import HistoryBackend
from memory_core.storage.sessions import NewMessage, StoredMessage


class ChatRecords:
    """Stores the chat's messages and records its decisions in the scope's event log."""

    def __init__(self, memory: MemoryService, history: HistoryBackend, config: Config) -> None:
        self.memory = memory
        self.history = history
        self.config = config

    async def message(self, message: NewMessage) -> StoredMessage:
        """Store a message, its index row and (for a reply) the long-term entries its
        prompt used, in one transaction: one commit per message instead of two or three;
        then its events in the scope's event log. A message not `indexed` (a command, a
        reply to one, a canned reply: `requests.searchable`) gets no index row, nor does
        one that is not a turn of the conversation (a tool's result, a summary)."""
        indexed = message.indexed and message.role in ("user", "assistant")
        stored = await self.history.add_message(
            replace(message, indexed=indexed and self.memory.indexed)
        )
        if self.config.history.event_log:
            events = message_events(
                message.role,
                message.content,
                message.created_at,
                message.session_id or None,
                message.speaker,
                message.meta,
                message.speaker_id,
            )
            await self.memory.events.record(message.scope, *events)
        return stored

    async def decided(
        self, scope: ScopeKey, what: str, result: MergeResult, session_id: str | None
    ) -> None:
        """The long-term changes a capture or an extraction made, as decision events."""
        if self.config.history.event_log:
            changes = [
                (c.kind.value, c.entry_id)
                for c in result.changes
                if c.kind is not ChangeKind.DECAYED
            ]
            events = decision_events(what, changes, self.memory.now(), session_id)
            await self.memory.events.record(scope, *events)
