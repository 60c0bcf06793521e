"""The `chatmem` command line: mostly in-process through `main(argv)`, one real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from memory_core.config import env_bindings
from memory_core.longterm.memory_md_parser import parse_memory
from tests.support import FACT_DAY
from tests.unit.cli_support import (
    CHATMEM,
    PYTEST_PREF,
    Run,
    _clean_env,  # noqa: F401  (a fixture)
    cli_fixture,  # noqa: F401  (a fixture)
    days_from_now,
    no_ws_fixture,  # noqa: F401  (a fixture)
    one_line_error,
    ws_fixture,  # noqa: F401  (a fixture)
)

# --- the newcomer path, for real ---------------------------------------------------------


def test_newcomer_path_in_a_subprocess(tmp_path: Path) -> None:
    assert CHATMEM.exists(), "the chatmem console script is not installed"
    ws = tmp_path / "W"
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}

    def chatmem(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CHATMEM), *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )

    init = chatmem("init", "--workspace", str(ws))
    assert init.returncode == 0, init.stderr
    assert "workspace ready" in init.stdout
    assert (ws / "MEMORY.md").is_file()
    capture = chatmem(
        "capture", PYTEST_PREF, "--category", "preference", "--importance", "medium",
        "--workspace", str(ws),
    )  # fmt: skip
    assert capture.returncode == 0, capture.stderr
    assert "saved" in capture.stdout
    assert PYTEST_PREF in capture.stdout
    status = chatmem("status", "--workspace", str(ws))
    assert status.returncode == 0, status.stderr
    assert "1 active" in status.stdout
    assert PYTEST_PREF in status.stdout
    assert "preference" in status.stdout
    assert "0.60" in status.stdout
    assert status.stderr == ""
    # `python -m adapters.cli` is the same program.
    module = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "status", "--json", "--workspace", str(ws)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert module.returncode == 0, module.stderr
    assert json.loads(module.stdout)["active"][0]["content"] == PYTEST_PREF


# --- in-process --------------------------------------------------------------------------


def test_init_is_idempotent(cli: Run, ws: Path) -> None:
    code, out, _ = cli("init")
    assert code == 0
    assert str(ws) in out
    first = (ws / "MEMORY.md").read_text(encoding="utf-8")
    assert parse_memory(first).entries == []
    cli.capture("something to keep")
    code, _, _ = cli("init")
    assert code == 0
    assert "something to keep" in (ws / "MEMORY.md").read_text(encoding="utf-8")


def test_capture_says_when_it_updates_an_entry(cli: Run) -> None:
    grade_3 = "My son Leo is in grade 3 at Hillview primary school"
    grade_4 = grade_3.replace("3", "4")
    saved = cli.json("capture", grade_3)
    assert (saved["action"], saved["id"]) == ("saved", saved["entry"]["id"])
    code, out, _ = cli("capture", grade_4)
    assert code == 0
    updated = next(e for e in cli.json("status")["active"] if e["content"] == grade_4)
    assert out.startswith(f"updated [{saved['id']}] -> [{updated['id']}] fact 0.60: {grade_4}")
    contents = sorted(e["content"] for e in cli.json("status")["active"])
    assert contents == [grade_3, grade_4]
    again = cli.json("capture", grade_4)
    assert (again["action"], again["id"]) == ("reinforced", updated["id"])
    other = cli.json("capture", grade_3.replace("Leo", "Max"))
    assert other["action"] == "saved"


def test_capture_status_json(cli: Run) -> None:
    data = cli.json("capture", PYTEST_PREF, "--category", "preference", "--importance", "high")
    assert data["action"] == "saved"
    assert data["entry"]["score"] == 0.8
    assert data["entry"]["category"] == "preference"
    again = cli.json("capture", PYTEST_PREF, "--category", "preference")
    assert again["action"] == "reinforced"
    assert again["entry"]["hits"] == 1
    assert again["entry"]["score"] == pytest.approx(0.84)
    status = cli.json("status")
    assert status["scope"] == "main"
    assert status["path"] == "MEMORY.md"
    assert [e["content"] for e in status["active"]] == [PYTEST_PREF]
    assert status["archived"] == []
    assert status["quarantined"] == 0


def test_options_before_the_command_are_honoured(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    assert main(["--workspace", str(ws), "--scope", "peer:5", "init"]) == 0
    capsys.readouterr()
    code = main(["--workspace", str(ws), "--scope", "peer:5", "--json", "capture", "before"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["entry"]["content"] == "before"
    assert (ws / "memory" / "scopes" / "peer_5" / "LONG_TERM.md").is_file()
    assert not (ws / "MEMORY.md").exists()


def test_consolidate_forgets_after_400_days(cli: Run) -> None:
    entry_id = cli.capture(PYTEST_PREF, "--category", "preference", "--importance", "medium")
    # 0.6 * FACT_DAY**393 = 0.026 < 0.05
    code, out, _ = cli("consolidate", "--now", days_from_now(400), "--apply")
    assert code == 0
    assert "1 forgotten" in out
    assert entry_id in out
    assert "-> forgotten" in out
    assert "chatmem restore" in out
    assert cli.json("status")["active"] == []
    assert cli.json("status")["archived"] == []


def test_consolidate_archives_after_150_days_then_forgets(cli: Run) -> None:
    entry_id = cli.capture(PYTEST_PREF, "--category", "preference")
    data = cli.json("consolidate", "--now", days_from_now(150), "--apply")
    assert data["applied"] is True
    assert data["stats"] == {"decay": 1, "archive": 1}
    [archived] = [c for c in data["changes"] if c["kind"] == "archive"]
    assert archived["id"] == entry_id
    assert archived["new_score"] == pytest.approx(0.6 * FACT_DAY**143)  # 0.191
    status = cli.json("status")
    assert status["active"] == []
    assert [e["id"] for e in status["archived"]] == [entry_id]
    data = cli.json("consolidate", "--now", days_from_now(400), "--apply")
    assert data["stats"] == {"decay": 1, "forget": 1}
    [forgotten] = [c for c in data["changes"] if c["kind"] == "forget"]
    assert forgotten["content"] == PYTEST_PREF
    assert forgotten["new_score"] is None


def test_consolidate_without_now_changes_nothing_fresh(cli: Run) -> None:
    cli.capture("fresh")
    code, out, _ = cli("consolidate")
    assert code == 0
    assert "no changes" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["capture", "x", "--importance", "huge"],
        ["capture", "x", "--category", "not a category!"],
        ["capture", "x", "--category", "hobby"],
        ["search", "x", "--limit", "0"],
        ["search", "x", "--limit", "-3"],
        ["status", "--limit", "0"],
        ["get", "MEMORY.md", "--lines", "0"],
        ["consolidate", "--dry-run", "--apply"],
        ["frobnicate"],
        ["consolidate", "--now", "next tuesday"],
        ["capture", "x", "--expires", "soon"],
        ["status", "--limit", "many"],
        ["capture"],
        ["pin"],
        ["status", "--no-such-flag"],
    ],
)
def test_bad_arguments_print_one_line_and_exit_2(cli: Run, argv: list[str]) -> None:
    code, out, err = cli(*argv)
    one_line_error(code, out, err)
    assert "--help" in err


def test_bad_argument_message_names_the_problem(cli: Run) -> None:
    _, _, err = cli("capture", "x", "--importance", "huge")
    assert "importance must be high, medium or low" in err
    assert "chatmem capture --help" in err
    _, _, err = cli("frobnicate")
    assert "frobnicate" in err
    assert "chatmem chatmem" not in err
    _, _, err = cli("consolidate", "--now", "next tuesday")
    assert "next tuesday" in err


def test_no_command_shows_help(cli: Run) -> None:
    code, out, _ = cli()
    assert code == 2
    assert "COMMAND" in out


@pytest.mark.parametrize("action", ["pin", "unpin", "archive", "restore", "forget"])
def test_unknown_entry_id_is_one_line_exit_2(cli: Run, action: str) -> None:
    cli.capture("something")
    code, out, err = cli(action, "deadbeef")
    one_line_error(code, out, err)
    assert "deadbeef" in err


def test_user_errors_from_config_and_scope_are_one_line(cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 'red'\n", encoding="utf-8")
    code, out, err = cli("status", "--config", str(bad))
    one_line_error(code, out, err)
    assert "colour" in err
    assert str(bad) in err
    code, out, err = cli("status", "--config", str(tmp_path / "missing.toml"))
    one_line_error(code, out, err)
    code, out, err = cli("status", "--scope", "")
    one_line_error(code, out, err)
    code, out, err = cli("capture", "   ")
    one_line_error(code, out, err)


def test_validate_exit_codes(cli: Run, ws: Path) -> None:
    cli.capture(PYTEST_PREF)
    code, out, _ = cli("validate")
    assert code == 0
    assert "valid" in out
    assert cli.json("validate") == {"ok": True, "problems": [], "lookalike_scopes": []}

    path = ws / "MEMORY.md"
    broken = "### [bad1] fact | lots | 2026-01-01 | 1\nedited by hand"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + broken + "\n", encoding="utf-8")
    code, out, _ = cli("validate")
    assert code == 1
    assert "1 quarantined block" in out
    assert "MEMORY.md:" in out
    assert "### [bad1]" in out
    code, out, _ = cli("validate", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    [problem] = data["problems"]
    assert problem["text"] == broken
    assert problem["path"] == "MEMORY.md"
    assert "score" in problem["reason"]
    # status warns too, and a later write keeps the block.
    code, out, _ = cli("status")
    assert "quarantined" in out
    cli.capture("another memory")
    assert broken in path.read_text(encoding="utf-8")

    path.write_text(path.read_text(encoding="utf-8").replace("| lots |", "| 0.50 |"))
    code, _, _ = cli("validate")
    assert code == 0


def test_entry_actions(cli: Run, ws: Path) -> None:
    entry_id = cli.capture(PYTEST_PREF)
    other_id = cli.capture("项目决定使用 FastAPI 而非 Flask", "--category", "decision")

    def stored() -> dict[str, Any]:
        parsed = parse_memory((ws / "MEMORY.md").read_text(encoding="utf-8"))
        return {e.id: e for e in parsed.entries}

    data = cli.json("pin", entry_id)
    assert data == {"action": "pin", "already": False, "entry": data["entry"]}
    assert data["entry"]["pinned"] is True
    assert stored()[entry_id].pinned
    code, out, _ = cli("status")
    assert "[pinned]" in out

    assert cli.json("unpin", entry_id)["entry"]["pinned"] is False
    assert not stored()[entry_id].pinned

    assert cli.json("archive", entry_id)["entry"]["archived"] == "manual"
    status = cli.json("status")
    assert [e["id"] for e in status["archived"]] == [entry_id]
    assert [e["id"] for e in status["active"]] == [other_id]

    code, out, _ = cli("restore", entry_id)
    assert code == 0
    assert out.startswith(f"restored [{entry_id}]")
    assert stored()[entry_id].archived is None

    code, out, _ = cli("forget", other_id)
    assert code == 0
    assert out.startswith(f"forgot [{other_id}]")
    assert f"chatmem restore {other_id}" in out
    assert list(stored()) == [entry_id]

    stats = cli.json("stats")
    assert stats["audit"] == {
        "add": 2,
        "pin": 1,
        "unpin": 1,
        "archive": 1,
        "restore": 1,
        "forget": 1,
    }
    [main_row] = [row for row in stats["scopes"] if row["scope"] == "main"]
    assert main_row["active"] == 1
    assert main_row["categories"] == {"fact": 1}
    code, out, _ = cli("stats")
    assert code == 0
    assert "audit: add 2" in out


def test_scopes_and_scoped_commands(cli: Run, ws: Path) -> None:
    cli.capture("main memory")
    cli.capture("peer memory", "--scope", "peer:42")
    cli.capture("group memory", "--scope", "group:telegram:-100")
    rows = cli.json("scopes")
    assert [r["scope"] for r in rows] == ["main", "group:telegram:-100", "peer:42"]
    assert {r["scope"]: r["path"] for r in rows}["peer:42"] == (
        "memory/scopes/peer_42/LONG_TERM.md"
    )
    assert all(r["active"] == 1 for r in rows)
    code, out, _ = cli("scopes")
    assert code == 0
    assert "peer:42" in out
    status = cli.json("status", "--scope", "peer:42")
    assert [e["content"] for e in status["active"]] == ["peer memory"]
    assert [e["content"] for e in cli.json("status")["active"]] == ["main memory"]
