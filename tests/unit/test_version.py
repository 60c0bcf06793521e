"""`chatmem --version`: versions, schemas, extras, and the workspace's schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from memory_core.config import env_bindings
from memory_core.ops.versions import code_schemas, extras, schema_state
from memory_core.storage.migrations import MIGRATIONS
from memory_core.storage.pg.migrations import PG_MIGRATIONS
from tests.support import clean_cli_env, run_cli


def test_version_without_a_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    code, out, err = run_cli(capsys, "--version", "--workspace", str(tmp_path / "none"))
    assert (code, err) == (0, "")
    first, schemas, listed = out.splitlines()
    assert first.startswith("chatmem 0.")
    assert schemas == (
        f"schema versions: sqlite index {len(MIGRATIONS)}, sqlite journal 1, "
        f"postgres {len(PG_MIGRATIONS)}"
    )
    assert "postgres yes" in listed  # the test environment has the postgres extra
    assert "dev" not in listed
    assert not (tmp_path / "none").exists()


@pytest.mark.storage
def test_version_json_reads_the_workspace_schema(
    workspace: Path,
    storage_env: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    assert run_cli(capsys, "init", "--workspace", str(workspace))[0] == 0
    code, out, _ = run_cli(capsys, "--version", "--json", "--workspace", str(workspace))
    assert code == 0
    data = json.loads(out)
    assert data["schemas"] == code_schemas()
    assert data["extras"] == extras()
    found = data["workspace"]
    assert found["path"] == str(workspace)
    backend = storage_env.get("CHATMEM_STORAGE_BACKEND", "sqlite")
    assert found["backend"] == backend
    databases = [s["database"] for s in found["schemas"]]
    assert databases == (
        ["postgres"] if backend == "postgres" else ["sqlite index", "sqlite journal"]
    )
    for state in found["schemas"]:
        assert state["applied"] == state["code"] and state["newer"] == 0
        assert state["summary"].endswith("(current)")


def test_version_says_an_unreachable_server_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    (tmp_path / "ws" / ".chatmem").mkdir(parents=True)
    monkeypatch.setenv("CHATMEM_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("CHATMEM_POSTGRES_DSN", "postgresql://bot:pw-s3cret@127.0.0.1:1/chatmem")
    code, out, err = run_cli(capsys, "--version", "--workspace", str(tmp_path / "ws"))
    assert (code, err) == (0, "")
    last = out.splitlines()[-1]
    assert last.startswith(f"workspace {tmp_path / 'ws'} (postgres): schema unknown: ")
    assert "pw-s3cret" not in out


def test_schema_state_is_pure() -> None:
    code = ["m001_a", "m002_b", "m003_c"]
    assert schema_state("x", {"m001_a", "m002_b", "m003_c"}, code).summary == "x schema 3 (current)"
    older = schema_state("x", {"m001_a"}, code)
    assert (older.applied, older.newer) == (1, 0)
    assert "the next open migrates it" in older.summary
    newer = schema_state("x", {*code, "m004_d", "m003_hnsw_384"}, code)
    assert newer.newer == 1 and "newer than this chatmem" in newer.summary


def test_version_imports_no_engine_and_no_event_loop(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from adapters.cli import main\n"
        "code = main(['--version', '--workspace', sys.argv[1]])\n"
        "heavy = ('openai', 'pydantic', 'textual', 'telegram', 'memory_core.engine', 'rjieba',"
        " 'asyncio', 'psycopg', 'numpy')\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy),"
        " file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # this checkout's code
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "W")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.stderr.strip() == "0 []", done.stderr
    assert done.stdout.startswith("chatmem ")
