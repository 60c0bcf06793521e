"""One conversational turn, `/new`, memory requests, and flushing long sessions.

A turn: store the user's message, assemble the prompt (prompt memories, on a session's first
turn the last two days' notes, recall injection, the history window), run the tool loop,
store the reply, remember which long-term entries were used, and flush + compact when the
session nears the model's window. Every step takes the ScopeKey the adapter resolved.

What is not stored as a message: commands (`/remember`, `/forget` come here as
`remember` / `ask_forget`), forget requests with their question and answer (stored, the
question kept the very text a person asked to forget indexed and archived), and the
offline notice (stored, it was indexed and came back as a "related memory" of later
turns). A "remember that …" said in the chat is stored and indexed like any message (it
stays findable as a turn; the entry it made ranks above it), but the canned confirmation
is not indexed, and the extractor leaves the request out, since it was captured when it
was said (memory_core/base/requests.py). A message starting with "/" and the reply to it
are stored, not indexed.

The engine serialises the work of each scope (one turn, request or `/new` at a time, any of
them interruptible) and runs the turn itself; the parts a turn or `/new` hands off live
beside it: the forget question (`forget_question.py`), storing messages and decision
events (`chat_records.py`), extracting a closed session (`session_extraction.py`) and
flushing + compacting a long one (`compaction.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from memory_core.base.chunks import ChunkKind
from memory_core.base.errors import ChatmemError, LLMError
from memory_core.base.merge_values import ChangeKind, Kept, MergeResult
from memory_core.base.records import Hit
from memory_core.base.requests import (
    MODEL_DOWN_REPLIES,
    REMEMBER_REPLIES,
    explicit_request,
    is_command,
)
from memory_core.base.scope import ScopeKey
from memory_core.base.text import tokenize, writes_cjk
from memory_core.config import Config
from memory_core.conversation.chat_records import ChatRecords
from memory_core.conversation.compaction import SessionCompactor
from memory_core.conversation.forget_question import ForgetQuestions
from memory_core.conversation.prompting import history_window, system_prompt
from memory_core.conversation.session_extraction import SessionExtractor
from memory_core.conversation.tools import TOOL_SCHEMAS, ToolContext, dispatch
from memory_core.llm.client import LLMClient, Message
from memory_core.longterm.claims import claim_reply
from memory_core.memory_service import MemoryService
from memory_core.recall.injection import has_recall_intent, without_known
from memory_core.storage.interfaces import AuditBackend, HistoryBackend
from memory_core.storage.sessions import NewMessage, StoredMessage, sql_length

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 100_000
"""A chat message longer than this is answered with a refusal and not stored: a turn
reads, tokenizes and indexes its whole text several times (a 10 MB line took 23 s and
gigabytes), and no model's window holds it. A document is saved with `chatmem capture`
(up to `long_term.max_capture_bytes`) or sent in parts."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: str
    session_id: str
    tool_calls: list[str] = field(default_factory=list)
    injected: list[str] = field(default_factory=list)
    """`path:line` of the recall hits that went into the prompt."""


def too_long(text: str) -> str:
    """The one-line answer to a message over `MAX_MESSAGE_CHARS` (nothing was kept)."""
    if writes_cjk(text[:1000]):
        return (
            f"这条消息太长了（{len(text)} 个字符，上限 {MAX_MESSAGE_CHARS}），没有保存。"
            "请分段发送，或用 `chatmem capture` 保存文档。"
        )
    return (
        f"That message is too long to take ({len(text)} characters, at most"
        f" {MAX_MESSAGE_CHARS}); nothing was kept. Send it in parts, or save a document"
        " with `chatmem capture`."
    )


@dataclass(frozen=True, slots=True)
class NewSessionResult:
    reply: str
    closed_session: str | None
    result: MergeResult | None
    retry_later: bool = False


def learned_summary(result: MergeResult, chinese: bool) -> str:
    new, reinforced = result.count(ChangeKind.ADDED), result.count(ChangeKind.REINFORCED)
    contradicted = result.count(ChangeKind.CONTRADICTED)
    if chinese:
        text = f"记住了 {new} 条新记忆，强化了 {reinforced} 条"
        return text + (f"，修正了 {contradicted} 条" if contradicted else "") + "。"
    text = f"{new} new, {reinforced} reinforced"
    return text + (f", {contradicted} contradicted" if contradicted else "")


