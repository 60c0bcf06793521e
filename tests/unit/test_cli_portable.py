"""`chatmem export` and `chatmem import` on the command line: options, counts, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import clean_cli_env, run_cli


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_cli_env(tmp_path, monkeypatch)


def one_line(code: int, out: str, err: str) -> str:
    assert code == 2
    assert "Traceback" not in out + err
    lines = [x for x in err.splitlines() if not x.startswith("chatmem: using")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = tmp_path / "source"
    for argv in (
        ("init",),
        ("capture", "I like green tea"),
        ("capture", "My dog is called Rex", "--scope", "peer:bob"),
        ("capture", "Carol plays the cello", "--scope", "peer:carol"),
        ("append", "Met Alice at the cafe"),
    ):
        code, _, err = run_cli(capsys, *argv, "--workspace", str(ws))
        assert code == 0, err
    return ws


def test_export_with_scopes_then_import_twice(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "export", "--scope", "main", "--scope", "peer:bob", "--workspace", str(source)
    )
    assert code == 0, err
    records = [json.loads(x) for x in out.splitlines()]
    assert records[0]["kind"] == "header" and records[0]["scopes"] == ["main", "peer:bob"]
    assert {r["scope"] for r in records[1:]} == {"main", "peer:bob"}
    dump = tmp_path / "export.jsonl"
    dump.write_text(out, encoding="utf-8")

    target = tmp_path / "target"
    assert run_cli(capsys, "init", "--workspace", str(target))[0] == 0
    code, out, err = run_cli(capsys, "import", str(dump), "--workspace", str(target), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["form"] == "chatmem"
    assert report["added"] == {"audit": 2, "entry": 2, "note": 1}
    assert report["present"] == {}
    code, out, err = run_cli(capsys, "import", str(dump), "--workspace", str(target))
    assert code == 0, err
    assert "long-term entries: 0 added, 2 present" in out
    assert "daily notes: 0 added, 1 present" in out
    code, out, _ = run_cli(capsys, "scopes", "--workspace", str(target))
    assert "peer:bob" in out and "peer:carol" not in out


def test_export_to_a_file_and_as_markdown(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "all.jsonl"
    code, out, err = run_cli(
        capsys, "export", "--output", str(out_file), "--workspace", str(source), "--json"
    )
    assert code == 0, err
    assert json.loads(out)["records"] == len(out_file.read_text("utf-8").splitlines()) - 1

    tree = tmp_path / "tree"
    code, out, err = run_cli(
        capsys, "export", "--format", "markdown", "--output", str(tree), "--workspace", str(source)
    )
    assert code == 0, err
    assert "I like green tea" in (tree / "MEMORY.md").read_text("utf-8")
    bob = tree / "memory" / "scopes" / "peer_bob"
    assert "Rex" in (bob / "LONG_TERM.md").read_text("utf-8")
    assert (bob / ".scope").read_text("utf-8") == "peer:bob\n"
    assert "Met Alice" in "".join(p.read_text("utf-8") for p in (tree / "memory").glob("*.md"))

    line = one_line(
        *run_cli(
            capsys, "export", "--format", "markdown", "--output", str(tree),
            "--workspace", str(source),
        )
    )  # fmt: skip
    assert "is not an empty folder" in line
    line = one_line(*run_cli(capsys, "export", "--format", "markdown", "--workspace", str(source)))
    assert "needs --output" in line


def test_refusals_are_one_line(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"kind": "header", "format": "chatmem-export", "format_version": 1}\n{', "utf-8"
    )
    line = one_line(*run_cli(capsys, "import", str(bad), "--workspace", str(source)))
    assert line == "chatmem: error: line 2: not JSON (nothing was imported)"

    mem0 = tmp_path / "mem0.json"
    mem0.write_text(
        json.dumps(
            [{"user_id": "a", "memory": "x", "created_at": "2025-01-01"},
             {"user_id": "b", "memory": "y", "created_at": "2025-01-01"}]
        ),
        "utf-8",
    )  # fmt: skip
    line = one_line(
        *run_cli(capsys, "import", str(mem0), "--scope", "peer:a", "--workspace", str(source))
    )
    assert "holds 2 users" in line and "mix" in line
    line = one_line(*run_cli(capsys, "import", str(tmp_path / "none"), "--workspace", str(source)))
    assert "no such file or folder" in line
    line = one_line(
        *run_cli(capsys, "export", "--scope", "peer:nobody", "--workspace", str(source))
    )
    assert "no scope 'peer:nobody' to export" in line
