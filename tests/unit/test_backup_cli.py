"""`chatmem backup` / `chatmem restore DIR` in-process: the manifest, the round trip, and
every refusal (one line, exit 2, nothing changed). The copy under live writers, on both
backends, is tests/reliability/test_backup_live.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from adapters.cli import main
from memory_core.backup.files import lock_of, skipped
from tests.support import clean_cli_env


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


Run = Any


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def call(*argv: str) -> tuple[int, str, str]:
        try:
            code: Any = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return int(code or 0), out, err

    return call


@pytest.fixture
def backed_up(run: Run, tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a memory and a note in two scopes, and its backup."""
    ws = tmp_path / "ws"
    assert run("init", "--workspace", str(ws))[0] == 0
    for scope in ("main", "peer:42"):
        assert (
            run("capture", f"likes tea in {scope}", "--scope", scope, "--workspace", str(ws))[0]
            == 0
        )
        assert run("append", f"walked in {scope}", "--scope", scope, "--workspace", str(ws))[0] == 0
    code, out, err = run("backup", str(tmp_path / "bk"), "--workspace", str(ws))
    assert code == 0, err
    assert out.startswith("backed up ")
    return ws, tmp_path / "bk"


@pytest.mark.parametrize(
    ("path", "lock"),
    [
        ("MEMORY.md", "main.memory"),
        ("MEMORY.md.bak", "main.memory"),
        ("memory/2026-03-01.md", "main.daily"),
        ("memory/2026-03-01-lunch-plans.md", "main.archive"),
        ("memory/summary/2026-02.md", "main.archive"),
        ("memory/scopes/peer_42/LONG_TERM.md", "peer_42.memory"),
        ("memory/scopes/peer_42/2026-03-01.md", "peer_42.daily"),
        ("memory/scopes/peer_42/summary/2026-02.md", "peer_42.archive"),
        (".chatmem/forgotten/peer_42.md", "peer_42.forgotten"),
        ("memory/scopes/peer_42/.scope", None),
        (".chatmem/workspace-id", None),
    ],
)
def test_each_file_is_copied_under_the_lock_its_writers_hold(path: str, lock: str | None) -> None:
    assert lock_of(path) == lock


@pytest.mark.parametrize(
    ("path", "left_out"),
    [
        (".chatmem/index.sqlite3", True),  # through the backup API instead
        (".chatmem/journal.sqlite3-wal", True),
        (".chatmem/locks/main.memory.lock", True),
        (".chatmem/owners/abc.lock", True),
        ("memory/.2026-03-01.md.x1.tmp", True),
        (".chatmem/workspace-id", False),
        (".chatmem/spool/audit.jsonl", False),
        ("MEMORY.md", False),
    ],
)
def test_locks_temporary_files_and_live_databases_are_not_copied_as_files(
    path: str, left_out: bool
) -> None:
    assert skipped(path) is left_out


