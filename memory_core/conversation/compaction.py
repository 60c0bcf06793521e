"""A long session near the model's window: flushed to daily notes, then compacted.

Before old history is summarised away, the model is asked to save what matters in it
(the `memory_save` tool, to daily notes); then the old messages become one summary
message and leave the prompt's history. Checked after every turn, cheaply: characters
bound tokens from above, so most turns never count tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from memory_core.base.errors import LLMError
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.conversation.prompting import (
    COMPACT_INSTRUCTIONS,
    FLUSH_INSTRUCTIONS,
    NO_REPLY,
    SUMMARY_ROLE,
    history_tokens,
)
from memory_core.conversation.tools import MEMORY_SAVE, ToolContext, dispatch
from memory_core.llm.client import LLMClient, Message
from memory_core.memory_service import MemoryService
from memory_core.storage.interfaces import HistoryBackend
from memory_core.storage.sessions import NewMessage, Session, StoredMessage

log = logging.getLogger(__name__)


class SessionCompactor:
    """Flushes and compacts a session's history when it nears the model's window."""

    def __init__(
        self, memory: MemoryService, history: HistoryBackend, llm: LLMClient, config: Config
    ) -> None:
        self.memory = memory
        self.history = history
        self.llm = llm
        self.config = config

    async def maybe_flush(self, scope: ScopeKey, session: Session, chars: int) -> None:
        """`chars`: the session's live characters (`HistoryStore.turn_context`), counted
        at the start of the turn plus what the turn stored."""
        settings = self.config.llm
        threshold = settings.context_tokens * settings.flush_at_ratio
        # Tokens never exceed characters (+4 per message), so most turns stop here.
        if chars < threshold * 0.8:
            return
        messages = await self.history.session_messages(session.id)
        if history_tokens(messages) < threshold:
            return
        await self.flush(scope, session.id, messages)

    async def flush(
        self, scope: ScopeKey, session_id: str, messages: Sequence[StoredMessage] | None = None
    ) -> bool:
        """Let the model save what matters (daily notes), then compact old history into a
        summary message. Returns whether the session was compacted."""
        if not self.llm.configured:
            return False
        current = (
            list(messages)
            if messages is not None
            else await self.history.session_messages(session_id)
        )
        talk = [m for m in current if m.role in ("user", "assistant", SUMMARY_ROLE)]
        said = [m for m in talk if m.role != SUMMARY_ROLE]
        if len(said) <= self.config.llm.keep_after_compaction:
            # Nothing said since the last compaction beyond what it keeps: a summary of a
            # summary would cost two model calls (at every stop) and change nothing.
            return False
        transcript: list[Message] = [
            {"role": "assistant" if m.role == "assistant" else "user", "content": m.content}
            for m in talk
        ]
        ctx = ToolContext(self.memory, scope, session_id)
        flush_messages: list[Message] = [
            {"role": "system", "content": FLUSH_INSTRUCTIONS},
            *transcript,
        ]
        try:
            for _ in range(max(1, self.config.llm.max_tool_steps)):
                answer = await self.llm.chat(flush_messages, tools=[MEMORY_SAVE])
                if not answer.tool_calls:
                    if (answer.content or "").strip() not in ("", NO_REPLY):
                        log.info("flush answered with text instead of NO_REPLY; ignored")
                    break
                flush_messages.append(answer.as_message())
                for call in answer.tool_calls:
                    result = await dispatch(ctx, call.name, call.arguments)
                    flush_messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": result}
                    )
            keep = self.config.llm.keep_after_compaction
            old = talk[: len(talk) - keep]
            summary = await self.llm.chat(
                [{"role": "system", "content": COMPACT_INSTRUCTIONS}, *transcript[: len(old)]]
            )
        except LLMError as exc:
            log.warning("flush of session %s failed: %s", session_id, exc)
            return False
        await self.history.add_message(
            NewMessage(
                scope, session_id, SUMMARY_ROLE, (summary.content or "").strip(), self.memory.now()
            )
        )
        # Everything up to the last summarised message goes, tool results included: left
        # behind, they would keep the session over the line and flush it on every turn.
        cutoff = old[-1].id
        await self.history.mark_compacted([m.id for m in current if m.id <= cutoff])
        await self.history.mark_flushed(session_id, self.memory.now())
        return True
