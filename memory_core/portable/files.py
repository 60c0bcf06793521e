"""A scope's archive files and summaries, out as records and in again (blocking I/O:
callers run these in a worker thread).

Archive files (`YYYY-MM-DD-{slug}.md`, raw history the archive moved out of the
database) and summaries (`summary/YYYY-MM-DD.md`, `summary/YYYY-MM.md`) are what a
scope's older conversations have become: without them an export would lose them.
An import writes a file that is missing; one the scope holds with the same text is
present. A summary the scope holds with other text gets the sections it lacks appended
(the archiver appends sections the same way); an archive file whose name the scope uses
for other text goes under the name with the text's hash added, so importing again
finds it there.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.portable.records import ARCHIVE_NAME, SUMMARY_NAME, Record


def _listed(workspace: Workspace, scope: ScopeKey, folder: Path, kind: str) -> list[Record]:
    pattern = ARCHIVE_NAME if kind == "archive" else SUMMARY_NAME
    found: list[tuple[str, Path]] = []
    for item in safe_files.entries(workspace.root, folder):
        if pattern.match(item.name) and item.is_file(follow_symlinks=False):
            found.append((item.name, Path(item.path)))
    return [
        Record(kind, scope, {"name": name, "text": _read(workspace, path)})
        for name, path in sorted(found)
    ]


def _read(workspace: Workspace, path: Path) -> str:
    return safe_files.read_text(workspace.root, path, safe_files.NOTE_BYTES, "replace")


def file_records(workspace: Workspace, scope: ScopeKey) -> list[Record]:
    """The scope's archive files, then its summaries, oldest first."""
    return [
        *_listed(workspace, scope, workspace.memory_dir(scope), "archive"),
        *_listed(workspace, scope, workspace.summary_dir(scope), "summary"),
    ]


def path_of(workspace: Workspace, scope: ScopeKey, kind: str, name: str) -> Path:
    folder = workspace.memory_dir(scope) if kind == "archive" else workspace.summary_dir(scope)
    return folder / name


def sections(text: str) -> list[str]:
    """Pure: a summary file's `## ` sections (what came before the first, if anything,
    is one too), each stripped."""
    parts: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("## ") and any(x.strip() for x in parts[-1]):
            parts.append([])
        parts[-1].append(line)
    return [s for s in ("\n".join(p).strip() for p in parts) if s]


def merged_summary(held: str, incoming: str) -> str | None:
    """Pure: the held summary with the incoming sections it lacks appended, or None when
    it lacks none."""
    have = set(sections(held))
    extra = [s for s in sections(incoming) if s not in have]
    if not extra:
        return None
    return "\n\n".join([held.rstrip(), *extra]).lstrip("\n") + "\n"


def hashed_name(name: str, text: str) -> str:
    """Pure: the name an archive file goes under when its own name is taken."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return f"{name[:-3]}-{digest}.md"


@dataclass(frozen=True, slots=True)
class Placed:
    """Where an imported file went: its workspace-relative path when written, else None
    (the scope held it already)."""

    written: str | None


def place(workspace: Workspace, scope: ScopeKey, kind: str, name: str, text: str) -> Placed:
    """Write one archive file or summary into the scope, as the module says."""
    workspace.ensure_scope(scope)
    path = path_of(workspace, scope, kind, name)
    held = _held(workspace, path)
    if held is not None and held.strip() == text.strip():
        return Placed(None)
    if held is not None and kind == "summary":
        merged = merged_summary(held, text)
        if merged is None:
            return Placed(None)
        text = merged
    elif held is not None:
        path = path.with_name(hashed_name(name, text))
        again = _held(workspace, path)
        if again is not None and again.strip() == text.strip():
            return Placed(None)
    safe_files.make_dirs(workspace.root, path.parent)
    atomic_write_text(path, text, root=workspace.root)
    return Placed(workspace.relative(path))


def _held(workspace: Workspace, path: Path) -> str | None:
    try:
        return _read(workspace, path)
    except (FileNotFoundError, NotADirectoryError):
        return None
