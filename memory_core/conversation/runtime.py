"""What a running bot needs around the core: the chat engine, archive passes, schedules
and a graceful stop.

Schedules run in-process and remember their last run in SQLite, so a restart neither
skips nor repeats a day's job: quiet-period consolidation (20 minutes without messages,
once a day), the daily 04:00 archive, the 6-hour archive check, idle-session extraction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime, time, timedelta
from functools import partial

from memory_core.base.clock import Sleep, format_when, system_sleep
from memory_core.base.errors import StorageError
from memory_core.base.inputs import storable
from memory_core.base.locks import LockRegistry
from memory_core.base.retry import OutageNotice
from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.config.memory import within_hours
from memory_core.consolidation.consolidator import Consolidator
from memory_core.conversation.archiver import Archiver, ArchiveReport, Due
from memory_core.conversation.chat import ChatEngine, NewSessionResult, TurnResult
from memory_core.llm.client import LLMClient
from memory_core.memory_service import MemoryService
from memory_core.storage.interfaces import AuditBackend, HistoryBackend, ScheduleBackend

log = logging.getLogger(__name__)

TICK_SECONDS = 60.0
CHECK_EVERY_TURNS = 10
SHUTDOWN_FLUSH_CONCURRENCY = 8
SHUTDOWN_FLUSH_SECONDS = 45.0


class Runtime:
    def __init__(
        self,
        memory: MemoryService,
        history: HistoryBackend,
        llm: LLMClient,
        config: Config,
        audit: AuditBackend,
        locks: LockRegistry,
        schedules: ScheduleBackend,
        consolidation: Consolidator,
        *,
        sleep: Sleep = system_sleep,
    ) -> None:
        """`consolidation` is the workspace's (memory_core/services.py builds both): the
        quiet-period job runs its phases. `sleep` waits `TICK_SECONDS` between two runs of
        the schedules."""
        self.memory = memory
        self._sleep = sleep
        self.history = history
        self.llm = llm
        self.config = config
        self.audit = audit
        self.schedules = schedules
        self.locks = locks
        self.consolidation = consolidation
        self.chat = ChatEngine(memory, history, llm, config, audit)
        self.archiver = Archiver(memory, history, llm, config.archive, audit, locks)
        self._inflight: set[asyncio.Task[TurnResult]] = set()
        self._background: set[asyncio.Task[object]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._stopping = False
        self._served = False
        """Whether this process ran turns or schedules: only then are open sessions its
        own to flush at `stop` (a command that opened the workspace beside a running bot
        must not flush the bot's sessions)."""
        self._turns: dict[str, int] = {}
        self._outage = OutageNotice(log, "background memory work (caps, archive, schedules)")

    # --- turns ----------------------------------------------------------------------
    async def turn(
        self, scope: ScopeKey, text: str, *, speaker: str = "", speaker_id: str | None = None
    ) -> TurnResult:
        """One turn in the scope's open session (a session opens on first use); a text
        or speaker UTF-8 cannot hold is one InputRefused, nothing stored. `speaker_id`:
        the sender's platform id (`adapters.router.sender_id`), kept with the message."""
        storable(text, "the message")
        storable(speaker, "the speaker's name")
        if self._stopping:
            raise RuntimeError("shutting down")
        self._served = True
        task: asyncio.Task[TurnResult] = asyncio.ensure_future(
            self.chat.turn(scope, text, speaker=speaker, speaker_id=speaker_id)
        )
        # The task leaves the in-flight set when it ends, not when this caller stops
        # waiting: `stop()` must still wait for a turn whose caller was cancelled.
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        meter = self.memory.meter
        with meter.timed(meter.turn):
            result = await asyncio.shield(task)
        if self._due_for_checks(scope):
            self._spawn(self.after_turn(scope))
        return result

    def _due_for_checks(self, scope: ScopeKey) -> bool:
        """Caps and archive triggers every `CHECK_EVERY_TURNS` turns of a scope (and on its
        first): the thresholds are 100+ messages, so checking every turn buys nothing."""
        count = self._turns.get(scope.value, 0)
        self._turns[scope.value] = count + 1
        return count % CHECK_EVERY_TURNS == 0

    async def new_session(self, scope: ScopeKey, *, chinese: bool = False) -> NewSessionResult:
        self._served = True
        return await self.chat.new_session(scope, chinese=chinese)

    async def after_turn(self, scope: ScopeKey) -> None:
        """Caps, then an archive pass when one is due (or forced by overflow)."""
        caps = await self.history.enforce_caps(scope)
        await self.memory.guard.remove_messages(scope, caps.removed)
        if caps.overflow:
            await self.audit.add_event(
                scope, "history_overflow", self.memory.now(), {"note": "forcing archive"}
            )
        if caps.overflow or caps.over_soft:
            await self.archive(scope)
        elif due := await self.archiver.due(scope, self.memory.now()):
            await self.archive(scope, whole_sessions=due is Due.ENDED)

    async def archive(self, scope: ScopeKey, *, whole_sessions: bool = False) -> ArchiveReport:
        return await self.archiver.run(scope, whole_sessions=whole_sessions)

    def _spawn(self, coro: Coroutine[object, object, object]) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[object]) -> None:
        self._background.discard(task)
        if task.cancelled():
            return
        failure = task.exception()
        if failure is None:
            self._outage.worked()
        elif not self._outage.failed(failure):
            log.error("background memory work failed", exc_info=failure)

    async def quiet(self) -> None:
        """Wait for the background work started so far (caps and archive passes after
        turns), its failures reported: a stop, and a test, wait for a state, not a pause."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
            await system_sleep(0)  # each task's done callback reports it, then leaves

    # --- schedules ------------------------------------------------------------------
    def start(self) -> None:
        self._served = True
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick_forever())

    async def _tick_forever(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception as exc:
                if not self._outage.failed(exc):
                    log.exception("scheduled memory work failed; will try again")
            else:
                self._outage.worked()
            await self._sleep(TICK_SECONDS)

    async def tick(self, now: datetime | None = None) -> list[str]:
        """Run whatever is due now; returns the names of the jobs that ran."""
        self._served = True
        when = now or self.memory.now()
        ran: list[str] = []
        if await self.chat.close_idle_sessions():
            ran.append("idle-extraction")
        for scope in await self.history.scopes_with_unarchived():
            if due := await self.archiver.due(scope, when):
                await self.archive(scope, whole_sessions=due is Due.ENDED)
                ran.append(f"archive:{scope}")
        local = when.astimezone(self.memory.notes.zone)
        hh, mm = (int(x) for x in self.config.schedule.daily_archive_at.split(":"))
        today = local.date().isoformat()
        if local.time() >= time(hh, mm) and await self._once_today(
            "daily-archive", today, self._archive_all
        ):
            ran.append("daily-archive")
        quiet = timedelta(minutes=self.config.schedule.quiet_minutes)
        last_message = await self.history.last_message_at()
        idle = last_message is None or when - last_message >= quiet
        active = within_hours(self.config.schedule.active_hours, local.time())
        if (
            idle
            and not active
            and await self._once_today(
                "quiet-consolidation", today, partial(self._consolidate_all, when)
            )
        ):
            ran.append("quiet-consolidation")
        return ran

    async def _once_today(self, job: str, today: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Run a daily job unless it ran today in any process of the workspace; True when
        this process ran it. The job's lock is only tried: a process that finds it held
        leaves the job to its holder, and sees it marked done at a later tick (or, if the
        holder died before marking it, runs it then)."""
        if await self.schedules.last(job) == today:
            return False
        async with self.locks.try_hold(f"schedule-{job}") as mine:
            if not mine or await self.schedules.last(job) == today:
                return False
            await work()
            await self.schedules.mark(job, today)
        log.info("ran the daily job %s for %s", job, today)
        return True

    async def _archive_all(self) -> None:
        """The daily pass: every ended session (an open one stays whole for later)."""
        for scope in await self.history.scopes_with_unarchived():
            await self.archive(scope, whole_sessions=True)

    async def _consolidate_all(self, when: datetime) -> None:
        """Every consolidation phase over every scope, in the quiet period. One scope's
        trouble (a file it cannot write) is logged and must not stop the others'; the
        phases resume where they stopped at the next quiet period."""
        for scope in await self.memory.long_term.scopes():
            try:
                await self.consolidation.run(scope, now=when)
            except OSError as exc:
                log.warning("consolidation of scope %s stopped: %s", scope, exc)

    async def _flush_open_sessions(self) -> None:
        """Flush open sessions, a few at a time, within a time budget: a service manager
        kills a process that takes too long to stop, and the messages are safe in SQLite
        anyway; the flush only saves the model's notes about them."""
        if not self.llm.configured or not self._served:
            return
        try:
            sessions = await self.history.open_sessions()
        except StorageError as exc:
            log.warning("shutdown flush skipped: the database cannot be read (%s)", exc)
            return
        if not sessions:
            return
        gate = asyncio.Semaphore(SHUTDOWN_FLUSH_CONCURRENCY)

        async def flush_one(session_id: str, scope: str) -> None:
            async with gate:
                try:
                    await self.chat.flush(ScopeKey(scope), session_id)
                except Exception as exc:
                    if not self._outage.failed(exc):
                        log.exception("shutdown flush of session %s failed", session_id)

        tasks = [asyncio.ensure_future(flush_one(s.id, s.scope)) for s in sessions]
        _, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_FLUSH_SECONDS)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("shutdown flush: %d session(s) not flushed in time", len(pending))

    # --- stopping -------------------------------------------------------------------
    async def stop(self) -> None:
        """Finish in-flight turns, flush active sessions, stop the schedules."""
        self._stopping = True
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
        await self.quiet()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        await self._flush_open_sessions()
        await self.llm.close()
        log.debug("memory runtime stopped at %s", format_when(self.memory.now()))
