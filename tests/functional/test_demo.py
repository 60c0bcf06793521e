"""`chatmem demo`: a workspace with a real history, built through the core, idempotent."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.cli import main
from adapters.demo import ALICE, LI_LEI, SCOPES, TEAM, build_demo
from memory_core.base.clock import ManualClock
from memory_core.base.entries import ArchiveReason
from memory_core.base.scope import MAIN
from memory_core.config import Config, env_bindings
from memory_core.engine import MemoryCore
from tests.support import recent_messages

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".chatmem" not in p.parts
    }


async def test_demo_has_fresh_fading_archived_and_forgotten_memories(tmp_path: Path) -> None:
    ws = tmp_path / "demo"
    assert (await build_demo(ws, now=NOW)).built
    async with MemoryCore.open(Config(workspace=str(ws)), clock=ManualClock(NOW)) as core:
        assert set(await core.memories.scopes()) == set(SCOPES)
        main_status = await core.memories.status(MAIN)
        fresh = [
            e
            for e in main_status.active
            if e.score >= 0.45 and NOW - e.last_activated < timedelta(days=14)
        ]
        fading = [e for e in main_status.active if e.score < 0.35]
        assert len(fresh) >= 4 and len(fading) >= 3
        assert {e.archived for e in main_status.archived} == {
            ArchiveReason.MANUAL,
            ArchiveReason.EXPIRED,
            None,
        }
        assert sum(e.pinned for e in main_status.active) == 1
        assert any("对花生过敏" in e.content for e in fresh)
        for scope in (ALICE, LI_LEI, TEAM):
            assert (await core.memories.status(scope)).active
        forgotten = {r.detail for scope in SCOPES for r in await core.audit.forgotten(scope)}
        assert {"score below forget line", "forgotten by request"} <= forgotten
        sources = {r.source for r in await core.audit.recent(limit=500)}
        assert {"capture", "extract", "consolidate", "user"} <= sources
        actions = {r.action for r in await core.audit.recent(limit=500)}
        assert {"add", "reinforce", "archive", "forget", "pin"} <= actions

        counts = await core.history.counts_by_scope()
        assert counts[MAIN.value]["false"] == 2 and counts[MAIN.value]["true"] == 8
        assert counts[ALICE.value]["pending"] == 2
        failing = await recent_messages(core, LI_LEI, 10)
        assert failing and all(m.archived == "false" and m.archive_attempts >= 1 for m in failing)
        assert all(m.archive_next_at is not None and m.archive_next_at > NOW for m in failing)
        backlog = await core.audit.events(LI_LEI, kind="archive_backlog")
        assert len(backlog) == 1 and backlog[0].detail["attempts"] == 5

    summaries = ws / "memory" / "summary"
    assert (summaries / "2026-02-17.md").is_file() and (summaries / "2025-12.md").is_file()
    assert "extractive summary" in (summaries / "2025-12.md").read_text(encoding="utf-8")
    daily = sorted(p.name for p in (ws / "memory").glob("????-??-??.md"))
    assert daily == ["2026-02-27.md", "2026-02-28.md", "2026-03-01.md"]
    assert list((ws / "memory").glob("2026-02-27-*.md")), "a raw archive of recent history"


async def test_building_twice_changes_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "demo"
    await build_demo(ws, now=NOW)
    before = digest(ws)
    again = await build_demo(ws, now=NOW + timedelta(days=3))
    assert not again.built and digest(ws) == before


async def test_a_workspace_with_memories_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "real"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")
    with pytest.raises(Exception, match="not a demo workspace"):
        await build_demo(ws, now=NOW)


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, _ in env_bindings():
        monkeypatch.delenv(name, raising=False)
    configured = tmp_path / "configured"
    monkeypatch.setenv("CHATMEM_WORKSPACE", str(configured))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_cli_demo_builds_in_chatmem_demo_by_default(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--no-tui", "--now", "2026-03-01T12:00:00Z"]) == 0
    out = capsys.readouterr().out
    target = clean_env / "chatmem-demo"
    assert f"demo workspace built: {target}" in out
    assert (target / "MEMORY.md").is_file()
    assert not (clean_env.parent / "configured" / "MEMORY.md").exists()
    assert main(["demo", "--no-tui", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"workspace": str(target), "built": False}


def test_cli_demo_refuses_a_real_workspace(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = clean_env / "real"
    real.mkdir()
    (real / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")
    assert main(["demo", "--no-tui", "--workspace", str(real)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chatmem: error: ") and "not a demo workspace" in err
    assert err.count("\n") == 1


def _without_terminal(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The command as a script runs it: stdin and stdout are pipes, not a terminal."""
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *argv],
        cwd=cwd,
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # before the fix the TUI drew into the pipe until killed
        check=False,
    )


def test_demo_without_a_terminal_says_use_no_tui_and_builds_nothing(tmp_path: Path) -> None:
    done = _without_terminal(tmp_path, "demo", "--now", "2026-03-01T12:00:00Z")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("chatmem: error: no terminal: use --no-tui")
    assert done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_tui_without_a_terminal_is_one_line_and_exit_2(tmp_path: Path) -> None:
    ws = tmp_path / "W"
    assert _without_terminal(tmp_path, "init", "--workspace", str(ws)).returncode == 0
    done = _without_terminal(tmp_path, "tui", "--workspace", str(ws))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("chatmem: error: no terminal:")
    assert done.stderr.count("\n") == 1
