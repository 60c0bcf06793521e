"""The memories of a closed session: extracted from what was said and merged, once.

`/new`, the idle-session sweep and the retries all end here. The model extracts when one
is configured (the offline heuristic otherwise); a model failure schedules a retry with a
growing delay (`EXTRACT_BACKOFF`). A session is merged at most once: the audit log's
merged sessions are asked first, and the merge itself skips a session it has seen.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from memory_core.base.errors import LLMError
from memory_core.base.merge_values import MergeResult
from memory_core.base.requests import evidence
from memory_core.base.scope import ScopeKey
from memory_core.conversation.chat_records import ChatRecords
from memory_core.llm.client import LLMClient
from memory_core.llm.extract import (
    TranscriptLine,
    extract_with_llm,
    heuristic_candidates,
)
from memory_core.longterm.claims import group_speaker
from memory_core.memory_service import MemoryService
from memory_core.storage.interfaces import AuditBackend, HistoryBackend
from memory_core.storage.sessions import StoredMessage

log = logging.getLogger(__name__)

EXTRACT_BACKOFF = (
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=6),
)


class SessionExtractor:
    """Extracts and merges closed sessions, one run per session at a time."""

    def __init__(
        self,
        memory: MemoryService,
        history: HistoryBackend,
        llm: LLMClient,
        audit: AuditBackend,
        records: ChatRecords,
    ) -> None:
        self.memory = memory
        self.history = history
        self.llm = llm
        self.audit = audit
        self.records = records
        self._extracting: set[str] = set()

    async def extract(self, scope: ScopeKey, session_id: str) -> MergeResult | None:
        """Extract and merge one closed session; None (and a retry scheduled) if the model
        failed, or if the session is being extracted already. Idempotent: a session
        already merged changes nothing."""
        if session_id in self._extracting:
            return None
        self._extracting.add(session_id)
        try:
            return await self._extract(scope, session_id)
        finally:
            self._extracting.discard(session_id)

    async def _extract(self, scope: ScopeKey, session_id: str) -> MergeResult | None:
        if session_id in await self.audit.seen_sessions(scope):
            # Already merged: no model call and no write (the merge would skip it anyway).
            session = await self.history.get_session(session_id)
            if session is not None and session.status != "extracted":
                await self.history.mark_extracted(session_id, {})
            return MergeResult(entries=await self.memory.long_term.entries(scope), skipped=True)
        messages = await self.history.session_messages(session_id, include_compacted=True)
        lines = conversation_lines(messages, scope)
        now = self.memory.now()
        if self.llm.configured:
            try:
                candidates = await extract_with_llm(
                    self.llm,
                    lines,
                    await self.memory.long_term.entries(scope),
                    now,
                    self.memory.long_term.policy,
                )
            except LLMError as exc:
                session = await self.history.get_session(session_id)
                attempts = session.extract_attempts if session else 0
                delay = EXTRACT_BACKOFF[min(attempts, len(EXTRACT_BACKOFF) - 1)]
                await self.history.mark_extract_failed(session_id, now + delay)
                log.warning(
                    "extraction of session %s failed (%s); retry in %s", session_id, exc, delay
                )
                return None
        else:
            candidates = heuristic_candidates(lines)
        result = await self.memory.long_term.merge_candidates(
            scope, candidates, session_id=session_id, source="extract"
        )
        await self.history.mark_extracted(session_id, result.stats)
        await self.records.decided(scope, "extract", result, session_id)
        return result


def conversation_lines(messages: Sequence[StoredMessage], scope: ScopeKey) -> list[TranscriptLine]:
    """What the extractor may learn from: the user's and the assistant's messages that
    are evidence (`requests.evidence`): without "remember …" requests (captured when they
    were said: left in, the heuristic kept "我喜欢乌龙茶，请记住" beside the "我喜欢乌龙茶" it
    had saved), nor the commands, forget requests and offline notices that older versions
    stored; nor the replies to them. In a group `scope` a user line names its speaker."""
    talk = [m for m in messages if m.role in ("user", "assistant")]
    kept = evidence((m.role == "assistant", m.content) for m in talk)
    return [
        TranscriptLine(
            m.role, m.content, (group_speaker(scope, m.speaker) or "") if m.role == "user" else ""
        )
        for m, keep in zip(talk, kept, strict=True)
        if keep
    ]
