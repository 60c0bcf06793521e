"""The file half of `scopes --merge` (memory_core/scope_merge/files.py): append-only
files are joined, others moved (renamed beside a namesake), the rest set aside."""

from __future__ import annotations

from pathlib import Path

from memory_core.scope_merge.files import merge_directory, set_aside


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_files_are_joined_moved_or_left_for_the_set_aside_copy(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    write(source / "2026-03-01.md", "- 09:00:00 from a\n")
    write(target / "2026-03-01.md", "- 08:00:00 from b")  # no final newline
    write(source / "2026-03-01.jsonl", '{"type":"input"}\n')
    write(source / "summary/2026-03.md", "## a's month\n")
    write(target / "summary/2026-03.md", "## b's month\n")
    write(source / "2026-03-01-kayak.md", "a's archive\n")
    write(target / "2026-03-01-kayak.md", "b's archive\n")
    for kept in (".scope", "LONG_TERM.md", "LONG_TERM.md.bak", "SNAPSHOT.md"):
        write(source / kept, f"a's {kept}\n")
    write(source / ".LONG_TERM.md.x.tmp", "torn\n")

    report = merge_directory(source, target, root=tmp_path)

    note = (target / "2026-03-01.md").read_text(encoding="utf-8")
    assert note == "- 08:00:00 from b\n- 09:00:00 from a\n"
    assert (target / "summary/2026-03.md").read_text(encoding="utf-8") == (
        "## b's month\n## a's month\n"
    )
    assert (target / "2026-03-01.jsonl").read_text(encoding="utf-8") == '{"type":"input"}\n'
    assert (target / "2026-03-01-kayak.md").read_text(encoding="utf-8") == "b's archive\n"
    assert (target / "2026-03-01-kayak.merged-1.md").read_text(encoding="utf-8") == (
        "a's archive\n"
    )
    assert sorted(report.appended) == ["2026-03-01.md", "summary/2026-03.md"]
    assert report.moved == ["2026-03-01.jsonl"]
    assert report.renamed == ["2026-03-01-kayak.merged-1.md"]
    assert not (target / "LONG_TERM.md").exists() and not (target / ".scope").exists()
    left = sorted(p.name for p in source.iterdir() if p.is_file())
    assert left == [
        ".LONG_TERM.md.x.tmp",
        ".scope",
        "LONG_TERM.md",
        "LONG_TERM.md.bak",
        "SNAPSHOT.md",
    ]

    aside = set_aside(source, tmp_path / "merged", "a", root=tmp_path)
    assert aside == tmp_path / "merged" / "a" and not source.exists()
    assert (aside / "LONG_TERM.md").read_text(encoding="utf-8") == "a's LONG_TERM.md\n"
    write(source / "x.md", "again")
    assert set_aside(source, tmp_path / "merged", "a", root=tmp_path) == tmp_path / "merged" / "a.2"
    assert set_aside(tmp_path / "gone", tmp_path / "merged", "gone", root=tmp_path) is None
