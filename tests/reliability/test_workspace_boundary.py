"""Item 5 of issue 34: the workspace is a boundary.

Fifteen links and special files inside a workspace, each pointing outside it or being no
file at all, driven through the real paths a person and a bot take: `capture`, `append`,
`search`, `get`, `status`, `snapshot`, `reindex` on the command line, and `recall`, the
prompt's memory block and daily notes, and the `memory_get` / `memory_search` tools
through the API. For every case: 0 changes outside (the outside tree is hashed before
and after), 0 outside reads (a canary word that only the outside holds never appears in
any output), 0 hangs (each case runs in a child process under a timeout: a guard, not a
wait), no traceback and no `MemoryError`. A link inside that points inside keeps working.

On the main this test replaced, 4 cases changed files outside, 5 read the canary back,
the FIFOs hung the child until the timeout, and /dev/zero raised `MemoryError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.cli import main
from memory_core.base.errors import FileRefused
from memory_core.base.scope import MAIN, ScopeKey, scope_slug
from memory_core.config import env_bindings
from memory_core.engine import MemoryCore

REPO = Path(__file__).resolve().parents[2]
CANARY = "zqcanary7"
"""A word only the files outside the workspace hold."""
QUERY = "secret violet"
"""What the commands look for: the words around the canary, never the canary itself
(a command may echo its query)."""
OUTSIDE_FACT = f"the secret code is {CANARY} violet"
CHILD_TIMEOUT = 120
BOB = ScopeKey("peer:bob")

DRIVER = r"""
import asyncio, contextlib, io, json, sys
from adapters.cli import main
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.engine import MemoryCore

ws, scope, get_path, query = sys.argv[1:5]
results = []

def cli(name, *argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*argv, "--workspace", ws, "--scope", scope])
        except SystemExit as exc:
            code = exc.code
    results.append({"step": name, "code": code, "out": out.getvalue(), "err": err.getvalue()})

cli("capture", "capture", "likes black coffee in the morning")
cli("append", "append", "walked to the station")
cli("search", "search", query)
cli("get", "get", get_path)
cli("status", "status")
cli("snapshot", "snapshot", "--show")
cli("reindex", "reindex")
cli("search-after-reindex", "search", query)

async def api():
    config = load_config(None, env={}, workspace=ws)
    key = ScopeKey(scope)
    async with MemoryCore.open(config, create=False) as core:
        steps = {
            "recall": lambda: core.finder.recall(key, query),
            "prompt": lambda: core.snapshots.prompt_block(key),
            "daily-notes": lambda: core.notes.recent(key),
            "memory_get": lambda: core.memory_tool(key, "memory_get", {"path": get_path}),
            "memory_search": lambda: core.memory_tool(key, "memory_search", {"query": query}),
        }
        for name, call in steps.items():
            try:
                results.append({"step": name, "code": 0, "out": repr(await call()), "err": ""})
            except ChatmemError as exc:
                results.append({"step": name, "code": 2, "out": "", "err": str(exc)})

try:
    asyncio.run(api())
except ChatmemError as exc:
    results.append({"step": "open", "code": 2, "out": "", "err": str(exc)})
print(json.dumps(results))
"""


@dataclass
class Case:
    """One link or special file: `make` builds it (workspace root, outside root)."""

    name: str
    make: Callable[[Path, Path], None]
    scope: ScopeKey = MAIN
    get_path: str = "MEMORY.md"
    must_work: bool = False
    refused_steps: set[str] = field(default_factory=set)
    """Steps that must answer with a refusal naming the problem (exit 2 or a refusal)."""
    skipped_by_reindex: bool = False
    """`reindex` succeeds, skipping the refused file with one warning line."""


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def yesterday() -> str:
    return (datetime.now(UTC).date() - timedelta(days=1)).isoformat()


def outside_note(outside: Path, name: str) -> Path:
    path = outside / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {today()}\n\n- 09:00:00 {OUTSIDE_FACT}\n", encoding="utf-8")
    return path


def outside_memory(outside: Path, name: str) -> Path:
    path = outside / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Long-term memory\n\n## Active\n\n"
        "### [aaaa1111] fact · 0.90 · 2026-01-01T00:00:00Z\n"
        f"{OUTSIDE_FACT}\n",
        encoding="utf-8",
    )
    return path


def relink(link: Path, target: Path | str) -> None:
    """Replace whatever is at `link` (a file or a folder the seeding made) by a link."""
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        import shutil

        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def fifo(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    os.mkfifo(path)


def unix_socket(path: Path) -> None:
    """A socket file (bound from its folder: a socket path may not be long)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    here = Path.cwd()
    os.chdir(path.parent)
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()  # the file stays
    finally:
        os.chdir(here)


