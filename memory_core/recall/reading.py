"""memory_get: read lines of a file the scope owns, or messages of one of its sessions.

Paths come from a model or a person, so everything is resolved through
`Workspace.resolve_readable` (no `..`, no absolute paths, no symlinks out, no other scope)
and session paths are looked up with the caller's scope in the query.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from memory_core.base import safe_files
from memory_core.base.errors import ChatmemError, PathRefused
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.recall.index.model import IndexBackend

DEFAULT_LINES = 40
MAX_LINES = 300
_WITH_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+)(?:-\d+)?$")
SESSIONS_PREFIX = "sessions/"


@dataclass(frozen=True, slots=True)
class MemoryRead:
    path: str
    start: int
    end: int
    text: str
    truncated: bool
    total_lines: int


def parse_location(requested: str, start: int | None) -> tuple[str, int]:
    """Accept `path`, `path:line`, `[path:line]` and `[path:line] text` as search prints."""
    text = requested.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    match = _WITH_LINE.match(text)
    if match:
        return match.group("path"), start if start is not None else int(match.group("line"))
    return text, start if start is not None else 1


async def read_memory_path(
    workspace: Workspace,
    index: IndexBackend | None,
    scope: ScopeKey,
    requested: str,
    start: int | None = None,
    lines: int | None = None,
) -> MemoryRead:
    path, first = parse_location(requested, start)
    first = max(1, first)
    count = DEFAULT_LINES if lines is None else lines
    if count < 1:
        raise ChatmemError("lines must be at least 1")
    count = min(count, MAX_LINES)
    if path.startswith(SESSIONS_PREFIX):
        return await _read_session(index, scope, path, first, count)
    resolved = workspace.resolve_readable(scope, path)
    try:
        content = await asyncio.to_thread(
            safe_files.read_text, workspace.root, resolved, safe_files.LONG_TERM_BYTES, "replace"
        )
    except FileNotFoundError:
        raise ChatmemError(f"no such memory file: {path}") from None
    except IsADirectoryError:
        raise PathRefused(f"refused path {path!r}: not a file") from None
    except OSError as exc:
        # A name too long, a file used as a directory, no permission: the caller's input,
        # so an error the model can read rather than an exception that ends the turn.
        raise ChatmemError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    all_lines = content.splitlines()
    window = all_lines[first - 1 : first - 1 + count]
    end = first + len(window) - 1
    return MemoryRead(
        path=workspace.relative(resolved) if resolved.is_relative_to(workspace.root) else path,
        start=first,
        end=end,
        text="\n".join(window),
        truncated=end < len(all_lines),
        total_lines=len(all_lines),
    )


async def _read_session(
    index: IndexBackend | None, scope: ScopeKey, path: str, first: int, count: int
) -> MemoryRead:
    session_id = path[len(SESSIONS_PREFIX) :]
    if not session_id or "/" in session_id or "\x00" in session_id:
        raise PathRefused(f"refused path {path!r}: not a session of this scope")
    if index is None:
        raise ChatmemError("session messages need the index, which is unavailable")
    messages = await index.session_messages(scope, session_id, first, count + 1)
    if not messages:
        raise ChatmemError(f"no messages at {path}:{first} in this scope")
    shown = messages[:count]
    return MemoryRead(
        path=path,
        start=shown[0][0],
        end=shown[-1][0],
        text="\n".join(f"[{mid}] {text}" for mid, text in shown),
        truncated=len(messages) > count,
        total_lines=len(shown),
    )
