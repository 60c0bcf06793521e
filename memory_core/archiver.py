"""Running archive passes over a scope's session history (rules in `archive.py`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from memory_core.archive import (
    DAILY_PROMPT,
    MONTHLY_PROMPT,
    backoff_delay,
    extractive_summary,
    make_slug,
    plan_archive,
    render_raw,
    render_summary,
    transcript,
)
from memory_core.atomic import atomic_write_text
from memory_core.clock import format_when, parse_when
from memory_core.db import Database
from memory_core.errors import IndexUnavailable, LLMError
from memory_core.history import HistoryStore, StoredMessage
from memory_core.llm import LLMClient
from memory_core.scope import ScopeKey

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ArchiveReport:
    scope: str
    moved: int = 0
    summarized: int = 0
    failed: int = 0
    files: list[str] = field(default_factory=list)
    backlog: bool = False


class Archiver:
    def __init__(self, core: MemoryCore, history: HistoryStore, llm: LLMClient) -> None:
        self.core = core
        self.history = history
        self.llm = llm

    async def due(self, scope: ScopeKey, now: datetime) -> bool:
        """More than N unarchived messages, or the interval passed since the last run."""
        settings = self.core.config.archive
        counts = await self.history.counts(scope)
        if counts["false"] == 0:
            return False
        if counts["false"] > settings.trigger_unarchived:
            return True
        since = await self.last_run(scope) or await self._oldest_unarchived(scope)
        return since is not None and now - since >= timedelta(hours=settings.interval_hours)

    async def _oldest_unarchived(self, scope: ScopeKey) -> datetime | None:
        async with self._db().conn.execute(
            "SELECT MIN(created_at) FROM messages WHERE scope = ? AND archived = 'false'",
            (scope.value,),
        ) as cur:
            row = await cur.fetchone()
        return parse_when(row[0]) if row and row[0] else None

    async def last_run(self, scope: ScopeKey) -> datetime | None:
        db = self._db()
        async with db.conn.execute(
            "SELECT started_at FROM archive_runs WHERE scope = ? ORDER BY id DESC LIMIT 1",
            (scope.value,),
        ) as cur:
            row = await cur.fetchone()
        return parse_when(row[0]) if row else None

    def _db(self) -> Database:
        if self.core.db is None:
            raise IndexUnavailable("archiving needs the workspace database")
        return self.core.db

    async def run(self, scope: ScopeKey, *, now: datetime | None = None) -> ArchiveReport:
        """One pass; never two at once for a scope (file lock across processes too)."""
        async with self.core.locks.hold(self.core.workspace.lock_name(scope, "archive")):
            return await self._run(scope, now or self.core.now())

    async def _run(self, scope: ScopeKey, now: datetime) -> ArchiveReport:
        db = self._db()
        report = ArchiveReport(scope=scope.value)
        async with db.transaction() as conn:
            cursor = await conn.execute(
                "INSERT INTO archive_runs (scope, started_at) VALUES (?, ?)",
                (scope.value, format_when(now)),
            )
            run_id = int(cursor.lastrowid or 0)
            # We hold the scope's archive lock: 'pending' rows are orphans of a run that
            # died mid-way, and would otherwise never be archived nor trimmed.
            await conn.execute(
                "UPDATE messages SET archived = 'false' WHERE scope = ? AND archived = 'pending'",
                (scope.value,),
            )
            async with conn.execute(
                "SELECT id FROM messages WHERE scope = ? AND archived = 'false'"
                " AND (archive_next_at IS NULL OR archive_next_at <= ?) ORDER BY id",
                (scope.value, format_when(now)),
            ) as cur:
                ids = [int(r[0]) for r in await cur.fetchall()]
            await conn.executemany(
                "UPDATE messages SET archived = 'pending' WHERE id = ?", [(i,) for i in ids]
            )
        messages = [m for m in await self._messages(ids)]
        talk = [m for m in messages if m.role in ("user", "assistant")]
        silent = [m.id for m in messages if m.role not in ("user", "assistant")]
        await self._finish(silent)
        plan = plan_archive(talk, now, self.core.tz, self.core.config.archive.raw_days)
        await asyncio.to_thread(self.core.workspace.ensure_scope, scope)

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
            await self.core.notify_file_written(scope, path)
        caps = await self.history.enforce_caps(scope)
        if caps.removed and self.core.index is not None:
            await self.core.index.remove_messages(scope, caps.removed)
        async with db.transaction() as conn:
            await conn.execute(
                "UPDATE archive_runs SET finished_at = ?, moved = ?, summarized = ?, failed = ?"
                " WHERE id = ?",
                (
                    format_when(self.core.now()),
                    report.moved,
                    report.summarized,
                    report.failed,
                    run_id,
                ),
            )
        return report

    async def _messages(self, ids: Sequence[int]) -> list[StoredMessage]:
        wanted = set(ids)
        if not wanted:
            return []
        out: list[StoredMessage] = []
        for session_id in await self._sessions_of(ids):
            out.extend(
                m
                for m in await self.history.session_messages(session_id, include_compacted=True)
                if m.id in wanted
            )
        return sorted(out, key=lambda m: m.id)

    async def _sessions_of(self, ids: Sequence[int]) -> list[str]:
        db = self._db()
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            async with db.conn.execute(
                f"SELECT DISTINCT session_id FROM messages WHERE id IN ({','.join('?' * len(part))})",
                tuple(part),
            ) as cur:
                found.update(r[0] for r in await cur.fetchall())
        return sorted(found)

    async def _write_raw(self, scope: ScopeKey, day: str, group: list[StoredMessage]) -> str:
        directory = self.core.workspace.memory_dir(scope)
        taken = {
            p.stem[len(day) + 1 :]
            for p in await asyncio.to_thread(lambda: list(directory.glob(f"{day}-*.md")))
        }
        slug = make_slug([m.content for m in group], f"{group[0].session_id[-8:]}", taken)
        path = directory / f"{day}-{slug}.md"
        text = render_raw(group[0].created_at.astimezone(self.core.tz).date(), group, self.core.tz)
        await asyncio.to_thread(atomic_write_text, path, text)
        return self.core.workspace.relative(path)

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
                period=period, transcript=transcript(group, self.core.tz)
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
        directory = self.core.workspace.summary_dir(scope)
        path = directory / f"{period}.md"
        section = render_summary(
            period, body, kind="Day" if daily else "Month", generated_at=now, by_model=by_model
        )
        await asyncio.to_thread(_append_section, path, section)
        report.files.append(self.core.workspace.relative(path))
        report.summarized += len(group)
        await self._finish([m.id for m in group], scope)

    async def _finish(self, ids: Sequence[int], scope: ScopeKey | None = None) -> None:
        """pending → true; the archive file now answers recall, so the message chunks go."""
        if not ids:
            return
        async with self._db().transaction() as conn:
            await conn.executemany(
                "UPDATE messages SET archived = 'true', archive_next_at = NULL WHERE id = ?",
                [(i,) for i in ids],
            )
        if scope is not None and self.core.index is not None:
            await self.core.index.remove_messages(scope, list(ids))

    async def _failed(
        self, scope: ScopeKey, group: list[StoredMessage], now: datetime, report: ArchiveReport
    ) -> None:
        settings = self.core.config.archive
        attempts = max(m.archive_attempts for m in group) + 1
        next_at = now + backoff_delay(attempts, settings.backoff_minutes, settings.max_attempts)
        async with self._db().transaction() as conn:
            await conn.executemany(
                "UPDATE messages SET archived = 'false', archive_attempts = archive_attempts + 1,"
                " archive_failed_at = ?, archive_next_at = ? WHERE id = ?",
                [(format_when(now), format_when(next_at), m.id) for m in group],
            )
        report.failed += len(group)
        if attempts >= settings.max_attempts:
            report.backlog = True
            await self.core.audit.add_event(
                scope,
                "archive_backlog",
                now,
                {"attempts": attempts, "messages": len(group), "next_at": format_when(next_at)},
            )


def _append_section(path: Path, section: str) -> None:
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    text = (existing.rstrip() + "\n\n" + section) if existing.strip() else section
    atomic_write_text(path, text)