def _scope_dir(ws: Path, scope: ScopeKey = BOB) -> Path:
    return ws / "memory" / "scopes" / scope_slug(scope)


def _daily_link(ws: Path, out: Path) -> None:
    relink(ws / "memory" / f"{today()}.md", outside_note(out, "note.md"))


def _memory_dir_link(ws: Path, out: Path) -> None:
    outside_note(out, f"memdir/{today()}.md")
    outside_note(out, f"memdir/{yesterday()}.md")
    relink(ws / "memory", out / "memdir")


def _scope_dir_link(ws: Path, out: Path) -> None:
    outside_memory(out, "bobdir/LONG_TERM.md")
    outside_note(out, f"bobdir/{today()}.md")
    (out / "bobdir" / ".scope").write_text(BOB.value, encoding="utf-8")
    relink(_scope_dir(ws), out / "bobdir")


def _state_dir_link(ws: Path, out: Path) -> None:
    (out / "state").mkdir()
    (out / "state" / "keep.txt").write_text(OUTSIDE_FACT, encoding="utf-8")
    relink(ws / ".chatmem", out / "state")


def _memory_md_link(ws: Path, out: Path) -> None:
    relink(ws / "MEMORY.md", outside_memory(out, "MEMORY.md"))


def _long_term_link(ws: Path, out: Path) -> None:
    relink(_scope_dir(ws) / "LONG_TERM.md", outside_memory(out, "LONG_TERM.md"))


def _snapshot_link(ws: Path, out: Path) -> None:
    path = out / "SNAPSHOT.md"
    path.write_text(f"# Snapshot\n\n## Identity\n{OUTSIDE_FACT}\n", encoding="utf-8")
    relink(ws / "memory" / "SNAPSHOT.md", path)


def _dev_zero(ws: Path, out: Path) -> None:
    relink(_scope_dir(ws) / "LONG_TERM.md", "/dev/zero")


def _fifo_daily(ws: Path, out: Path) -> None:
    fifo(ws / "memory" / f"{today()}.md")


def _fifo_memory_md(ws: Path, out: Path) -> None:
    fifo(ws / "MEMORY.md")


def _socket_daily(ws: Path, out: Path) -> None:
    unix_socket(ws / "memory" / f"{yesterday()}.md")


def _dangling(ws: Path, out: Path) -> None:
    relink(ws / "memory" / f"{today()}.md", out / "not-yet" / "created.md")
    (out / "not-yet").mkdir()


def _inside_links(ws: Path, out: Path) -> None:
    """MEMORY.md links to a file elsewhere in the workspace, yesterday's note to one in
    a folder of the scope's memory (a scope reads only its own files)."""
    kept = ws / "kept"
    kept.mkdir()
    (ws / "MEMORY.md").rename(kept / "MEMORY.md")
    relink(ws / "MEMORY.md", Path("kept") / "MEMORY.md")
    (ws / "memory" / "old").mkdir()
    (ws / "memory" / "old" / "day.md").write_text(
        f"# {yesterday()}\n\n- 09:00:00 the secret garden is violet\n", encoding="utf-8"
    )
    relink(ws / "memory" / f"{yesterday()}.md", Path("old") / "day.md")


def _scopes_parent_link(ws: Path, out: Path) -> None:
    """The link is in a parent: memory/scopes, above every scope's folder."""
    outside_memory(out, f"scopes/{scope_slug(BOB)}/LONG_TERM.md")
    outside_note(out, f"scopes/{scope_slug(BOB)}/{today()}.md")
    (out / "scopes" / scope_slug(BOB) / ".scope").write_text(BOB.value, encoding="utf-8")
    relink(ws / "memory" / "scopes", out / "scopes")