class ChatEngine:
    def __init__(
        self,
        memory: MemoryService,
        history: HistoryBackend,
        llm: LLMClient,
        config: Config,
        audit: AuditBackend,
    ) -> None:
        self.memory = memory
        self.history = history
        self.llm = llm
        self.config = config
        self.audit = audit
        self.records = ChatRecords(memory, history, config)
        self.forget_questions = ForgetQuestions(memory)
        self.extractor = SessionExtractor(memory, history, llm, audit, self.records)
        self.compactor = SessionCompactor(memory, history, llm, config)
        self._session_locks: dict[str, asyncio.Lock] = {}
        self._working: dict[str, set[asyncio.Task[Any]]] = {}

    def lock_for(self, scope: ScopeKey) -> asyncio.Lock:
        """One turn at a time per scope (its session); scopes run in parallel."""
        return self._session_locks.setdefault(scope.value, asyncio.Lock())

    @contextmanager
    def _working_on(self, scope: ScopeKey) -> Iterator[None]:
        """Note the task doing a turn, request or `/new` of the scope, for `interrupt`."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - always called from a task
            yield
            return
        tasks = self._working.setdefault(scope.value, set())
        tasks.add(task)
        try:
            yield
        finally:
            tasks.discard(task)
            if not tasks:
                self._working.pop(scope.value, None)

    def interrupt(self, scope: ScopeKey) -> int:
        """Cancel the scope's turns, requests and `/new` under way; how many there were.

        For a person who pressed Ctrl-C while the model was answering: the front end stops
        waiting, and the work stops too instead of running on into a core being closed.
        What was stored stays consistent: each message is one transaction, and a reply
        that was not stored was never shown."""
        tasks = list(self._working.get(scope.value, ()))
        for task in tasks:
            task.cancel()
        return len(tasks)

    # --- one turn -------------------------------------------------------------------
    async def turn(
        self, scope: ScopeKey, text: str, *, speaker: str = "", speaker_id: str | None = None
    ) -> TurnResult:
        with self._working_on(scope):
            async with self.lock_for(scope):
                return await self._turn(scope, text.strip(), speaker, speaker_id)

    async def _turn(
        self, scope: ScopeKey, text: str, speaker: str, speaker_id: str | None
    ) -> TurnResult:
        if not text:
            raise ChatmemError("empty message")
        now = self.memory.now()
        session = await self.history.open_session(scope, now)
        if len(text) > MAX_MESSAGE_CHARS:
            return TurnResult(reply=too_long(text), session_id=session.id)
        chinese = writes_cjk(text)

        # Forgetting is answered and not stored (the module's docstring says why).
        confirmation = await self.forget_questions.answer(scope, text, chinese)
        if confirmation is not None:
            return TurnResult(reply=confirmation, session_id=session.id)
        explicit = explicit_request(text)
        if explicit is not None and explicit[0] == "forget":
            reply = await self.forget_questions.ask(scope, explicit[1], chinese)
            return TurnResult(reply=reply, session_id=session.id)

        window = self.config.history.max_messages * 3
        context = await self.history.turn_context(session.id, window)
        earlier = context.messages
        # Live characters of the session, kept up to date with what this turn stores so
        # the flush check after the reply needs no query of its own.
        chars = context.chars + sql_length(text)
        # A command and the reply to it are stored, not indexed; a request is indexed,
        # its canned confirmation is not (see above).
        said = explicit is not None or not is_command(text)
        await self.records.message(
            NewMessage(scope, session.id, "user", text, now, speaker, speaker_id, indexed=said)
        )
        if explicit is not None:
            reply = await self._remember(scope, explicit[1], chinese, speaker, speaker_id)
            await self.records.message(
                NewMessage(scope, session.id, "assistant", reply, self.memory.now())
            )
            return TurnResult(reply=reply, session_id=session.id)

        recent = [m.content for m in earlier if m.role in ("user", "assistant")][-5:]
        injection = await self.memory.finder.recall(scope, text, recent, session_id=session.id)
        memories = await self.memory.snapshots.prompt_block(scope)
        # The recalled entries still count as used (activations); the prompt states each
        # once, in the memory block if it is there.
        fresh = without_known(injection, memories, self.config.recall.hit_chars)
        first_turn = not any(m.role == "user" for m in earlier)
        daily_notes = await self.memory.notes.recent(scope) if first_turn else ""
        intent = has_recall_intent(text)

        if not self.llm.configured:
            # Not stored: a canned notice is no part of the conversation, and stored it was
            # indexed and came back as a "related memory" of later turns.
            asked = set(tokenize(text))
            related = [
                h for h in injection.hits if not _said_in(h, session.id) and _shares(h, asked)
            ]
            reply = _offline_reply(
                chinese, [h.location + " " + " ".join(h.text.split()) for h in related]
            )
            return TurnResult(
                reply=reply, session_id=session.id, injected=[h.location for h in related]
            )

        messages: list[Message] = [
            {
                "role": "system",
                "content": system_prompt(
                    now,
                    memories=memories,
                    daily_notes=daily_notes,
                    injection=fresh.block,
                    recall_intent=intent,
                ),
            },
            *history_window(earlier, self.config.history),
            {"role": "user", "content": text},
        ]
        ctx = ToolContext(self.memory, scope, session.id, speaker or None, speaker_id)
        try:
            reply, calls, stored = await self._tool_loop(ctx, messages, force_search=intent)
        except LLMError as exc:
            log.warning("turn in scope %s failed at the model: %s", scope, exc)
            reply = MODEL_DOWN_REPLIES[0] if chinese else MODEL_DOWN_REPLIES[1]
            await self.records.message(
                NewMessage(
                    scope,
                    session.id,
                    "assistant",
                    reply,
                    self.memory.now(),
                    meta={"error": str(exc)},
                )
            )
            return TurnResult(reply=reply, session_id=session.id)
        await self.records.message(
            NewMessage(
                scope,
                session.id,
                "assistant",
                reply,
                self.memory.now(),
                used_entry_ids=injection.used_entry_ids,
                indexed=said,
            )
        )
        await self.compactor.maybe_flush(scope, session, chars + stored + sql_length(reply))
        return TurnResult(
            reply=reply,
            session_id=session.id,
            tool_calls=calls,
            injected=[h.location for h in injection.hits],
        )

    async def _tool_loop(
        self, ctx: ToolContext, messages: list[Message], *, force_search: bool
    ) -> tuple[str, list[str], int]:
        """The reply, the tools called, and the characters of the tool results stored."""
        calls: list[str] = []
        stored = 0
        steps = max(1, self.config.llm.max_tool_steps)
        for step in range(steps):
            choice: Any = None
            if force_search and step == 0:
                choice = {"type": "function", "function": {"name": "memory_search"}}
            answer = await self.llm.chat(messages, tools=TOOL_SCHEMAS, tool_choice=choice)
            if not answer.tool_calls:
                return (answer.content or "").strip(), calls, stored
            messages.append(answer.as_message())
            for call in answer.tool_calls:
                calls.append(call.name)
                result = await dispatch(ctx, call.name, call.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
                await self.records.message(
                    NewMessage(
                        ctx.scope,
                        ctx.session_id or "",
                        "tool",
                        result,
                        self.memory.now(),
                        call.name,
                        meta={"arguments": call.arguments},
                    )
                )
                stored += sql_length(result)
        final = await self.llm.chat(messages)
        return (final.content or "").strip(), calls, stored

    # --- memory requests ------------------------------------------------------------
    async def remember(
        self, scope: ScopeKey, text: str, *, speaker: str = "", speaker_id: str | None = None
    ) -> str:
        """`/remember TEXT`: keep `text` as a memory the person (`speaker`, in a group;
        `speaker_id`, their platform id) asked for; the reply."""
        with self._working_on(scope):
            async with self.lock_for(scope):
                return await self._remember(
                    scope, text.strip(), writes_cjk(text), speaker, speaker_id
                )

    async def ask_forget(self, scope: ScopeKey, what: str) -> str:
        """`/forget WHAT`: the question listing the memories about `what`; the scope's next
        turn answers it (`ForgetQuestions.answer`)."""
        with self._working_on(scope):
            async with self.lock_for(scope):
                return await self.forget_questions.ask(scope, what.strip(), writes_cjk(what))

    async def _remember(
        self, scope: ScopeKey, what: str, chinese: bool, speaker: str, speaker_id: str | None
    ) -> str:
        entry, result = await self.memory.long_term.capture(
            scope,
            what,
            category="fact",
            importance="high",
            source="explicit",
            speaker=speaker,
            speaker_id=speaker_id,
        )
        await self.records.decided(scope, "remember", result, None)
        if entry.claim_on is not None and entry.speaker is not None:
            return claim_reply(entry.speaker, chinese) + entry.content
        kept = result.outcome.kept if result.outcome else Kept.SAVED
        chinese_reply, english_reply = REMEMBER_REPLIES[kept.value]
        return (chinese_reply if chinese else english_reply) + entry.content

    # --- /new and extraction --------------------------------------------------------
    async def new_session(self, scope: ScopeKey, *, chinese: bool = False) -> NewSessionResult:
        """Close the scope's session, extract and merge its memories, open the next one."""
        with self._working_on(scope):
            return await self._new_session(scope, chinese)

    async def _new_session(self, scope: ScopeKey, chinese: bool) -> NewSessionResult:
        async with self.lock_for(scope):
            session = await self.history.current_session(scope)
            if session is None:
                await self.history.open_session(scope, self.memory.now())
                reply = "已开始新的会话。" if chinese else "Started a new session."
                return NewSessionResult(reply=reply, closed_session=None, result=None)
            await self.history.close_session(session.id, self.memory.now())
            await self.history.open_session(scope, self.memory.now())
        outcome = await self.extract_session(scope, session.id)
        if outcome is None:
            reply = (
                "新会话已开始；模型暂时不可用，记忆提取稍后会自动重试。"
                if chinese
                else "New session started; the model is unavailable, so extraction will be retried later."
            )
            return NewSessionResult(
                reply=reply, closed_session=session.id, result=None, retry_later=True
            )
        summary = learned_summary(outcome, chinese)
        reply = (
            f"新会话已开始。{summary}" if chinese else f"New session started. Learned: {summary}."
        )
        return NewSessionResult(reply=reply, closed_session=session.id, result=outcome)

    async def extract_session(self, scope: ScopeKey, session_id: str) -> MergeResult | None:
        """Extract and merge one closed session; None (and a retry scheduled) if the model
        failed. Idempotent: a session already merged changes nothing."""
        return await self.extractor.extract(scope, session_id)

    async def flush(
        self, scope: ScopeKey, session_id: str, messages: Sequence[StoredMessage] | None = None
    ) -> bool:
        """Let the model save what matters (daily notes), then compact old history into a
        summary message. Returns whether the session was compacted."""
        return await self.compactor.flush(scope, session_id, messages)

    # --- scheduled work -------------------------------------------------------------
    async def close_idle_sessions(self) -> int:
        """Extract sessions idle past the configured minutes, and retry failed ones."""
        now = self.memory.now()
        idle_before = now - timedelta(minutes=self.config.history.idle_minutes)
        done = 0
        for session in await self.history.sessions_due(now, idle_before):
            scope = ScopeKey(session.scope)
            if session.status == "open":
                async with self.lock_for(scope):
                    current = await self.history.get_session(session.id)
                    if (
                        current is None
                        or current.status != "open"
                        or current.last_at >= idle_before
                    ):
                        continue
                    await self.history.close_session(session.id, now)
            if await self.extract_session(scope, session.id) is not None:
                done += 1
        return done


def _said_in(hit: Hit, session_id: str) -> bool:
    """A hit on a message of this session: what the person just said, not a memory."""
    return hit.kind is ChunkKind.MESSAGE and hit.path == f"sessions/{session_id}"


def _shares(hit: Hit, asked: set[str]) -> bool:
    """Whether a hit shares a meaningful term with the message: a word, or two single Han
    characters (one, like 小 or 的, is in too many texts to mean anything). The ranking
    may rank a hit for its recency or its vector alone, which is no reason to show it
    under a statement it has nothing to do with."""
    shared = asked & set(tokenize(hit.text))
    return any(len(term) > 1 for term in shared) or len(shared) >= 2


def _offline_reply(chinese: bool, hits: list[str]) -> str:
    if chinese:
        head = "（离线模式）还没有配置语言模型，我记下了你的消息。可以用「记住…」保存记忆，发送 /new 整理本次会话。"
        return head + ("\n相关记忆：\n" + "\n".join(hits) if hits else "")
    head = (
        "(offline) No language model is configured, so I can't chat yet; your message is saved. "
        "Say “remember that …” to store a memory, or send /new to extract this session."
    )
    return head + ("\nRelated memories:\n" + "\n".join(hits) if hits else "")
