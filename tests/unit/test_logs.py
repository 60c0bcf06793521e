"""Operator logs: one format for every command, JSON lines on request, secrets cut out,
scopes named by their keys."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli.logs import StderrHandler, command_level, setup_logging
from adapters.settings import load_app_config
from memory_core.base.scope import ScopeKey
from memory_core.base.scope_names import scope_name
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from tests.support import clean_cli_env, index_of, run_cli

TOKEN = "123456:log-secret-bot-token"
TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: .+$"
)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """What a command sets on the root logger does not outlive its test."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chatmem.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_command_logs_in_the_one_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A one-shot command (here `stats`) logs as the bots do: before, only the bots set up
    logging, and the rest wrote Python's bare `message` lines."""
    clean_cli_env(tmp_path, monkeypatch)
    code, _, _ = run_cli(capsys, "init", "--workspace", str(tmp_path / "ws"))
    assert code == 0
    code, _, _ = run_cli(capsys, "stats", "--workspace", str(tmp_path / "ws"))
    assert code == 0
    logging.getLogger("memory_core.somewhere").warning("an operator should see this")
    logging.getLogger("memory_core.somewhere").info("but not this")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "operator" in line or "not this" in line]
    assert len(lines) == 1, err
    assert TEXT_LINE.match(lines[0]), lines[0]
    assert lines[0].endswith("WARNING memory_core.somewhere: an operator should see this")


def test_json_lines_parse_and_hide_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, '[logging]\nformat = "json"\n')
    config = load_app_config(path, env={"TELEGRAM_BOT_TOKEN": TOKEN})
    setup_logging(config, "telegram")
    log = logging.getLogger("adapters.telegram_bot")
    log.info("calling https://api.telegram.org/bot%s/getMe", TOKEN)
    try:
        raise RuntimeError(f"token {TOKEN} refused")
    except RuntimeError:
        log.exception("request failed")
    err = capsys.readouterr().err
    assert TOKEN not in err
    records = [json.loads(line) for line in err.splitlines()]
    assert [r["level"] for r in records] == ["INFO", "ERROR"]
    assert {tuple(sorted(r)) for r in records} >= {("level", "logger", "message", "time")}
    assert records[0]["logger"] == "adapters.telegram_bot"
    assert records[0]["message"] == "calling https://api.telegram.org/bot<secret>/getMe"
    assert "RuntimeError: token <secret> refused" in records[1]["traceback"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", records[0]["time"])


def test_a_second_setup_replaces_the_handler(tmp_path: Path) -> None:
    config = load_config(None, env={})
    setup_logging(config, "status")
    setup_logging(config, "telegram")
    ours = [h for h in logging.getLogger().handlers if isinstance(h, StderrHandler)]
    assert len(ours) == 1


def test_levels_unattended_at_the_setting_the_rest_warnings() -> None:
    default = load_config(None, env={})
    debug = load_config(None, env={"CHATMEM_LOG_LEVEL": "debug"})
    assert command_level(default, "telegram") == logging.INFO
    assert command_level(default, "status") == logging.WARNING
    assert command_level(default, "chat") == logging.WARNING
    assert command_level(debug, "status") == logging.DEBUG


def test_a_mistyped_level_is_refused_in_one_line(tmp_path: Path) -> None:
    from memory_core.base.errors import ConfigError

    with pytest.raises(ConfigError, match="'log_level': must be one of DEBUG"):
        load_config(config_file(tmp_path, 'log_level = "verbose"\n'), env={})


async def test_log_lines_name_scopes_by_their_keys(core: MemoryCore) -> None:
    """The vectors' lines carry only the index's scope id: it is shown as the key."""
    scope = ScopeKey.parse("telegram:peer:42")
    sid = await index_of(core).scope_id(scope)
    assert sid is not None
    assert scope_name(sid) == "telegram:peer:42"
    assert scope_name(10**9) == f"#{10**9}"


def test_with_json_logs_every_stderr_line_of_a_bot_is_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator notices of a serving command (which workspace, that it is created,
    where metrics are served) were plain lines among the JSON records: a collector
    parsing stderr line by line stopped at the first one."""
    import io

    clean_cli_env(tmp_path, monkeypatch)
    path = config_file(tmp_path, '[logging]\nformat = "json"\n[metrics]\nlisten = "127.0.0.1:0"\n')
    monkeypatch.setenv("CHATMEM_WORKSPACE", str(tmp_path / "new-ws"))
    monkeypatch.setattr("sys.stdin", io.StringIO("hello there\n"))
    code, _, err = run_cli(capsys, "chat", "--config", str(path))
    assert code == 0, err
    records = [json.loads(line) for line in err.splitlines()]
    said = [r["message"] for r in records if r["logger"] == "chatmem"]
    assert any(m.startswith(f"using workspace {tmp_path / 'new-ws'}") for m in said), said
    assert any(m.startswith("creating workspace at") for m in said), said
    assert any(m.startswith("metrics on http://127.0.0.1:") for m in said), said
