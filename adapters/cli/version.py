"""`chatmem --version`: the distribution's version, the schema versions this code writes,
which extras are installed, and, when a workspace is found, the schema its database is at
(memory_core/ops/versions.py). No asyncio, no engine: it answers at once (a test checks
what it imports). A workspace that cannot be read is said, never an error: the versions
are what an operator pastes into a bug report, even from a broken setup."""

from __future__ import annotations

import argparse
import platform
from typing import Any

from adapters.cli import Output

PG_VERSION_TIMEOUT_SECONDS = 3
"""How long `--version` waits to reach a PostgreSQL workspace's server to read its schema."""


def show(args: argparse.Namespace) -> int:
    from memory_core.ops import versions

    schemas = versions.code_schemas()
    extras = versions.extras()
    data: dict[str, Any] = {
        "version": versions.distribution_version(),
        "distribution": versions.DISTRIBUTION,
        "python": platform.python_version(),
        "schemas": schemas,
        "extras": extras,
        "workspace": workspace_schemas(args),
    }
    lines = [
        f"chatmem {data['version']} ({versions.DISTRIBUTION}, Python {data['python']})",
        "schema versions: "
        f"sqlite index {schemas['sqlite_index']}, sqlite journal {schemas['sqlite_journal']}, "
        f"postgres {schemas['postgres']}",
        "extras: "
        + (", ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in extras.items()) or "none"),
    ]
    found = data["workspace"]
    if found is not None:
        where = f"workspace {found['path']} ({found['backend']})"
        if found.get("error"):
            lines.append(f"{where}: {found['error']}")
        else:
            lines.append(f"{where}: " + "; ".join(s["summary"] for s in found["schemas"]))
    Output(args.json).emit(data, "\n".join(lines))
    return 0


def workspace_schemas(args: argparse.Namespace) -> dict[str, Any] | None:
    """The schema of the workspace the command line, environment or config names; None
    when there is none there."""
    from adapters.settings import load_app_config
    from memory_core.base.errors import ChatmemError
    from memory_core.base.workspace import Workspace
    from memory_core.ops import versions
    from memory_core.storage.dialects import dialect_for

    try:
        config = load_app_config(args.config, workspace=args.workspace)
    except ChatmemError as exc:
        return {"path": None, "backend": None, "schemas": [], "error": str(exc)}
    workspace = Workspace.at(config.workspace_path)
    if not workspace.state_dir.is_dir():
        return None
    backend = config.storage.backend
    found: dict[str, Any] = {"path": str(workspace.root), "backend": backend, "schemas": []}
    try:
        if dialect_for(backend).is_server:
            states = [
                versions.postgres_state(config.storage.postgres_dsn, PG_VERSION_TIMEOUT_SECONDS)
            ]
        else:
            states = versions.sqlite_states(workspace.state_dir)
    except Exception as exc:  # psycopg's, sqlite3's: said in one line, never a traceback
        found["error"] = f"schema unknown: {first_line(exc)}"
        return found
    found["schemas"] = [state.as_json() | {"summary": state.summary} for state in states]
    return found


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
