"""Running archive passes over a scope's session history (rules in `archive.py`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import Enum
from fnmatch import fnmatch
from functools import partial
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.clock import format_when
from memory_core.base.errors import LLMError
from memory_core.base.locks import LockRegistry
from memory_core.base.scope import ScopeKey
from memory_core.config.memory import ArchiveSettings
from memory_core.conversation.archive import (
    DAILY_PROMPT,
    MONTHLY_PROMPT,
    backoff_delay,
    day_activity,
    extractive_summary,
    make_slug,
    plan_archive,
    render_raw,
    render_summary,
    transcript,
)
from memory_core.llm.client import LLMClient
from memory_core.memory_service import MemoryService
from memory_core.storage.interfaces import AuditBackend, HistoryBackend
from memory_core.storage.sessions import StoredMessage

log = logging.getLogger(__name__)


class Due(Enum):
    """Why an archive pass is due."""

    BACKLOG = "backlog"
    """More unarchived messages than the trigger: all of them go, open sessions too."""
    ENDED = "ended"
    """The interval passed: the ended sessions go, the open one stays whole."""


@dataclass(slots=True)
class ArchiveReport:
    scope: str
    moved: int = 0
    summarized: int = 0
    failed: int = 0
    files: list[str] = field(default_factory=list)
    backlog: bool = False


class Archiver:
    def __init__(
        self,
        memory: MemoryService,
        history: HistoryBackend,
        llm: LLMClient,
        settings: ArchiveSettings,
        audit: AuditBackend,
        locks: LockRegistry,
    ) -> None:
        self.memory = memory
        self.history = history
        self.llm = llm
        self.settings = settings
        self.audit = audit
        self.locks = locks
        self.workspace = memory.long_term.workspace
        self.zone = memory.notes.zone

    async def due(self, scope: ScopeKey, now: datetime) -> Due | None:
        """`BACKLOG` past N unarchived messages (everything goes, open sessions too);
        `ENDED` once the interval passed since the last run and an ended session waits
        (the open one is left whole for a later pass); else None."""
        settings = self.settings
        counts = await self.history.counts(scope)
        if counts["false"] == 0:
            return None
        if counts["false"] > settings.trigger_unarchived:
            return Due.BACKLOG
        waiting = await self.history.oldest_unarchived(scope, whole_sessions=True)
        if waiting is None:
            return None
        since = await self.last_run(scope) or waiting
        return Due.ENDED if now - since >= timedelta(hours=settings.interval_hours) else None

    async def last_run(self, scope: ScopeKey) -> datetime | None:
        run = await self.history.last_archive_run(scope)
        return run.started_at if run is not None else None

    async def run(
        self, scope: ScopeKey, *, now: datetime | None = None, whole_sessions: bool = False
    ) -> ArchiveReport:
        """One pass; never two at once for a scope (file lock across processes too).
        With `whole_sessions` (the schedules' passes) an open session waits."""
        async with self.locks.hold(self.workspace.lock_name(scope, "archive")):
            return await self._run(scope, now or self.memory.now(), whole_sessions)

    async def _run(self, scope: ScopeKey, now: datetime, whole_sessions: bool) -> ArchiveReport:
        report = ArchiveReport(scope=scope.value)
        run_id, ids = await self.history.begin_archive_run(
            scope, now, whole_sessions=whole_sessions
        )
        messages = await self.history.messages_by_id(ids)
        talk = [m for m in messages if m.role in ("user", "assistant")]
        silent = [m.id for m in messages if m.role not in ("user", "assistant")]
        await self._finish(silent)
        plan = plan_archive(talk, now, self.zone, self.settings.raw_days)
        await asyncio.to_thread(self.workspace.ensure_scope, scope)

        for day, group in sorted(plan.raw.items()):
            path = await self._write_raw(scope, day.isoformat(), group)
            report.files.append(path)
            report.moved += len(group)
            await self._finish([m.id for m in group], scope)
        for day, group in sorted(plan.daily.items()):
            await self._summarise(scope, report, day.isoformat(), group, daily=True, now=now)
        for month, group in sorted(plan.monthly.items()):
            await self._summarise(scope, report, month, group, daily=False, now=now)

        for path in report.files:
            await self.memory.guard.file_written(scope, path)
        caps = await self.history.enforce_caps(scope)
        await self.memory.guard.remove_messages(scope, caps.removed)
        await self.history.finish_archive_run(
            run_id, self.memory.now(), report.moved, report.summarized, report.failed
        )
        return report

    async def _write_raw(self, scope: ScopeKey, day: str, group: list[StoredMessage]) -> str:
        directory = self.workspace.memory_dir(scope)
        root = self.workspace.root

        def names() -> list[str]:
            try:
                with safe_files.scan_dir(root, directory) as listing:
                    return [e.name for e in listing if fnmatch(e.name, f"{day}-*.md")]
            except FileNotFoundError:
                return []

        taken = {name[len(day) + 1 : -3] for name in await asyncio.to_thread(names)}
        slug = make_slug([m.content for m in group], f"{group[0].session_id[-8:]}", taken)
        path = directory / f"{day}-{slug}.md"
        text = render_raw(group[0].created_at.astimezone(self.zone).date(), group, self.zone)
        await asyncio.to_thread(partial(atomic_write_text, path, text, root=root))
        return self.workspace.relative(path)

    async def _summarise(
        self,
        scope: ScopeKey,
        report: ArchiveReport,
        period: str,
        group: list[StoredMessage],
        *,
        daily: bool,
        now: datetime,
    ) -> None:
        body: str
        by_model = self.llm.configured
        if by_model:
            prompt = (DAILY_PROMPT if daily else MONTHLY_PROMPT).format(
                period=period, transcript=transcript(group, self.zone)
            )
            try:
                answer = await self.llm.chat([{"role": "user", "content": prompt}], temperature=0.2)
                body = (answer.content or "").strip()
                if not body:
                    raise LLMError("empty summary")
            except LLMError as exc:
                log.warning("summary of %s in scope %s failed: %s", period, scope, exc)
                await self._failed(scope, group, now, report)
                return
        else:
            body = extractive_summary(group)
        if daily:
            day_log = await self.memory.events.read(scope, date.fromisoformat(period))
            activity = day_activity(day_log.events)
            if activity:
                body = f"{body.rstrip()}\n\n{activity}"
        directory = self.workspace.summary_dir(scope)
        path = directory / f"{period}.md"
        section = render_summary(
            period, body, kind="Day" if daily else "Month", generated_at=now, by_model=by_model
        )
        await asyncio.to_thread(_append_section, self.workspace.root, path, section)
        report.files.append(self.workspace.relative(path))
        report.summarized += len(group)
        await self._finish([m.id for m in group], scope)

    async def _finish(self, ids: Sequence[int], scope: ScopeKey | None = None) -> None:
        """pending → true; the archive file now answers recall, so the message chunks go."""
        if not ids:
            return
        await self.history.mark_archived(ids)
        if scope is not None:
            await self.memory.guard.remove_messages(scope, ids)

    async def _failed(
        self, scope: ScopeKey, group: list[StoredMessage], now: datetime, report: ArchiveReport
    ) -> None:
        settings = self.settings
        attempts = max(m.archive_attempts for m in group) + 1
        next_at = now + backoff_delay(attempts, settings.backoff_minutes, settings.max_attempts)
        await self.history.mark_archive_failed([m.id for m in group], now, next_at)
        report.failed += len(group)
        if attempts >= settings.max_attempts:
            report.backlog = True
            await self.audit.add_event(
                scope,
                "archive_backlog",
                now,
                {"attempts": attempts, "messages": len(group), "next_at": format_when(next_at)},
            )


def _append_section(root: Path, path: Path, section: str) -> None:
    try:
        existing = safe_files.read_text(root, path, safe_files.NOTE_BYTES)
    except FileNotFoundError:
        existing = ""
    text = (existing.rstrip() + "\n\n" + section) if existing.strip() else section
    atomic_write_text(path, text, root=root)
