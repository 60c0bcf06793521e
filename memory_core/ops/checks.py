"""The checks of `chatmem doctor` that read only files and the process's environment:
the config file's permissions, the environment's variables, the workspace, the disk and
the spool (a front end's own checks, such as its token's form, are the CLI's:
adapters/cli/doctor.py). Blocking, and quick: a stat or a small read each.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_core.base.wording import counted
from memory_core.ops.report import Check, fail, ok, skip, warn
from memory_core.storage.dialects import dialect_for

DISK_FAIL_BYTES = 100 * 1024**2
"""Below this much free disk the workspace's next writes (a rebuild, a day's notes) may
fail: a `fail`."""
DISK_WARN_BYTES = 1024**3
"""Below this much free disk: a `warn` (an index rebuild writes a copy of the index)."""
ENV_PREFIX = "CHATMEM_"


def config_file_check(path: Path | None, secret_keys: list[str]) -> Check:
    """A config file that holds secrets must be readable by its owner alone. `secret_keys`
    are the dotted keys of the secrets the file itself sets (never their values)."""
    name = "config file"
    if path is None:
        return ok(name, "none (defaults and the environment)")
    if not secret_keys:
        return ok(name, f"{path}: holds no secrets")
    mode = stat.S_IMODE(path.stat().st_mode)
    keys = ", ".join(secret_keys)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return warn(
            name,
            f"{path} holds secrets ({keys}) and other users can read it (mode {mode:o}): "
            f"chmod 600 {path}, or move them to the environment",
        )
    return ok(name, f"{path}: holds secrets ({keys}), readable by its owner only")


def secrets_in_file(values: Mapping[str, Any], secret_keys: list[str]) -> list[str]:
    """The dotted secret keys that a config file's own table sets to a non-empty value."""
    found = []
    for dotted in secret_keys:
        value: Any = values
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value:
            found.append(dotted)
    return found


def environment_check(env: Mapping[str, str], known: set[str]) -> Check:
    """A `CHATMEM_` variable no setting reads is most often a typo of one that does."""
    unknown = sorted(n for n in env if n.startswith(ENV_PREFIX) and n not in known)
    set_here = sorted(n for n in env if n in known and env[n])
    if unknown:
        return warn(
            "environment",
            f"unknown variable{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            "(no setting reads it: a typo?)",
        )
    shown = ", ".join(set_here) if set_here else "none"
    return ok("environment", f"variables in use: {shown}")


def workspace_check(root: Path, exists: bool) -> Check:
    name = "workspace"
    if not exists:
        return warn(name, f"no workspace at {root} yet (`chatmem init` makes one)")
    state = root / ".chatmem"
    for path in (root, state):
        if path.is_dir() and not os.access(path, os.W_OK):
            return fail(name, f"{path} is not writable by this user (uid {os.getuid()})")
    return ok(name, f"{root} is writable")


def disk_check(root: Path) -> Check:
    name = "disk"
    where = root if root.is_dir() else _existing_parent(root)
    usage = shutil.disk_usage(where)
    free = f"{usage.free / 1024**3:.1f} GiB free on the workspace's file system"
    if usage.free < DISK_FAIL_BYTES:
        return fail(name, f"only {free}")
    if usage.free < DISK_WARN_BYTES:
        return warn(name, f"only {free}")
    return ok(name, free)


def _existing_parent(path: Path) -> Path:
    for parent in path.absolute().parents:
        if parent.is_dir():
            return parent
    return Path("/")


def spool_check(state_dir: Path, backend: str) -> Check:
    """Messages and audit rows kept in the local spool while PostgreSQL was unreachable,
    not yet written to it (storage/spool.py)."""
    name = "spool"
    if not dialect_for(backend).is_server:
        return skip(name, "only the PostgreSQL backend spools")
    spool = state_dir / "spool"
    waiting = 0
    files = sorted(spool.glob("*.jsonl")) + sorted((spool / "audit").glob("*.jsonl"))
    for path in files:
        with path.open("rb") as file:
            waiting += sum(1 for line in file if line.strip())
    if waiting:
        return warn(
            name,
            f"{counted(waiting, 'record')} in {spool}, waiting for the database "
            "(written once a process reaches it)",
        )
    return ok(name, "empty")
