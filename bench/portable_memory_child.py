"""The child side of bench/portable_memory.py: one fresh process of one tree's installed
code (its venv's python runs this file) writes the generated workspace, exports it, or
imports an export, and prints one JSON line.

Kept stable across revisions: it imports only the standard library and the core API that
every revision with an export has (b42d7a9 on): `MemoryCore.open`, `export_file`,
`import_from`, `record_session`, `workspace.ensure_scope` / `long_term_path`,
`load_config`, `ScopeKey` and `RecordedMessage` (each looked up where the revision keeps
it). A revision whose core has no export or import says so in its JSON line
(`unmeasurable`) instead of failing. The workspace's texts come from the parent (a spec
file: each scope's MEMORY.md and the sessions' messages), so every tree gets the same.

    <tree's python> bench/portable_memory_child.py generate|export|import ROOT FILE
"""

from __future__ import annotations

import asyncio
import importlib
import json
import resource
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

QUIET = {"CHATMEM_EMBEDDING_PROVIDER": "none"}
"""Vectors are not what is measured."""


def _first(name: str, *modules: str) -> Any:
    """`name` from the first of `modules` that has it (the folder layout, then the flat)."""
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ModuleNotFoundError, AttributeError):
            continue
    raise ImportError(f"{name} in none of {modules}")


def lacking() -> str | None:
    """Why this tree cannot be measured, or None."""
    try:
        from memory_core.engine import MemoryCore
    except ImportError as error:
        return f"no MemoryCore ({error})"
    missing = [n for n in ("export_file", "import_from") if not hasattr(MemoryCore, n)]
    if missing:
        return f"its core has no {' or '.join(missing)} (no export or import yet)"
    return None


def _config(root: Path) -> Any:
    from memory_core.config import load_config

    return load_config(None, env=QUIET, workspace=root)


async def generate(root: Path, spec: dict[str, Any]) -> dict[str, float]:
    """The spec's MEMORY.md files and sessions written into a new workspace at `root`."""
    from memory_core.engine import MemoryCore

    scope_key = _first("ScopeKey", "memory_core.base.scope", "memory_core.scope")
    message = _first("RecordedMessage", "memory_core.base.records", "memory_core.records")
    async with MemoryCore.open(_config(root)) as core:
        for key, text in spec["memory"].items():
            scope = scope_key(key)
            core.workspace.ensure_scope(scope)
            core.workspace.long_term_path(scope).write_text(text, encoding="utf-8")
        for key, session, said in spec["sessions"]:
            messages = [
                message(role, "", content, datetime.fromisoformat(at)) for role, content, at in said
            ]
            await core.record_session(scope_key(key), session, messages[0].at, messages)
    return {}


async def measure(what: str, root: Path, file: Path) -> dict[str, float]:
    """`export` the workspace at `root` to `file`, or `import` `file` into it: records,
    seconds, and the process's peak RSS once the core is open and at the end."""
    from memory_core.engine import MemoryCore

    async with MemoryCore.open(_config(root)) as core:
        opened = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        began = time.perf_counter()
        if what == "export":
            count = await core.export_file([], file)
        else:
            _, report = await core.import_from(file)
            count = sum(report.added.values())
        seconds = time.perf_counter() - began
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"records": count, "open_mib": opened, "rss_mib": rss, "seconds": seconds}


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[0] not in ("generate", "export", "import"):
        raise SystemExit("usage: portable_memory_child.py generate|export|import ROOT FILE")
    what, root, file = argv[0], Path(argv[1]), Path(argv[2])
    why = lacking()
    if why is not None:
        out: dict[str, object] = {"unmeasurable": why}
    elif what == "generate":
        spec = json.loads(file.read_text(encoding="utf-8"))
        out = dict(asyncio.run(generate(root, spec)))
    else:
        out = dict(asyncio.run(measure(what, root, file)))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
