"""One conversational turn, `/new`, memory requests, and flushing long sessions.

A turn: store the user's message, assemble the prompt (prompt memories, on a session's first
turn the last two days' notes, recall injection, the history window), run the tool loop,
store the reply, remember which long-term entries were used, and flush + compact when the
session nears the model's window. Every step takes the ScopeKey the adapter resolved.

What is not stored as a message: commands (`/remember`, `/forget` come here as
`remember` / `ask_forget`), forget requests with their question and answer (stored, the
question kept the very text a person asked to forget indexed and archived), and the
offline notice (stored, it was indexed and came back as a "related memory" of later
turns). A "remember that …" said in the chat, a message starting with "/" and the replies
to them are stored like any message (what a person says is kept) but are no evidence
(memory_core/requests.py): they are not indexed, so search and recall never rank them
above, or hide as their near-copy, the long-term entry they made, and the extractor
leaves them out, since the request was captured when it was said (the heuristic used to
keep "我喜欢乌龙茶，请记住" beside the "我喜欢乌龙茶" it had saved).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memory_core.chunking import ChunkKind
from memory_core.config import Config
from memory_core.conversation.extract import (
    TranscriptLine,
    extract_with_llm,
    heuristic_candidates,
)
from memory_core.conversation.prompting import (
    COMPACT_INSTRUCTIONS,
    FLUSH_INSTRUCTIONS,
    NO_REPLY,
    SUMMARY_ROLE,
    history_tokens,
    history_window,
    system_prompt,
)
from memory_core.conversation.tools import MEMORY_SAVE, TOOL_SCHEMAS, ToolContext, dispatch
from memory_core.entries import MemoryEntry
from memory_core.errors import ChatmemError, EntryNotFound, LLMError
from memory_core.event_log import decision_events, message_events
from memory_core.llm import LLMClient, Message
from memory_core.matching import same_memory
from memory_core.memory import MemoryService
from memory_core.merge_values import ChangeKind, Kept, MergeResult
from memory_core.recall import Injection, has_recall_intent, without_known
from memory_core.records import Hit
from memory_core.requests import (
    MODEL_DOWN_REPLIES,
    REMEMBER_REPLIES,
    evidence,
    explicit_request,
    is_request,
)
from memory_core.scope import ScopeKey
from memory_core.sessions import Session, StoredMessage, sql_length
from memory_core.storage import AuditBackend, HistoryBackend
from memory_core.text import tokenize, writes_cjk
from memory_core.wording import counted

log = logging.getLogger(__name__)

EXTRACT_BACKOFF = (
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=2),
    timedelta(hours=6),
)
CONFIRM_WORDS = frozenset(
    {
        "yes", "y", "ok", "okay", "sure", "confirm", "all",
        "是", "是的", "好", "好的", "确认", "对", "嗯", "全部",
    }
)  # fmt: skip
FORGET_TTL = timedelta(minutes=10)
FORGET_SEARCH_LIMIT = 10
MAX_MESSAGE_CHARS = 100_000
"""A chat message longer than this is answered with a refusal and not stored: a turn
reads, tokenizes and indexes its whole text several times (a 10 MB line took 23 s and
gigabytes), and no model's window holds it. A document is saved with `chatmem capture`
(up to `long_term.max_capture_bytes`) or sent in parts."""
"""Long-term hits a forget request looks at; every duplicate of a picked one joins it."""
_NUMBERS = re.compile(r"^\s*\d+(?:\s*(?:[,，、;；\s]|and|和)\s*\d+)*\s*$", re.IGNORECASE)


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


@dataclass(slots=True)
class _PendingForget:
    entries: list[tuple[str, str]]
    """(id, content) of each entry the question listed, in its numbering."""
    asked_at: datetime


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
        self._pending_forget: dict[str, _PendingForget] = {}
        self._session_locks: dict[str, asyncio.Lock] = {}
        self._extracting: set[str] = set()
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
    async def turn(self, scope: ScopeKey, text: str, *, speaker: str = "") -> TurnResult:
        with self._working_on(scope):
            async with self.lock_for(scope):
                return await self._turn(scope, text.strip(), speaker)

    async def _turn(self, scope: ScopeKey, text: str, speaker: str) -> TurnResult:
        if not text:
            raise ChatmemError("empty message")
        now = self.memory.now()
        session = await self.history.open_session(scope, now)
        if len(text) > MAX_MESSAGE_CHARS:
            return TurnResult(reply=too_long(text), session_id=session.id)
        chinese = writes_cjk(text)

        # Forgetting is answered and not stored (the module's docstring says why).
        confirmation = await self._answer_pending_forget(scope, text, chinese)
        if confirmation is not None:
            return TurnResult(reply=confirmation, session_id=session.id)
        explicit = explicit_request(text)
        if explicit is not None and explicit[0] == "forget":
            reply = await self._ask_forget(scope, explicit[1], chinese)
            return TurnResult(reply=reply, session_id=session.id)

        window = self.config.history.max_messages * 3
        context = await self.history.turn_context(session.id, window)
        earlier = context.messages
        # Live characters of the session, kept up to date with what this turn stores so
        # the flush check after the reply needs no query of its own.
        chars = context.chars + sql_length(text)
        # A request or command and the reply to it are stored, not indexed (see above).
        said = not is_request(text)
        await self._store(scope, session.id, "user", text, now, speaker, evidence=said)
        if explicit is not None:
            reply = await self._remember(scope, explicit[1], chinese)
            await self._store(
                scope, session.id, "assistant", reply, self.memory.now(), "", evidence=False
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
        ctx = ToolContext(self.memory, scope, session.id)
        try:
            reply, calls, stored = await self._tool_loop(ctx, messages, force_search=intent)
        except LLMError as exc:
            log.warning("turn in scope %s failed at the model: %s", scope, exc)
            reply = MODEL_DOWN_REPLIES[0] if chinese else MODEL_DOWN_REPLIES[1]
            await self._store(
                scope,
                session.id,
                "assistant",
                reply,
                self.memory.now(),
                "",
                meta={"error": str(exc)},
                evidence=False,
            )
            return TurnResult(reply=reply, session_id=session.id)
        await self._store(
            scope,
            session.id,
            "assistant",
            reply,
            self.memory.now(),
            "",
            used=injection,
            evidence=said,
        )
        await self._maybe_flush(scope, session, chars + stored + sql_length(reply))
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
                await self._store(
                    ctx.scope,
                    ctx.session_id or "",
                    "tool",
                    result,
                    self.memory.now(),
                    call.name,
                    meta={"arguments": call.arguments},
                )
                stored += sql_length(result)
        final = await self.llm.chat(messages)
        return (final.content or "").strip(), calls, stored

    async def _store(
        self,
        scope: ScopeKey,
        session_id: str,
        role: str,
        content: str,
        now: datetime,
        speaker: str,
        *,
        meta: dict[str, Any] | None = None,
        used: Injection | None = None,
        evidence: bool = True,
    ) -> StoredMessage:
        """Store a message, its index row and (for a reply) the long-term entries its
        prompt used, in one transaction: one commit per message instead of two or three;
        then its events in the scope's event log. A message that is no `evidence` (a
        request, a command, a reply to one) gets no index row."""
        stored = await self.history.add_message(
            scope,
            session_id,
            role,
            content,
            now,
            speaker=speaker,
            meta=meta,
            indexed=evidence and role in ("user", "assistant") and self.memory.indexed,
            used_entry_ids=used.used_entry_ids if used is not None else (),
        )
        if self.config.history.event_log:
            events = message_events(role, content, now, session_id or None, speaker, meta)
            await self.memory.events.record(scope, *events)
        return stored

    async def _decided(
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

    # --- memory requests ------------------------------------------------------------
    async def remember(self, scope: ScopeKey, text: str) -> str:
        """`/remember TEXT`: keep `text` as a memory the person asked for; the reply."""
        with self._working_on(scope):
            async with self.lock_for(scope):
                return await self._remember(scope, text.strip(), writes_cjk(text))

    async def ask_forget(self, scope: ScopeKey, what: str) -> str:
        """`/forget WHAT`: the question listing the memories about `what`; the scope's next
        turn answers it (`_answer_pending_forget`)."""
        with self._working_on(scope):
            async with self.lock_for(scope):
                return await self._ask_forget(scope, what.strip(), writes_cjk(what))

    async def _remember(self, scope: ScopeKey, what: str, chinese: bool) -> str:
        entry, result = await self.memory.long_term.capture(
            scope, what, category="fact", importance="high", source="explicit"
        )
        await self._decided(scope, "remember", result, None)
        kept = result.outcome.kept if result.outcome else Kept.SAVED
        chinese_reply, english_reply = REMEMBER_REPLIES[kept.value]
        return (chinese_reply if chinese else english_reply) + entry.content

    async def _ask_forget(self, scope: ScopeKey, what: str, chinese: bool) -> str:
        if not what:
            raise ChatmemError("say what to forget")
        hits = await self.memory.finder.search(
            scope, what, limit=FORGET_SEARCH_LIMIT, kinds=[ChunkKind.LONG_TERM], min_score=0.0
        )
        entries = await self.memory.long_term.entries(scope)
        # Comparing every entry with the picked ones is CPU work that grows with the scope.
        targets = await asyncio.to_thread(forget_targets, what, hits, entries)
        if not targets:
            return (
                f"没有找到关于「{what}」的记忆。"
                if chinese
                else f"I found no memory about “{what}”."
            )
        self._pending_forget[scope.value] = _PendingForget(
            [(e.id, e.content) for e in targets], self.memory.now()
        )
        if len(targets) == 1:
            [only] = targets
            if chinese:
                return f"要忘掉这条记忆吗？[{only.id}] {only.content}\n回复「确认」忘掉它。"
            return f"Forget this memory? [{only.id}] {only.content}\nReply “yes” to forget it."
        listed = "\n".join(f"{n}. [{e.id}] {e.content}" for n, e in enumerate(targets, start=1))
        if chinese:
            return (
                f"要忘掉这 {len(targets)} 条记忆吗？\n{listed}\n"
                "回复「确认」全部忘掉，或回复要忘掉的编号（如「1 3」）。"
            )
        return (
            f"Forget these {counted(len(targets), 'memory')}?\n{listed}\n"
            "Reply “yes” to forget them all, or the numbers of the ones to forget (e.g. “1 3”)."
        )

    async def _answer_pending_forget(self, scope: ScopeKey, text: str, chinese: bool) -> str | None:
        """The reply to a forget question, or None: any other answer (or a late one)
        drops the question and is an ordinary turn."""
        pending = self._pending_forget.pop(scope.value, None)
        if pending is None or self.memory.now() - pending.asked_at > FORGET_TTL:
            return None
        answer = text.strip().strip("!.。！").lower()
        if answer in CONFIRM_WORDS:
            chosen = pending.entries
        elif _NUMBERS.match(answer):
            numbers = {int(n) for n in re.findall(r"\d+", answer)}
            chosen = [e for n, e in enumerate(pending.entries, start=1) if n in numbers]
            if not chosen:
                return None
        else:
            return None
        forgotten: list[str] = []
        for entry_id, content in chosen:
            try:
                await self.memory.long_term.forget(scope, entry_id, source="explicit")
            except EntryNotFound:
                continue  # forgotten meanwhile (another chat, a person, decay)
            forgotten.append(content)
        if not forgotten:
            return "那条记忆已经不在了。" if chinese else "That memory is already gone."
        if len(forgotten) == 1:
            return f"已忘掉：{forgotten[0]}" if chinese else f"Forgotten: {forgotten[0]}"
        listed = "\n".join(f"- {content}" for content in forgotten)
        if chinese:
            return f"已忘掉 {len(forgotten)} 条记忆：\n{listed}"
        return f"Forgot {counted(len(forgotten), 'memory')}:\n{listed}"

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
        if session_id in self._extracting:
            return None
        self._extracting.add(session_id)
        try:
            return await self._extract_session(scope, session_id)
        finally:
            self._extracting.discard(session_id)

    async def _extract_session(self, scope: ScopeKey, session_id: str) -> MergeResult | None:
        if session_id in await self.audit.seen_sessions(scope):
            # Already merged: no model call and no write (the merge would skip it anyway).
            session = await self.history.get_session(session_id)
            if session is not None and session.status != "extracted":
                await self.history.mark_extracted(session_id, {})
            return MergeResult(entries=await self.memory.long_term.entries(scope), skipped=True)
        messages = await self.history.session_messages(session_id, include_compacted=True)
        lines = conversation_lines(messages)
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
        await self._decided(scope, "extract", result, session_id)
        return result

    # --- flush before compaction ----------------------------------------------------
    async def _maybe_flush(self, scope: ScopeKey, session: Session, chars: int) -> None:
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
            scope, session_id, SUMMARY_ROLE, (summary.content or "").strip(), self.memory.now()
        )
        # Everything up to the last summarised message goes, tool results included: left
        # behind, they would keep the session over the line and flush it on every turn.
        cutoff = old[-1].id
        await self.history.mark_compacted([m.id for m in current if m.id <= cutoff])
        await self.history.mark_flushed(session_id, self.memory.now())
        return True

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


def forget_targets(
    what: str, hits: Sequence[Hit], entries: Sequence[MemoryEntry]
) -> list[MemoryEntry]:
    """The entries a forget request means, in hit order, then the duplicates of each.

    The hits that hold every word of the request (a request names its memory, "forget my
    old phone number"); if none does, the best hit alone (the question shows it, so a
    loose match costs a "no"). Then every entry a merge would fold into one of those
    (`same_memory`): forgetting a fact and keeping its copy would forget nothing.
    """
    by_id = {e.id: e for e in entries}
    found = list({h.ref: by_id[h.ref] for h in hits if h.ref in by_id}.values())
    words = set(tokenize(what))
    picked = [e for e in found if words <= set(tokenize(e.content))] or found[:1]
    chosen = {e.id for e in picked}
    duplicates = [
        e for e in entries if e.id not in chosen and any(same_memory(e, p) for p in picked)
    ]
    return picked + duplicates


def conversation_lines(messages: Sequence[StoredMessage]) -> list[TranscriptLine]:
    """What the extractor may learn from: the user's and the assistant's messages that
    are evidence (`requests.evidence`): without "remember …" requests (captured when they
    were said: left in, the heuristic kept "我喜欢乌龙茶，请记住" beside the "我喜欢乌龙茶" it
    had saved), nor the commands, forget requests and offline notices that older versions
    stored; nor the replies to them."""
    talk = [m for m in messages if m.role in ("user", "assistant")]
    kept = evidence((m.role == "assistant", m.content) for m in talk)
    return [TranscriptLine(m.role, m.content) for m, keep in zip(talk, kept, strict=True) if keep]


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
