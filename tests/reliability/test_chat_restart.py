"""`chatmem chat` run again and again on one workspace answers every line of every run.

Console message ids were line numbers from 1 in each run, and the workspace's deliveries
table, which remembers the ids it saw for days, took a new run's first lines for
redeliveries of the last run's: they got no reply and were not stored, exit 0.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.functional.test_console import clean_env
from tests.reliability.support import REPO, cli

RUNS = [
    ["remember that alice likes green tea", "/scope", "remember that alice plays the cello"],
    ["remember that alice lives in Porto", "/scope", "/memory", "remember that bob has a cat"],
    ["remember that alice likes green tea", "remember that the car is blue", "/scope"],
]
"""Lines of three runs in a row; each starts where the run before started, at line 1."""


def chat_run(workspace: Path, lines: list[str], env: Mapping[str, str]) -> list[str]:
    """One `chatmem chat` run on `lines` (piped, one reply per line); its output lines."""
    done = subprocess.run(
        cli("chat", "--workspace", str(workspace), "--as", "alice"),
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
        env=clean_env(env),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.splitlines()


def test_every_line_of_every_run_is_answered_and_kept(
    workspace: Path, storage_env: Mapping[str, str]
) -> None:
    dropped = []
    for run, lines in enumerate(RUNS, start=1):
        replies = chat_run(workspace, lines, storage_env)
        if len(replies) != len(lines):
            dropped.append((run, lines, replies))
    assert dropped == []
    memory = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    taught = {line.removeprefix("remember that ") for run in RUNS for line in run}
    assert sorted(fact for fact in taught if fact[0] != "/" and fact not in memory) == []
