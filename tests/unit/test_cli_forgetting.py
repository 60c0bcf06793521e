"""The `chatmem` command line: consolidation previews, forgetting that can be undone and
purging that cannot, and only `init` (and the bots, and the demo) making a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.cli import main
from tests.support import FACT_DAY
from tests.unit.cli_support import (
    PYTEST_PREF,
    Run,
    _clean_env,  # noqa: F401  (a fixture)
    cli_fixture,  # noqa: F401  (a fixture)
    days_from_now,
    no_ws_fixture,  # noqa: F401  (a fixture)
    one_line_error,
    ws_fixture,  # noqa: F401  (a fixture)
)

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