def _summary_link(ws: Path, out: Path) -> None:
    outside_note(out, "summary/2026-01.md")
    relink(ws / "memory" / "summary", out / "summary")


def _index_file_link(ws: Path, out: Path) -> None:
    """A hard-to-see one: the index database inside `.chatmem/`."""
    (out / "index.sqlite3").write_bytes(b"")
    for suffix in ("", "-wal", "-shm"):
        path = ws / ".chatmem" / f"index.sqlite3{suffix}"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    relink(ws / ".chatmem" / "index.sqlite3", out / "index.sqlite3")


CASES = [
    Case("daily-note-link", _daily_link, get_path=f"memory/{today()}.md",
         refused_steps={"append", "get", "memory_get"}),
    Case("memory-dir-link", _memory_dir_link, get_path=f"memory/{today()}.md",
         refused_steps={"capture", "append", "get", "open"}),
    Case("scope-dir-link", _scope_dir_link, scope=BOB,
         get_path=f"memory/scopes/{scope_slug(BOB)}/{today()}.md",
         refused_steps={"capture", "append", "recall", "prompt", "memory_get"}),
    Case("state-dir-link", _state_dir_link, refused_steps={"capture", "search", "open"}),
    Case("memory-md-link", _memory_md_link,
         refused_steps={"capture", "status", "get", "recall", "memory_get"}),
    Case("long-term-link", _long_term_link, scope=BOB, get_path="LONG_TERM.md",
         refused_steps={"capture", "status", "recall", "prompt", "memory_get"}),
    Case("snapshot-link", _snapshot_link, get_path="memory/SNAPSHOT.md",
         refused_steps={"snapshot", "get", "memory_get"}),
    Case("long-term-to-dev-zero", _dev_zero, scope=BOB, get_path="LONG_TERM.md",
         refused_steps={"capture", "status", "recall", "prompt", "memory_get"}),
    Case("fifo-daily-note", _fifo_daily, get_path=f"memory/{today()}.md",
         refused_steps={"append", "get", "memory_get"}),
    Case("fifo-memory-md", _fifo_memory_md,
         refused_steps={"capture", "status", "get", "recall", "memory_get"},
         skipped_by_reindex=True),
    Case("socket-daily-note", _socket_daily, get_path=f"memory/{yesterday()}.md",
         refused_steps={"get", "memory_get"}),
    Case("dangling-daily-note", _dangling, get_path=f"memory/{today()}.md",
         refused_steps={"append"}),
    Case("links-inside-to-inside", _inside_links, get_path=f"memory/{yesterday()}.md",
         must_work=True),
    Case("scopes-parent-link", _scopes_parent_link, scope=BOB,
         get_path=f"memory/scopes/{scope_slug(BOB)}/{today()}.md",
         refused_steps={"capture", "append", "recall", "memory_get"}),
    Case("summary-dir-link", _summary_link, get_path="memory/summary/2026-01.md",
         refused_steps={"get", "memory_get"}),
    Case("index-file-link", _index_file_link, refused_steps={"capture", "search", "open"}),
]  # fmt: skip


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under `root` (links not followed): its kind and, for a file, a hash."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[relative] = "link:" + os.readlink(path)
            elif path.is_file():
                out[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[relative] = "dir" if path.is_dir() else "other"
    return out


@contextlib.contextmanager
def clean_cli_env(monkeypatch: pytest.MonkeyPatch, cwd: Path) -> Iterator[None]:
    for name, _ in env_bindings():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(cwd)
    yield


def seed(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A used workspace: main and bob each with a memory, a note and a snapshot."""
    for argv in (
        ["init"],
        ["capture", "likes green tea"],
        ["append", "fed the cat"],
        ["snapshot"],
        ["capture", "plays the cello", "--scope", BOB.value],
        ["append", "practised scales", "--scope", BOB.value],
    ):
        try:
            code = main([*argv, "--workspace", str(ws)])
        except SystemExit as exc:
            code = exc.code
        assert not code, (argv, capsys.readouterr())
    capsys.readouterr()


def drive(ws: Path, case: Case, cwd: Path) -> tuple[list[dict[str, object]], str]:
    """The commands and API calls of one case, in a child process under a timeout."""
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    env["PYTHONPATH"] = str(REPO)
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(DRIVER), str(ws), case.scope.value,
             case.get_path, QUERY],
            capture_output=True, text=True, env=env, cwd=cwd, timeout=CHILD_TIMEOUT,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: the commands hung (no answer in {CHILD_TIMEOUT} s)")
    assert done.returncode == 0, f"{case.name}: the driver died:\n{done.stderr[-3000:]}"
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]), done.stdout + done.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_no_link_or_special_file_leads_out_of_the_workspace(
    case: Case,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws, outside, cwd = tmp_path / "ws", tmp_path / "outside", tmp_path / "cwd"
    outside.mkdir()
    cwd.mkdir()
    with clean_cli_env(monkeypatch, cwd):
        seed(ws, capsys)
    case.make(ws, outside)
    before = tree_digest(outside)

    steps, everything = drive(ws, case, cwd)

    by_step = {str(s["step"]): s for s in steps}
    assert tree_digest(outside) == before, f"{case.name}: files outside changed"
    assert CANARY not in everything, f"{case.name}: outside text was read back"
    assert "Traceback" not in everything
    assert "MemoryError" not in everything
    for step in steps:
        assert step["code"] in (0, 1, 2, None), step
        if step["code"] == 2:
            # One clear line (warnings before it are log lines of their own).
            errors = [line for line in str(step["err"]).splitlines() if "error" in line]
            assert len(errors) <= 1, step
    if case.must_work:
        assert all(not s["code"] for s in steps), steps
        assert "the secret garden is violet" in str(by_step["get"]["out"])
        assert "the secret garden is violet" in str(by_step["memory_get"]["out"])
        assert "likes black coffee" in str(by_step["status"]["out"])
        assert "likes black coffee" in (ws / "kept" / "MEMORY.md").read_text(encoding="utf-8")
        assert (ws / "MEMORY.md").is_symlink()  # written through, still a link
    if case.skipped_by_reindex:
        reindex = by_step["reindex"]
        assert reindex["code"] == 0, reindex
        skipped = [line for line in str(reindex["err"]).splitlines() if "skipped" in line]
        # One log record (the one log format puts time, level and logger before it).
        assert len(skipped) == 1
        assert skipped[0].endswith(
            "refused MEMORY.md: a FIFO (named pipe), not a memory file; skipped"
        )
    for name in case.refused_steps:
        # A workspace refused whole (its state or memory folder leads out) refuses every
        # API call at its open.
        step = by_step.get(name) or by_step.get("open")
        assert step is not None, (name, steps)
        said = str(step["err"]) + str(step["out"])
        assert step["code"] == 2 or "refused" in said, (case.name, name, step)
        assert "refused" in said, (case.name, name, step)


async def test_a_refused_scope_leaves_the_others_served(core: MemoryCore) -> None:
    """Bob's long-term file is a link to /dev/zero and main's today's note a FIFO: Bob's
    reads and writes are one refusal line each, and main is served as before."""
    await core.memories.capture(BOB, "plays the cello")
    await core.memories.flush()
    core.memories.path(BOB).unlink()
    core.memories.path(BOB).symlink_to("/dev/zero")
    await core.memories.capture(MAIN, "likes green tea")
    await core.memories.flush()
    fifo(core.workspace.daily_path(MAIN, core.notes.today()))

    with pytest.raises(FileRefused, match=r"LONG_TERM\.md: a link leads outside"):
        await core.memories.entries(BOB)
    with pytest.raises(FileRefused, match="FIFO"):
        await core.notes.append(MAIN, "fed the cat")

    await core.memories.capture(MAIN, "walks to work")
    await core.memories.flush()
    assert "walks to work" in [e.content for e in await core.memories.entries(MAIN)]
    assert [h.text for h in await core.finder.search(MAIN, "green tea")] == ["likes green tea"]
    assert await core.notes.recent(MAIN) == ""  # the FIFO is left out, never waited on
    assert "walks to work" in await core.snapshots.prompt_block(MAIN)
