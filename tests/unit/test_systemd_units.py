"""The systemd units of docs/operations.md (deploy/systemd/*.service): the files are
what the docs show, they have the hardening the docs promise, and `systemd-analyze
verify` accepts them where it is installed (Debian package `systemd`; .ci/run installs
it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNITS = sorted((REPO / "deploy" / "systemd").glob("*.service"))
DOC = REPO / "docs" / "operations.md"
BINARY = "/opt/chatmem/bin/chatmem"
"""Where the units expect the command (a virtual environment's); the verify run points
it at one that exists here."""


def test_there_is_a_unit_for_each_serving_command() -> None:
    commands = {re.search(r"^ExecStart=\S+ (\S+)", u.read_text(), re.M)[1] for u in UNITS}  # type: ignore[index]
    assert commands == {"telegram", "dingtalk", "mcp"}


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_the_docs_show_each_unit_as_it_is_in_its_file(unit: Path) -> None:
    blocks = re.findall(r"```ini\n(.*?)```", DOC.read_text("utf-8"), re.S)
    assert unit.read_text("utf-8") in blocks
    assert f"deploy/systemd/{unit.name}" in DOC.read_text("utf-8")


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_each_unit_restarts_on_failure_and_is_hardened(unit: Path) -> None:
    lines = set(unit.read_text("utf-8").splitlines())
    for line in (
        "Restart=on-failure",
        "EnvironmentFile=/etc/chatmem.env",
        "ProtectSystem=strict",
        "ReadWritePaths=/srv/chatmem",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "StandardOutput=journal",
        "StandardError=journal",
    ):
        assert line in lines, line
    assert "--config /srv/chatmem/chatmem.toml" in unit.read_text("utf-8")


def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        reason = "systemd-analyze is not installed (Debian package systemd): units not verified"
        print(reason, file=sys.stderr)
        pytest.skip(reason)
    executable = tmp_path / "chatmem"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    copies = []
    for unit in UNITS:
        copy = tmp_path / unit.name
        copy.write_text(unit.read_text("utf-8").replace(BINARY, str(executable)), "utf-8")
        copies.append(str(copy))
    done = subprocess.run(
        [tool, "verify", *copies], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    # verify exits 0 after a value it ignores ("Unknown key", "Failed to parse"): any
    # line it prints about the units is a failure too.
    printed = [line for line in (done.stdout + done.stderr).splitlines() if ".service" in line]
    assert done.returncode == 0 and printed == [], done.stdout + done.stderr
