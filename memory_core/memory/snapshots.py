"""Each scope's Layer 1 snapshot file (`SNAPSHOT.md` beside its daily notes): gathered
from the long-term entries, the archive's summaries and the event log, built by
`memory_core.snapshot`, written atomically. Identity, Owner and Constraints that a person
wrote into the file win over the config's and survive every rebuild."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path

from memory_core.atomic import atomic_write_text
from memory_core.config import Config
from memory_core.event_log import Event, EventLog
from memory_core.memory.long_term import LongTermMemory
from memory_core.prompt import select_prompt_entries
from memory_core.scope import ScopeKey
from memory_core.snapshot import (
    CONSTRAINTS,
    IDENTITY,
    OWNER,
    Snapshot,
    build_snapshot,
    fixed_sections,
)
from memory_core.workspace import Workspace

FILE_NAME = "SNAPSHOT.md"
MAX_RANKED = 200
"""Entries the index can show at all: below these the shares are pointers anyway."""
MAX_SUMMARIES = 12
RECENT_EVENTS = 12


class Snapshots:
    def __init__(
        self,
        config: Config,
        workspace: Workspace,
        long_term: LongTermMemory,
        events: EventLog,
        now: Callable[[], datetime],
        today: Callable[[datetime], date],
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.long_term = long_term
        self.events = events
        self.now = now
        self.today = today

    def path(self, scope: ScopeKey) -> Path:
        return self.workspace.memory_dir(scope) / FILE_NAME

    async def text(self, scope: ScopeKey) -> str:
        """The file as it stands; '' before the first build."""

        def read() -> str:
            try:
                return self.path(scope).read_text(encoding="utf-8")
            except FileNotFoundError:
                return ""

        return await asyncio.to_thread(read)

    async def build(self, scope: ScopeKey, *, now: datetime | None = None) -> Snapshot:
        """The snapshot as a rebuild would write it now (nothing is written)."""
        when = now or self.now()
        settings = self.config.snapshot
        from_config = {
            IDENTITY: settings.identity,
            OWNER: settings.owner,
            CONSTRAINTS: settings.constraints,
        }
        edited = fixed_sections(await self.text(scope))
        fixed = {title: edited.get(title) or text for title, text in from_config.items()}
        entries = await self.long_term.entries(scope)
        ranked = select_prompt_entries(
            entries, when, min_score=0.0, top_k=MAX_RANKED, policy=self.long_term.policy
        )
        summaries = await asyncio.to_thread(self._summaries, scope)
        recent = await self._recent(scope, when)
        return build_snapshot(ranked, summaries, recent, fixed, when, settings.budget_tokens)

    async def rebuild(self, scope: ScopeKey, *, now: datetime | None = None) -> Snapshot:
        """Build and write the file (atomically: a crash leaves the old file or the new)."""
        snapshot = await self.build(scope, now=now)
        path = self.path(scope)
        await asyncio.to_thread(self._write, path, snapshot.render())
        return snapshot

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)

    def _summaries(self, scope: ScopeKey) -> list[str]:
        """The archive's summaries, newest first (monthly ones before the days they
        cover), each as its text without its heading."""
        directory = self.workspace.summary_dir(scope)
        try:
            files = sorted(directory.glob("*.md"), key=lambda p: p.stem, reverse=True)
        except OSError:
            return []
        texts = []
        for path in files[:MAX_SUMMARIES]:
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError:
                continue
            body = " ".join(line for line in lines if line.strip() and not line.startswith("#"))
            if body:
                texts.append(f"{path.stem}: {body}")
        return texts

    async def _recent(self, scope: ScopeKey, when: datetime) -> list[str]:
        """The newest events of today and yesterday, oldest first, one line each."""
        today = self.today(when)
        events: list[Event] = []
        for day in (today - timedelta(days=1), today):
            events.extend((await self.events.read(scope, day)).events)
        return [_event_line(event) for event in events[-RECENT_EVENTS:]]


def _event_line(event: Event) -> str:
    what = event.data.get("text") or event.data.get("tool") or event.data.get("change") or ""
    return f"- {event.at:%m-%d %H:%M} {event.kind.value}: {' '.join(str(what).split())}"
