"""Each scope's Layer 1 snapshot file (`SNAPSHOT.md` beside its daily notes): gathered
from the long-term entries, the archive's summaries and the event log, built by
`memory_core.snapshot.builder`, written atomically.

Identity, Owner and Constraints: the file records a fingerprint of each section it took
from the config. A section whose text still matches its fingerprint follows the config
(a changed setting shows at the next build); one a person edited no longer matches and
is kept as written, whole, by every rebuild."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.entries import MemoryClass, class_of
from memory_core.base.errors import FileRefused
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import Config
from memory_core.longterm.long_term import LongTermMemory
from memory_core.longterm.scoring import rank_entries, score_at
from memory_core.notes.event_log import Event, EventLog
from memory_core.snapshot.builder import (
    CONSTRAINTS,
    IDENTITY,
    OWNER,
    Snapshot,
    build_snapshot,
    kept_sections,
    source_of,
)

log = logging.getLogger(__name__)

FILE_NAME = "SNAPSHOT.md"
_BUILT = re.compile(r" built [^;]*;", re.ASCII)
"""The build time in the file's mark, the one part a rebuild always changes."""
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
        zone: tzinfo,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.long_term = long_term
        self.events = events
        self.now = now
        self.zone = zone

    def path(self, scope: ScopeKey) -> Path:
        return self.workspace.memory_dir(scope) / FILE_NAME

    async def prompt_block(self, scope: ScopeKey) -> str:
        """What of long-term memory rides in the scope's every prompt: its snapshot when
        `snapshot.enabled` (rebuilt first when missing or older than the long-term
        file), else its top entries."""
        if not self.config.snapshot.enabled:
            return await self.long_term.prompt_memories(scope)
        return await self.current(scope)

    async def text(self, scope: ScopeKey) -> str:
        """The file as it stands; '' before the first build, and when the workspace's
        boundary refuses it (a link out, a FIFO: logged, never read)."""
        root = self.workspace.root

        def read() -> str:
            try:
                # A hand edit saved in another encoding still reads (and is kept).
                return safe_files.read_text(
                    root, self.path(scope), safe_files.SNAPSHOT_BYTES, "replace"
                )
            except (FileNotFoundError, NotADirectoryError):
                return ""
            except FileRefused as exc:
                log.warning("%s", exc)
                return ""

        return await asyncio.to_thread(read)

    async def current(self, scope: ScopeKey) -> str:
        """The file, rebuilt first when it is missing or was built from another state of
        the scope's long-term file (a capture, a forget, a consolidation since): what a
        prompt carries."""
        await self.long_term.flush(scope)
        text = await self.text(scope)
        if text and source_of(text) == await asyncio.to_thread(self._source, scope):
            return text
        rendered = (await self.build(scope)).render()
        try:
            await asyncio.to_thread(self._write, scope, rendered)
        except FileRefused as exc:
            # The prompt is still built (from the entries): only the file is not written.
            log.warning("snapshot not written: %s", exc)
        return rendered

    def _source(self, scope: ScopeKey) -> str:
        """The long-term file's (mtime, size, inode) stamp: a rewrite is a new file."""
        try:
            st = self.long_term.path(scope).stat()
        except FileNotFoundError:
            return "none"
        return f"{st.st_mtime_ns}-{st.st_size}-{st.st_ino}"

    async def build(
        self, scope: ScopeKey, *, now: datetime | None = None, kept_from: str | None = None
    ) -> Snapshot:
        """The snapshot as a rebuild would write it now (nothing is written). The
        sections a person wrote are taken from the scope's file, or from `kept_from` (the
        snapshot of an imported scope)."""
        when = now or self.now()
        settings = self.config.snapshot
        from_config = {
            IDENTITY: settings.identity,
            OWNER: settings.owner,
            CONSTRAINTS: settings.constraints,
        }
        written = kept_from if kept_from is not None else await self.text(scope)
        fixed = kept_sections(written, from_config)
        # The stamp before the read: a write between the two leaves the snapshot marked
        # older than the file, so the next prompt builds again (never the reverse).
        source = await asyncio.to_thread(self._source, scope)
        parsed = await self.long_term.load(scope)
        policy = self.long_term.policy
        best = await asyncio.to_thread(
            rank_entries, parsed.entries, when, MAX_RANKED + MAX_SUMMARIES, policy
        )
        # Summaries of events lead Top Summaries; the index lists the rest by rank.
        current = [entry.rescored(score_at(entry, when, policy), when) for entry, _ in best]
        summary_entries = [e for e in current if class_of(e) is MemoryClass.SUMMARY]
        ranked = [e for e in current if class_of(e) is not MemoryClass.SUMMARY][:MAX_RANKED]
        path = self.workspace.relative(self.long_term.path(scope))
        where = {entry_id: f"{path}:{lines[0]}" for entry_id, lines in parsed.lines.items()}
        archived = await asyncio.to_thread(self._summaries, scope)
        summaries = [e.content for e in summary_entries] + archived
        summaries = summaries[:MAX_SUMMARIES]
        recent = await self._recent(scope, when)
        return build_snapshot(
            ranked,
            summaries,
            recent,
            fixed,
            when,
            settings.budget_tokens,
            where=where,
            from_config=from_config,
            source=source,
        )

    async def rebuild(
        self, scope: ScopeKey, *, now: datetime | None = None, kept_from: str | None = None
    ) -> Snapshot:
        """Build and write the file (atomically: a crash leaves the old file or the new).
        A build that says what the file already says, but for its build time, is not
        written: a daily rebuild of a quiet scope costs no fsync and keeps the file's
        time telling when it last changed. `kept_from`: as for `build`."""
        snapshot = await self.build(scope, now=now, kept_from=kept_from)
        await asyncio.to_thread(self._write, scope, snapshot.render())
        return snapshot

    def _write(self, scope: ScopeKey, text: str) -> None:
        path = self.path(scope)
        root = self.workspace.root
        try:
            old = safe_files.read_text(root, path, safe_files.SNAPSHOT_BYTES)
            if _BUILT.sub("", old) == _BUILT.sub("", text):
                return
        except (OSError, UnicodeDecodeError):
            pass  # missing or unreadable: written anew (a refused file raises below)
        self.workspace.ensure_scope(scope)  # a hashed scope's directory keeps its key
        atomic_write_text(path, text, root=root)

    def _summaries(self, scope: ScopeKey) -> list[str]:
        """The archive's summaries, newest first by name (a month's days before the
        month's own summary), each as its text without its heading."""
        directory = self.workspace.summary_dir(scope)
        root = self.workspace.root
        try:
            with safe_files.scan_dir(root, directory) as listing:
                names = [e.name for e in listing if e.name.endswith(".md")]
        except (OSError, FileRefused):
            return []
        files = sorted((directory / n for n in names), key=lambda p: p.stem, reverse=True)
        texts = []
        for path in files[:MAX_SUMMARIES]:
            try:
                lines = safe_files.read_text(root, path, safe_files.NOTE_BYTES).splitlines()
            except (OSError, UnicodeDecodeError, FileRefused):
                continue
            body = " ".join(line for line in lines if line.strip() and not line.startswith("#"))
            if body:
                texts.append(f"{path.stem}: {body}")
        return texts

    async def _recent(self, scope: ScopeKey, when: datetime) -> list[str]:
        """The newest events of today and yesterday, oldest first, one line each."""
        today = when.astimezone(self.zone).date()
        events: list[Event] = []
        for day in (today - timedelta(days=1), today):
            events.extend((await self.events.read(scope, day)).events)
        return [_event_line(event, self.zone) for event in events[-RECENT_EVENTS:]]


def _event_line(event: Event, zone: tzinfo) -> str:
    what = event.data.get("text") or event.data.get("tool") or event.data.get("change") or ""
    at = event.at.astimezone(zone)
    return f"- {at:%m-%d %H:%M} {event.kind.value}: {' '.join(str(what).split())}"
