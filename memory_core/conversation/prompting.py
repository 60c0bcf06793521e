"""Pure assembly of what the model sees in one turn: system prompt and history window."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from memory_core.base.text import estimate_tokens
from memory_core.config.memory import HistorySettings
from memory_core.llm.client import Message

# SUMMARY_ROLE lives in storage/sessions.py (which cannot import this module) and is re-exported.
from memory_core.storage.sessions import SUMMARY_ROLE as SUMMARY_ROLE
from memory_core.storage.sessions import StoredMessage

BASE_INSTRUCTIONS = """You are a helpful assistant with a long-term memory of this chat.
你是一个有长期记忆的助手。Answer in the user's language.

Memory rules:
- The memory blocks below are what you know from earlier conversations of THIS chat only.
- Before answering questions about the past (之前/上次/昨天/还记得吗, "do you remember",
  "last time", decisions, preferences, dates), call memory_search; quote exact details after
  memory_get. If nothing is found, say you searched and did not find it. Never invent memories.
- When the user asks you to remember something, or states a durable preference, fact or
  decision, call memory_save (target long-term); for day-to-day notes use target daily."""

RECALL_PREFLIGHT = (
    "The user is asking about the past: call memory_search first, then answer from what it "
    "finds. 用户在问过去的事：先调用 memory_search 再回答。"
)

FLUSH_INSTRUCTIONS = """This conversation is about to be compacted; older messages will be
replaced by a summary. Save anything worth keeping that is not saved yet with memory_save
(target daily; long-term for durable preferences, facts and decisions). When done, or if
nothing needs saving, reply exactly NO_REPLY."""

COMPACT_INSTRUCTIONS = """Summarise the conversation so far in a few bullet points for your own
later reference: facts, decisions, open questions, the user's requests. Use the conversation's
language. Reply with the summary only."""

NO_REPLY = "NO_REPLY"


def system_prompt(
    now: datetime,
    *,
    memories: str = "",
    daily_notes: str = "",
    injection: str = "",
    recall_intent: bool = False,
    offline_note: str = "",
) -> str:
    parts = [BASE_INSTRUCTIONS, f"Current time: {now.isoformat(timespec='minutes')}"]
    if memories:
        parts.append(memories)
    if daily_notes:
        parts.append("# 近两日笔记 (recent daily notes)\n" + daily_notes)
    if injection:
        parts.append(injection)
    if recall_intent:
        parts.append(RECALL_PREFLIGHT)
    if offline_note:
        parts.append(offline_note)
    return "\n\n".join(parts)


@functools.lru_cache(maxsize=1024)
def _message_cost(text: str) -> int:
    """Tokens of one history message plus its framing; remembered, because every turn
    measures mostly the same messages as the turn before."""
    return estimate_tokens(text) + 4


def history_window(messages: Sequence[StoredMessage], settings: HistorySettings) -> list[Message]:
    """The newest messages under the token budget: at least `min_messages`, at most
    `max_messages`, each cut at `message_chars` (assistant replies are what usually run
    long), duplicates by (created_at, text) dropped, the latest summary kept in front."""
    seen: set[tuple[str, str]] = set()
    usable: list[StoredMessage] = []
    summary: StoredMessage | None = None
    for message in messages:
        if message.role == SUMMARY_ROLE:
            summary = message
            continue
        if message.role not in ("user", "assistant") or not message.content.strip():
            continue
        key = (message.created_at.isoformat(), message.content)
        if key in seen:
            continue
        seen.add(key)
        usable.append(message)
    picked: list[Message] = []
    budget = settings.token_budget
    for message in reversed(usable):
        if len(picked) >= settings.max_messages:
            break
        text = message.content
        if len(text) > settings.message_chars:
            text = text[: settings.message_chars] + "…[truncated]"
        cost = _message_cost(text)
        if cost > budget and len(picked) >= settings.min_messages:
            break
        budget -= cost
        picked.append({"role": message.role, "content": text})
    picked.reverse()
    if summary is not None:
        picked.insert(
            0, {"role": "system", "content": "Earlier in this conversation:\n" + summary.content}
        )
    return picked


def history_tokens(messages: Sequence[StoredMessage]) -> int:
    return sum(estimate_tokens(m.content) + 4 for m in messages if not m.compacted)
