"""Forgotten entries, kept for a while so that forgetting can be undone.

An entry forgotten by request or by decay leaves the scope's long-term file but is kept,
with all its metadata, in `.chatmem/forgotten/<slug>.md` for
`long_term.forgotten_keep_days`: `restore` brings it back, `purge` erases it for good, and
after that many days it is dropped at the next write of the file (the audit log keeps the
text as it always did, until a purge).

*Why under `.chatmem/` and not beside MEMORY.md:* every Markdown file in a scope's
directory can be read through memory_get, the model's tool, and the index lists that
directory; a text forgotten by request must reach no search, recall, prompt or model
again. Nothing that serves a scope ever reads `.chatmem/`.

The file holds MEMORY.md blocks (`### [id] category | score | …` plus the metadata line),
newest first, under a title of its own, so a person can read it and `memory_md` parses
and renders it. A kept entry's `scored_at` is when it was forgotten and its score the
score it had then. Blocks that cannot be parsed are kept verbatim, as in MEMORY.md.

Every function here blocks (file I/O): callers run them in a worker thread and hold the
scope's `forgotten` lock around a read-change-write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.entries import MemoryEntry
from memory_core.base.errors import MemoryFileError
from memory_core.base.scope import ScopeKey, scope_slug
from memory_core.base.workspace import Workspace
from memory_core.longterm.memory_md import (
    QUARANTINE_NOTE,
    QUARANTINED,
    QuarantinedBlock,
    split_lines,
)
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import render_memory_lines

TITLE = "# Forgotten Memories"
NOTE = (
    "<!-- Entries forgotten from this scope's long-term memory, newest first. Each is kept "
    "for long_term.forgotten_keep_days after it was forgotten (its scored_at), outside "
    "search, recall and prompts: `chatmem restore ID` brings one back, `chatmem purge ID` "
    "erases it. -->"
)


@dataclass(frozen=True, slots=True)
class ForgottenContents:
    """What the file holds: entries newest first, and blocks it could not parse."""

    entries: list[MemoryEntry]
    quarantined: list[QuarantinedBlock]


class ForgottenFile:
    """The forgotten entries of every scope of a workspace, one file per scope."""

    def __init__(self, workspace: Workspace, keep_days: int, archive_below: float) -> None:
        self._ws = workspace
        self.keep_days = keep_days
        self._archive_below = archive_below

    def path(self, scope: ScopeKey) -> Path:
        return self._ws.state_dir / "forgotten" / f"{scope_slug(scope)}.md"

    def expired(self, entry: MemoryEntry, now: datetime) -> bool:
        return entry.scored_at <= now - timedelta(days=self.keep_days)

    def read(self, scope: ScopeKey) -> ForgottenContents:
        path = self.path(scope)
        try:
            text = safe_files.read_text(self._ws.root, path, safe_files.LONG_TERM_BYTES)
        except (FileNotFoundError, NotADirectoryError):
            return ForgottenContents([], [])
        except UnicodeDecodeError as exc:
            raise MemoryFileError(f"{path} is not UTF-8 text: {exc}") from exc
        lines = split_lines(text)
        start = 0
        # The title and note are the file's own; everything after them is blocks.
        while start < len(lines) and _is_furniture(lines[start]):
            start += 1
        parsed = parse_memory("\n".join(lines[start:]), archive_below=self._archive_below)
        return ForgottenContents(_newest_first(parsed.entries), list(parsed.quarantined))

    def live(self, scope: ScopeKey, now: datetime) -> list[MemoryEntry]:
        """The entries that may still be restored at `now`."""
        return [e for e in self.read(scope).entries if not self.expired(e, now)]

    def keep(self, scope: ScopeKey, entries: Iterable[MemoryEntry], now: datetime) -> None:
        """Add (or replace, by id) entries just forgotten; drop the expired ones."""
        adding = {e.id: e for e in entries if not self.expired(e, now)}
        kept = self.read(scope)
        others = [e for e in kept.entries if e.id not in adding and not self.expired(e, now)]
        if adding or len(others) != len(kept.entries):
            self._write(scope, [*adding.values(), *others], kept.quarantined, now)

    def take(self, scope: ScopeKey, ids: Collection[str], now: datetime) -> list[MemoryEntry]:
        """Remove the entries with these ids (and the expired ones); those removed by id."""
        kept = self.read(scope)
        taken = [e for e in kept.entries if e.id in ids]
        rest = [e for e in kept.entries if e.id not in ids and not self.expired(e, now)]
        if len(rest) != len(kept.entries):
            self._write(scope, rest, kept.quarantined, now)
        return taken

    def prune(self, scope: ScopeKey, now: datetime) -> None:
        """Drop what has been kept long enough (a stat when there is no file)."""
        if self.path(scope).exists():
            self.keep(scope, (), now)

    def _write(
        self,
        scope: ScopeKey,
        entries: list[MemoryEntry],
        quarantined: list[QuarantinedBlock],
        now: datetime,
    ) -> None:
        path = self.path(scope)
        if not entries and not quarantined:
            with contextlib.suppress(FileNotFoundError):
                safe_files.inside(self._ws.root, path.parent)
                path.unlink()
            return
        text = render_kept(entries, quarantined, now, self._archive_below)
        atomic_write_text(path, text, root=self._ws.root)


def render_kept(
    entries: list[MemoryEntry],
    quarantined: list[QuarantinedBlock],
    now: datetime,
    archive_below: float,
) -> str:
    """The file: title, note, each entry's MEMORY.md block (newest first), then any
    quarantined blocks in MEMORY.md's own form. Blocks stand outside MEMORY.md's sections
    so that parsing them back gives exactly the entries written (a section would change
    their archive flag)."""
    ordered = _newest_first(entries)
    text, positions = render_memory_lines(ordered, now=now, archive_below=archive_below)
    rendered = split_lines(text)
    out = [TITLE, "", NOTE, ""]
    for entry in ordered:
        first, last = positions[entry.id]
        out.extend(rendered[first - 1 : last])
        out.append("")
    if quarantined:
        out.extend([f"## {QUARANTINED}", "", QUARANTINE_NOTE, ""])
        for block in quarantined:
            reason = " ".join(block.reason.replace("--", "- -").split()) or "unreadable"
            out.extend([f"<!-- quarantined: {reason} -->", block.text, ""])
    return "\n".join(out).rstrip("\n") + "\n"


def _is_furniture(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped in (TITLE, NOTE)


def _newest_first(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    return sorted(entries, key=lambda e: (e.scored_at, e.id), reverse=True)
