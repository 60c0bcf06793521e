"""What the command-line tests share: a clean environment for every test, a workspace
path, and `Run`, which calls `main(argv)` in-process on it and reads what it printed."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from memory_core.base.clock import format_when
from tests.support import clean_cli_env

PYTEST_PREF = "用户喜欢用 pytest 而非 unittest"


CHATMEM = Path(sys.executable).with_name("chatmem")


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


@pytest.fixture(name="ws")
def ws_fixture(tmp_path: Path) -> Path:
    return tmp_path / "W"


class Run:
    def __init__(self, capsys: pytest.CaptureFixture[str], ws: Path) -> None:
        self.capsys = capsys
        self.ws = ws

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        try:
            code: Any = main([*argv, "--workspace", str(self.ws)])
        except SystemExit as exc:
            code = exc.code
        out, err = self.capsys.readouterr()
        return int(code or 0), out, err

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)

    def capture(self, text: str, *extra: str) -> str:
        data = self.json("capture", text, *extra)
        return str(data["entry"]["id"])


@pytest.fixture(name="cli")
def cli_fixture(capsys: pytest.CaptureFixture[str], ws: Path) -> Run:
    """Commands on a workspace made by `chatmem init` (only init and the bots make one)."""
    run = Run(capsys, ws)
    code, _, err = run("init")
    assert code == 0, err
    return run


@pytest.fixture(name="no_ws")
def no_ws_fixture(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Run:
    """Commands on a workspace path where nothing exists."""
    return Run(capsys, tmp_path / "no-such-ws")


def one_line_error(code: int, out: str, err: str, expected_code: int = 2) -> str:
    assert code == expected_code
    assert "Traceback" not in err + out
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert err.startswith("chatmem: error: ")
    return err


def days_from_now(days: int) -> str:
    return format_when(datetime.now(UTC) + timedelta(days=days))