def test_backup_has_a_manifest_and_restores_into_a_fresh_directory(
    run: Run, backed_up: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, bk = backed_up
    manifest = json.loads((bk / "manifest.json").read_text("utf-8"))
    assert manifest["backend"] == "sqlite" and manifest["format"] == "chatmem-backup"
    assert manifest["chatmem_version"] and manifest["created_at"]
    names = set(manifest["files"])
    assert {
        "files/MEMORY.md",
        "files/.chatmem/journal.sqlite3",
        "files/.chatmem/index.sqlite3",
    } <= names
    assert all(len(digest) == 64 for digest in manifest["files"].values())
    assert not any("/locks/" in name or "/owners/" in name for name in names)

    fresh = tmp_path / "fresh"
    code, out, err = run("restore", str(bk), "--workspace", str(fresh))
    assert code == 0, err
    assert "all memory files are valid" in out
    assert (fresh / "MEMORY.md").read_bytes() == (ws / "MEMORY.md").read_bytes()
    code, out, _ = run("search", "tea", "--scope", "peer:42", "--workspace", str(fresh))
    assert code == 0 and "likes tea in peer:42" in out


def test_a_damaged_backup_is_refused_by_the_name_of_the_file(
    run: Run, backed_up: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bk = backed_up
    damaged = bk / "files" / "memory" / "scopes" / "peer_42" / "LONG_TERM.md"
    damaged.write_text(damaged.read_text("utf-8") + "x", "utf-8")
    fresh = tmp_path / "fresh"
    code, out, err = run("restore", str(bk), "--workspace", str(fresh))
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "files/memory/scopes/peer_42/LONG_TERM.md does not match its checksum" in err
    assert not fresh.exists()


def test_a_missing_file_or_manifest_is_refused(
    run: Run, backed_up: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bk = backed_up
    (bk / "files" / ".chatmem" / "journal.sqlite3").unlink()
    code, _, err = run("restore", str(bk), "--workspace", str(tmp_path / "a"))
    assert code == 2 and "files/.chatmem/journal.sqlite3 is missing" in err
    (bk / "manifest.json").unlink()
    code, _, err = run("restore", str(bk), "--workspace", str(tmp_path / "b"))
    assert code == 2 and err.count("\n") == 1 and "holds no manifest.json" in err


def test_a_workspace_that_holds_anything_is_replaced_only_with_force(
    run: Run, backed_up: tuple[Path, Path]
) -> None:
    ws, bk = backed_up
    assert run("capture", "after the backup", "--workspace", str(ws))[0] == 0
    code, _, err = run("restore", str(bk), "--workspace", str(ws))
    assert code == 2 and err.count("\n") == 1 and "--force" in err
    assert "after the backup" in (ws / "MEMORY.md").read_text("utf-8")

    code, out, err = run("restore", str(bk), "--workspace", str(ws), "--force")
    assert code == 0, err
    assert "after the backup" not in (ws / "MEMORY.md").read_text("utf-8")
    aside = next(ws.parent.glob("ws.before-restore-*"))
    assert str(aside) in out
    assert "after the backup" in (aside / "MEMORY.md").read_text("utf-8")  # kept, not deleted


def test_restore_is_refused_while_a_process_uses_the_workspace(
    run: Run, backed_up: tuple[Path, Path]
) -> None:
    ws, bk = backed_up
    owners = ws / ".chatmem" / "owners"
    owners.mkdir(exist_ok=True)
    with FileLock(owners / "0123abcd.lock", timeout=0):
        code, _, err = run("restore", str(bk), "--workspace", str(ws), "--force")
    assert code == 2 and "stop the bots first" in err
    assert not list(ws.parent.glob("ws.before-restore-*"))


def test_backup_refuses_a_destination_that_holds_anything_or_lies_inside(
    run: Run, backed_up: tuple[Path, Path]
) -> None:
    ws, bk = backed_up
    code, _, err = run("backup", str(bk), "--workspace", str(ws))
    assert code == 2 and err.count("\n") == 1 and "not an empty directory" in err
    code, _, err = run("backup", str(ws / "inside"), "--workspace", str(ws))
    assert code == 2 and "inside the workspace" in err
    code, _, err = run("backup", str(bk / "x"), "--workspace", str(ws), "--scope", "peer:42")
    assert code == 2 and "does not take --scope" in err


def test_force_belongs_to_backups_and_an_id_still_restores_an_entry(
    run: Run, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    assert run("init", "--workspace", str(ws))[0] == 0
    code, out, err = run("capture", "a short-lived note", "--workspace", str(ws), "--json")
    entry_id = json.loads(out)["entry"]["id"]
    assert run("forget", entry_id, "--workspace", str(ws))[0] == 0
    code, _, err = run("restore", entry_id, "--workspace", str(ws), "--force")
    assert code == 2 and "--force is for restoring a backup" in err
    code, out, err = run("restore", entry_id, "--workspace", str(ws))
    assert code == 0, err
    assert out.startswith(f"restored [{entry_id}]")


def test_a_backup_that_fails_leaves_nothing_in_dest(
    run: Run, backed_up: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _ = backed_up
    from memory_core.backup import take

    def broken(*_: object) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(take, "copy_database", broken)
    dest = tmp_path / "empty"
    dest.mkdir()
    code, _, err = run("backup", str(dest), "--workspace", str(ws))
    assert code == 2 and err.count("\n") == 1 and "disk full" in err
    assert dest.is_dir() and list(dest.iterdir()) == []  # the directory it was given stays


@pytest.mark.storage
def test_a_database_in_use_is_replaced_only_with_force(
    run: Run, storage_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL an empty directory is not enough: the database must hold nothing
    either (here it holds the original workspace's rows) unless --force."""
    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    ws, fresh, bk = tmp_path / "ws", tmp_path / "fresh", tmp_path / "bk"
    assert run("init", "--workspace", str(ws))[0] == 0
    assert run("capture", "keeps bees on the roof", "--workspace", str(ws))[0] == 0
    assert run("backup", str(bk), "--workspace", str(ws))[0] == 0
    assert run("capture", "after the backup", "--workspace", str(ws))[0] == 0

    code, _, err = run("restore", str(bk), "--workspace", str(fresh))
    if storage_env:
        assert code == 2 and err.count("\n") == 1
        assert "the database: it belongs to workspace" in err and "--force" in err
        assert not fresh.exists()
        code, _, err = run("restore", str(bk), "--workspace", str(fresh), "--force")
    assert code == 0, err
    code, out, _ = run("search", "bees", "--workspace", str(fresh))
    assert code == 0 and "keeps bees on the roof" in out
    code, out, _ = run("search", "after the backup", "--workspace", str(fresh))
    assert "after the backup" not in out


@pytest.mark.storage
@pytest.mark.postgres_only
def test_restore_refuses_at_once_while_a_process_is_connected_to_the_database(
    run: Run, storage_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bot on another machine (another workspace directory) uses the same database: the
    restore is refused in one line before anything waits on its locks or replaces its
    rows; once it has gone, the same restore goes through."""
    import asyncio
    import threading
    import time

    from memory_core.storage.pg.database import PgDatabase

    for name, value in storage_env.items():
        monkeypatch.setenv(name, value)
    ws, fresh, bk = tmp_path / "ws", tmp_path / "fresh", tmp_path / "bk"
    assert run("init", "--workspace", str(ws))[0] == 0
    assert run("capture", "keeps bees on the roof", "--workspace", str(ws))[0] == 0
    assert run("backup", str(bk), "--workspace", str(ws))[0] == 0
    assert run("capture", "after the backup", "--workspace", str(ws))[0] == 0

    connected, leave = threading.Event(), threading.Event()

    async def bot() -> None:
        database = await PgDatabase.open(storage_env["CHATMEM_POSTGRES_DSN"])
        connected.set()
        await asyncio.to_thread(leave.wait)
        await database.close()

    serving = threading.Thread(target=asyncio.run, args=(bot(),))
    serving.start()
    try:
        assert connected.wait(30)
        started = time.monotonic()
        code, _, err = run("restore", str(bk), "--workspace", str(fresh), "--force")
        took = time.monotonic() - started
    finally:
        leave.set()
        serving.join(30)
    assert code == 2 and err.count("\n") == 1, err
    assert "connected to this PostgreSQL database and schema" in err
    assert "stop the bots first" in err and "connection" in err
    assert "Traceback" not in err and took < 10
    code, out, _ = run("search", "after the backup", "--workspace", str(ws))
    assert code == 0 and "after the backup" in out  # nothing was replaced

    code, _, err = run("restore", str(bk), "--workspace", str(fresh), "--force")
    assert code == 0, err
