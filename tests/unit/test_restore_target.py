"""`chatmem restore DIR --force` finds out before it changes anything that it could not
put its files in place: on PostgreSQL the rows are replaced first, so a move aside that
failed afterwards left the database and the files of two different times."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.cli import main
from memory_core.backup.put_back import renames_out, writable_refusal
from tests.support import clean_cli_env


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


def test_a_workspace_that_cannot_be_moved_aside_or_written_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    reason = writable_refusal(ws, True, lambda _p, _m: True, lambda _p: False)
    assert reason is not None and "is a mount point" in reason
    assert writable_refusal(ws, True, lambda _p, _m: True, lambda _p: True) is None
    reason = writable_refusal(ws, True, lambda p, _m: p != tmp_path, lambda _p: True)
    assert reason is not None and f"{tmp_path} is not writable" in reason
    fresh = tmp_path / "a" / "b"
    reason = writable_refusal(fresh, False, lambda p, _m: p != tmp_path, lambda _p: True)
    assert reason is not None and f"{tmp_path} is not writable" in reason


def test_renames_out_leaves_nothing_behind(tmp_path: Path) -> None:
    ws = tmp_path / "parent" / "ws"
    ws.mkdir(parents=True)
    assert renames_out(ws)
    assert list(ws.iterdir()) == [] and list(ws.parent.iterdir()) == [ws]


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A workspace that is a bind mount of its own (a container's volume)."""
    ws, source = tmp_path / "ws", tmp_path / "volume"
    ws.mkdir()
    source.mkdir()
    done = subprocess.run(
        ["mount", "--bind", str(source), str(ws)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip() or done.returncode}")
    try:
        yield ws
    finally:
        subprocess.run(["umount", str(ws)], check=False)


def test_restore_force_into_a_mounted_workspace_is_refused_with_nothing_moved(
    mounted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(*argv: str) -> tuple[int, str]:
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    assert run("init", "--workspace", str(mounted))[0] == 0
    assert run("capture", "waters the ferns", "--workspace", str(mounted))[0] == 0
    assert run("backup", str(tmp_path / "bk"), "--workspace", str(mounted))[0] == 0
    code, err = run("restore", str(tmp_path / "bk"), "--workspace", str(mounted), "--force")
    assert code == 2 and err.count("\n") == 1, err
    assert "is a mount point" in err and "nothing was done" in err
    assert not list(tmp_path.glob("ws.before-restore-*"))
    assert "waters the ferns" in (mounted / "MEMORY.md").read_text("utf-8")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[]", "not a chatmem backup manifest"),
        ("null", "not a chatmem backup manifest"),
        ('{"format": "chatmem-backup", "format_version": 1}', "it lacks the field 'backend'"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_refused_in_words(
    text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's own words ("'list' object has no attribute 'get'", "'backend'") told an
    operator nothing."""
    backup = tmp_path / "bk"
    backup.mkdir()
    (backup / "manifest.json").write_text(text, encoding="utf-8")
    try:
        code = main(["restore", str(backup), "--workspace", str(tmp_path / "fresh")])
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.rstrip().endswith(said), err
