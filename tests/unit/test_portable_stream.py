"""`chatmem export` / `import`, the second pass (memory_core/portable/): texts with line
separators, stored scope keys today's parse refuses, archive files and summaries that
meet other text, forgotten entries past their days, and the file read twice (a scope at
a time the second time, from a file that must not change in between)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core.base.clock import ManualClock
from memory_core.base.records import RecordedMessage
from memory_core.base.scope import ScopeKey
from memory_core.engine import MemoryCore
from memory_core.portable.records import ExportRefused, ImportRefused
from memory_core.portable.stream import scan, scope_records_of
from tests.unit.test_portable import other_config, write_lines

pytestmark = pytest.mark.storage

MAIN = ScopeKey("main")
BOB = ScopeKey.parse("peer:bob")
ODD = ScopeKey("peer:a\x1bb")  # stored by an older chatmem; parse refuses it now
ODD_TODAY = ScopeKey.parse("peer:ab")


async def export_to(core: MemoryCore, path: Path, *scopes: ScopeKey) -> Path:
    return write_lines(path, [t async for t in core.export_lines(scopes)])


def leftovers(folder: Path) -> list[str]:
    """Temp files an export left beside its target."""
    return [p.name for p in folder.iterdir() if p.suffix == ".tmp"]


def export_file(path: Path, *records: dict[str, Any], version: int = 2) -> Path:
    head = {"kind": "header", "format": "chatmem-export", "format_version": version}
    path.write_text("\n".join(json.dumps(r) for r in (head, *records)) + "\n", "utf-8")
    return path


async def test_texts_with_line_separators_survive_the_round_trip(
    core: MemoryCore,
    clock: ManualClock,
    tmp_path: Path,
    storage_backend: str,
    request: pytest.FixtureRequest,
) -> None:
    """JSON leaves U+2028 and U+0085 as they are; a reader splitting with
    `str.splitlines` cut such a record in two and refused the whole file."""
    said = "first\u2028second\x85third"
    await core.record_session(BOB, "s1", clock(), [RecordedMessage("user", "bob", said, clock())])
    await core.memories.capture(MAIN, "Paragraph\u2029break kept")
    await core.memories.flush()
    exported = await export_to(core, tmp_path / "x.jsonl")
    with other_config(tmp_path, "copy", storage_backend, request) as config:
        async with MemoryCore.open(config, clock=clock) as copy:
            _, report = await copy.import_from(exported)
            assert report.added["message"] == 1
            [message] = await copy.history.session_messages("s1")
            assert message.content == said
            [entry] = await copy.memories.entries(MAIN)
            assert entry.content == "Paragraph\u2029break kept"


async def test_a_stored_key_parse_refuses_is_exported_under_its_key_today(
    core: MemoryCore,
    clock: ManualClock,
    tmp_path: Path,
    storage_backend: str,
    request: pytest.FixtureRequest,
) -> None:
    await core.memories.capture(ODD, "The odd scope's fact")
    await core.memories.flush()
    assert ODD in await core.known_scopes()
    exported = await export_to(core, tmp_path / "odd.jsonl")
    lines = [json.loads(x) for x in exported.read_text("utf-8").splitlines()]
    assert lines[0]["renamed"] == {"peer:ab": "peer:a\\x1bb"}
    assert {x["scope"] for x in lines[1:]} == {"peer:ab"}
    with other_config(tmp_path, "copy", storage_backend, request) as config:
        async with MemoryCore.open(config, clock=clock) as copy:
            _, report = await copy.import_from(exported)
            assert report.scopes == ["peer:ab"]
            [entry] = await copy.memories.entries(ODD_TODAY)
            assert entry.content == "The odd scope's fact"

    await core.memories.capture(ODD_TODAY, "Another person typed today")
    await core.memories.flush()
    out = tmp_path / "both.jsonl"
    with pytest.raises(ExportRefused, match=r"'peer:a\\x1bb' and 'peer:ab' are one key now"):
        await core.export_file([], out)
    assert not out.exists() and not leftovers(tmp_path)
    assert (await core.export_file([ODD_TODAY], out)) > 0  # the others still export


async def test_a_key_no_path_reaches_refuses_the_export_naming_it(
    core: MemoryCore, tmp_path: Path
) -> None:
    await core.memories.capture(ScopeKey("peer:\u200b"), "Invisible person")
    await core.memories.flush()
    with pytest.raises(ExportRefused, match=r"scope 'peer:\\u200b' has a key no import"):
        await core.export_file([], tmp_path / "x.jsonl")


async def test_archive_files_and_summaries_meet_other_text_without_loss(
    core: MemoryCore, tmp_path: Path
) -> None:
    folder = core.workspace.memory_dir(MAIN)
    (folder / "summary").mkdir(parents=True)
    (folder / "2026-01-02-quiz.md").write_text("# held raw text\n", "utf-8")
    (folder / "summary" / "2026-01.md").write_text("## Month 2026-01 — held\n\nA\n", "utf-8")
    source = export_file(
        tmp_path / "files.jsonl",
        {"kind": "archive", "scope": "main", "name": "2026-01-02-quiz.md", "text": "# other\n"},
        {"kind": "summary", "scope": "main", "name": "2026-01.md",
         "text": "## Month 2026-01 — held\n\nA\n\n## Month 2026-01 — more\n\nB\n"},
        {"kind": "summary", "scope": "main", "name": "2026-01-05.md", "text": "## Day\n\nC\n"},
    )  # fmt: skip
    _, report = await core.import_from(source)
    assert dict(report.added) == {"archive": 1, "summary": 2}
    assert (folder / "2026-01-02-quiz.md").read_text("utf-8") == "# held raw text\n"
    [moved] = [p for p in folder.iterdir() if p.name.startswith("2026-01-02-quiz-")]
    assert moved.read_text("utf-8") == "# other\n"
    assert (folder / "summary" / "2026-01.md").read_text("utf-8") == (
        "## Month 2026-01 — held\n\nA\n\n## Month 2026-01 — more\n\nB\n"
    )
    hits = await core.finder.search(MAIN, "Month")
    assert any(h.path.endswith("summary/2026-01.md") for h in hits)
    _, again = await core.import_from(source)
    assert sum(again.added.values()) == 0
    assert dict(again.present) == {"archive": 1, "summary": 2}


@pytest.mark.parametrize("name", ["../x.md", "2026-01-02-a/b.md", "2026-13-02-a.md", ".md"])
async def test_a_file_record_names_no_path(core: MemoryCore, tmp_path: Path, name: str) -> None:
    source = export_file(
        tmp_path / "bad.jsonl", {"kind": "archive", "scope": "main", "name": name, "text": "x"}
    )
    with pytest.raises(ImportRefused, match="line 2: bad archive record"):
        await core.import_from(source)


async def test_a_forgotten_entry_past_its_days_is_counted_not_kept(
    core: MemoryCore, clock: ManualClock, tmp_path: Path
) -> None:
    entry, _ = await core.memories.capture(MAIN, "Gate code 1234")
    await core.memories.flush()
    await core.memories.forget(MAIN, entry.id)
    exported = await export_to(core, tmp_path / "f.jsonl")
    _, report = await core.import_from(exported)
    assert report.present["forgotten"] == 1 and sum(report.added.values()) == 0
    clock.advance(timedelta(days=core.config.long_term.forgotten_keep_days + 1))
    _, late = await core.import_from(exported)
    assert late.expired == 1 and "forgotten" not in late.added
    assert await core.memories.views.restorable(MAIN, clock()) == []


def test_the_second_pass_reads_one_scope_and_refuses_a_changed_file(tmp_path: Path) -> None:
    records = [
        {"kind": "note", "scope": scope, "date": "2026-01-02", "time": "", "text": f"{scope} {n}"}
        for scope in ("main", "peer:a", "peer:b")
        for n in range(3)
    ]
    source = export_file(tmp_path / "n.jsonl", *records, records[0])
    plan = scan(source, [])
    assert [len(plan.runs[ScopeKey(k)]) for k in ("main", "peer:a", "peer:b")] == [2, 1, 1]
    texts = [r.data["text"] for r in scope_records_of(plan, ScopeKey("peer:a"))]
    assert texts == ["peer:a 0", "peer:a 1", "peer:a 2"]
    assert len(scope_records_of(plan, MAIN)) == 4
    only = scan(source, [ScopeKey("peer:b")])
    assert list(only.runs) == [ScopeKey("peer:b")]
    with source.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(records[1]) + "\n")
    with pytest.raises(ImportRefused, match="changed while it was imported"):
        scope_records_of(plan, MAIN)
