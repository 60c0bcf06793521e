"""Dates at the ends of the calendar: the command line refuses a `--now` or `--expires`
outside its stated years, and every reader survives whatever date a file or a row holds
(a far `now` given through the API, hand edits, file names): no OverflowError anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.base.clock import EARLIEST, LATEST, parse_day, parse_when
from memory_core.base.scope import MAIN
from memory_core.engine import MemoryCore
from tests.reliability.support import REPO

FAR_FUTURE = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def chatmem(
    workspace: Path, env: Mapping[str, str], *argv: str
) -> subprocess.CompletedProcess[str]:
    """`chatmem ARGV` in a process of its own, on the test's storage."""
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *argv, "--workspace", str(workspace)],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_answers(done: subprocess.CompletedProcess[str]) -> None:
    """A command ran to its end: no traceback, not the status of an uncaught exception
    (1 is also `validate`'s "quarantined blocks", so the traceback check decides)."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert "Error:" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("consolidate", "--now", "9999-12-31T23:59:59Z", "--apply"),
        ("consolidate", "--now", "0001-01-01", "--dry-run"),
        ("consolidate", "--now", "1999-12-31"),
        ("capture", "a todo", "--expires", "2201-01-01"),
    ],
)
def test_a_time_argument_outside_its_years_is_one_clear_refusal(
    workspace: Path, storage_env: Mapping[str, str], argv: tuple[str, ...]
) -> None:
    assert chatmem(workspace, storage_env, "init").returncode == 0
    done = chatmem(workspace, storage_env, *argv)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "out of range" in done.stderr and "2000 to 2200" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_states_the_years(tmp_path: Path) -> None:
    for command in ("consolidate", "capture"):
        done = chatmem(tmp_path, {}, command, "--help")
        assert "years 2000 to 2200" in " ".join(done.stdout.split())


@pytest.mark.slow
async def test_every_reader_survives_far_dates_in_files(
    core: MemoryCore, storage_env: Mapping[str, str]
) -> None:
    workspace = core.workspace.root
    kept, _ = await core.memories.capture(MAIN, "alice likes green tea")
    gone, _ = await core.memories.capture(MAIN, "bob owns a red bicycle")
    await core.memories.forget(MAIN, gone.id)
    # What `consolidate --now 9999-12-31T23:59:59Z --apply` wrote before it was refused,
    # still possible through the API: everything decays to forgotten in the year 9999.
    await core.memories.consolidate(MAIN, now=FAR_FUTURE)
    await core.memories.capture(MAIN, "carol plays the cello")
    await core.memories.flush()
    memory = core.memories.path(MAIN)
    text = memory.read_text(encoding="utf-8")
    # Hand edits at both ends of the calendar, in headers and in metadata.
    text = text.replace('"created_at": "', '"created_at": "0001-01-01T00:00:00+05:00", "x": "', 1)
    text += (
        "\n### [abcd1234] fact | 0.50 | 9999-12-31 | 3\n"
        '<!-- chatmem: {"last_activated": "9999-12-31T23:59:59Z", '
        '"scored_at": "9999-12-31T23:59:59Z", "expires_at": "0001-01-01T00:00:00Z"} -->\n'
        "dave lives in the far future\n"
    )
    memory.write_text(text, encoding="utf-8")
    notes = core.workspace.memory_dir(MAIN)
    (notes / "9999-12-31.md").write_text("# 9999-12-31\n\n- 23:59:59 the last note\n")
    (notes / "0001-01-01.md").write_text("# 0001-01-01\n\n- 00:00:00 the first note\n")
    (notes / "9999-12-31.jsonl").write_text('{"at": "9999-12-31T23:59:59Z", "kind": "x"}\n')
    await core.close()

    for argv in (
        ("status",),
        ("status", "--json"),
        ("stats",),
        ("scopes",),
        ("validate",),
        ("search", "green tea"),
        ("search", "last note"),
        ("entities",),
        ("reindex",),
        ("consolidate", "--dry-run"),
        ("consolidate",),
        ("restore", gone.id),
        ("status",),
    ):
        done = chatmem(workspace, storage_env, *argv)
        assert_answers(done)
    status = chatmem(workspace, storage_env, "status").stdout
    assert "carol plays the cello" in status and "dave lives in the far future" in status
    assert kept.id in status  # forgotten by the far consolidation, listed as restorable


def test_file_dates_are_kept_within_the_span_every_reader_can_compute_with() -> None:
    assert parse_when("9999-12-31T23:59:59Z") == LATEST
    assert parse_when("0001-01-01T00:00:00+05:00") == EARLIEST
    assert parse_when("2026-05-01") == datetime(2026, 5, 1, tzinfo=UTC)
    for name in ("9999-12-31", "0001-01-01"):
        with pytest.raises(ValueError):
            parse_day(name)
