"""MEMORY.md parse/render (docs/formats.md, "MEMORY.md").

| scenario                    | tests here                                                   |
|-----------------------------|--------------------------------------------------------------|
| parse the normal format     | test_parse_seed_example_fields                               |
| empty / missing file        | test_empty_text_*, test_missing_file_*                       |
| one broken block            | test_broken_block_is_quarantined_verbatim (not skipped:      |
|                             | we keep it verbatim instead)                                 |
| save -> load round trip     | test_round_trip_* (hypothesis)                               |
| .bak before write           | tests/unit/test_store_io.py                                  |
| Active / Archived partition | test_active_archived_partition                               |
| sorting                     | test_sections_sorted_by_score_desc                           |
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.base.entries import ArchiveReason, MemoryEntry
from memory_core.longterm.memory_md import ARCHIVED, QUARANTINED, QuarantinedBlock
from memory_core.longterm.memory_md_parser import ParsedMemory, parse_memory
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.longterm.store import read_memory_file
from tests.unit.memory_md_support import LATER, NOW, SEED_EXAMPLE, by_id, headers, without_stamp


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def make_entry(
    entry_id: str, score: float, content: str | None = None, **kw: object
) -> MemoryEntry:
    when = kw.pop("when", NOW)
    assert isinstance(when, datetime)
    return MemoryEntry(
        id=entry_id,
        content=content if content is not None else f"memory {entry_id}",
        category=str(kw.pop("category", "fact")),
        score=score,
        created_at=when,
        last_activated=when,
        scored_at=when,
        **kw,  # type: ignore[arg-type]
    )


def section_of(text: str, entry_id: str) -> str:
    """Name of the `## ` section a rendered entry sits in."""
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        elif line.startswith(f"### [{entry_id}]"):
            return current
    raise AssertionError(f"{entry_id} not rendered")


# --- parsing the format -----------------------------------------------------------------


def test_parse_seed_example_fields() -> None:
    parsed = parse_memory(SEED_EXAMPLE)
    assert parsed.quarantined == []
    assert [e.id for e in parsed.entries] == ["a1b2c3", "d4e5f6", "g7h8i9", "x1y2z3"]
    first = parsed.entries[0]
    assert first.content == "用户喜欢简洁的代码风格，不喜欢过多注释"
    assert first.category == "preference"
    assert first.score == 0.92
    assert first.last_activated == day("2026-02-20")
    assert first.hits == 12
    assert not first.pinned
    assert first.archived is None
    second = parsed.entries[1]
    assert (second.category, second.score, second.hits) == ("fact", 0.88, 8)
    assert second.last_activated == day("2026-02-19")
    assert second.content == "用户的主要开发语言是 Python，常用 FastAPI 框架"
    third = parsed.entries[2]
    assert (third.category, third.score, third.hits) == ("workflow", 0.85, 15)
    archived = parsed.entries[3]
    assert (archived.category, archived.score, archived.hits) == ("fact", 0.18, 2)
    assert archived.last_activated == day("2026-01-10")
    # Below the archive line by score alone: no manual flag.
    assert archived.archived is None
    # Without a metadata line the header's date stands in for the missing times.
    assert archived.created_at == archived.scored_at == archived.last_activated


def test_empty_text_gives_no_entries() -> None:
    for text in ("", "\n\n", "# Agent Memory\n", "# Agent Memory\n\n## Active Memories\n"):
        parsed = parse_memory(text)
        assert parsed.entries == []
        assert parsed.quarantined == []


def test_missing_file_gives_no_entries(tmp_path: Path) -> None:
    snapshot = read_memory_file(tmp_path / "MEMORY.md", 0.2, root=tmp_path)
    assert snapshot.parsed.entries == []
    assert snapshot.parsed.quarantined == []
    assert snapshot.stamp is None


def test_empty_file_gives_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("", encoding="utf-8")
    snapshot = read_memory_file(path, 0.2, root=tmp_path)
    assert snapshot.parsed.entries == []
    assert snapshot.parsed.quarantined == []


BROKEN_SCORE = (
    "### [d4e5f6] fact | high | 2026-02-19 | 8\n用户的主要开发语言是 Python，常用 FastAPI 框架"
)


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        (BROKEN_SCORE, "score"),
        ("### [d4e5f6] fact | 0.88 | yesterday | 8\nsome text", "Invalid isoformat"),
        ("### [d4e5f6] fact | 0.88 | 2026-02-19 | many\nsome text", "hits"),
        ("### [d4e5f6] fact | 1.50 | 2026-02-19 | 8\nsome text", "outside [0, 1]"),
        ("### [d4e5f6] fact | 0.88 | 2026-02-19\nsome text", "header"),
        ("### [bad id!] fact | 0.88 | 2026-02-19 | 8\nsome text", "bad id"),
        ("### [d4e5f6] fact | 0.88 | 2026-02-19 | 8", "no content"),
        (
            '### [d4e5f6] fact | 0.88 | 2026-02-19 | 8\n<!-- chatmem: {"score": 0.88 -->\ntext',
            "",
        ),
        ("### [d4e5f6] fact | 0.88 | 2026-02-19 | 8\n<!-- chatmem: {bad} -->\ntext", "metadata"),
    ],
)
def test_broken_block_is_quarantined_verbatim(broken: str, reason: str) -> None:
    text = SEED_EXAMPLE.replace(
        "### [d4e5f6] fact | 0.88 | 2026-02-19 | 8\n用户的主要开发语言是 Python，常用 FastAPI 框架",
        broken,
    )
    parsed = parse_memory(text)
    # The others load.
    assert [e.id for e in parsed.entries] == ["a1b2c3", "g7h8i9", "x1y2z3"]
    assert len(parsed.quarantined) == 1
    block = parsed.quarantined[0]
    assert block.text == broken
    assert block.text in text
    assert block.reason
    assert reason in block.reason
    assert block.line == text.splitlines().index(broken.splitlines()[0]) + 1


def test_duplicate_ids_are_quarantined() -> None:
    dup = "### [a1b2c3] fact | 0.50 | 2026-02-01 | 1\nsame id again"
    text = SEED_EXAMPLE.rstrip("\n") + "\n\n" + dup + "\n"
    parsed = parse_memory(text)
    assert [e.id for e in parsed.entries] == ["a1b2c3", "d4e5f6", "g7h8i9", "x1y2z3"]
    assert by_id(parsed)["a1b2c3"].content == "用户喜欢简洁的代码风格，不喜欢过多注释"
    assert [q.text for q in parsed.quarantined] == [dup]
    assert "duplicate id a1b2c3" in parsed.quarantined[0].reason
    # And it stays so across a save.
    again = parse_memory(render_memory(parsed.entries, parsed.quarantined, now=NOW))
    assert again.entries == parsed.entries
    assert again.quarantined == parsed.quarantined


def test_quarantine_round_trip_and_fix() -> None:
    text = SEED_EXAMPLE.replace(
        "### [d4e5f6] fact | 0.88 | 2026-02-19 | 8\n用户的主要开发语言是 Python，常用 FastAPI 框架",
        BROKEN_SCORE,
    )
    parsed = parse_memory(text)
    saved = render_memory(parsed.entries, parsed.quarantined, now=NOW)
    assert f"## {QUARANTINED}" in saved
    assert BROKEN_SCORE in saved
    reparsed = parse_memory(saved)
    assert reparsed.entries == parsed.entries
    assert [q.text for q in reparsed.quarantined] == [BROKEN_SCORE]
    assert "score" in reparsed.quarantined[0].reason
    # Saving again keeps it (and the file) as it was.
    assert without_stamp(render_memory(reparsed.entries, reparsed.quarantined, now=LATER)) == (
        without_stamp(saved)
    )

    # A person fixes the block where it sits: it becomes an entry again.
    fixed = saved.replace("| high |", "| 0.88 |")
    healed = parse_memory(fixed)
    assert healed.quarantined == []
    entry = by_id(healed)["d4e5f6"]
    assert entry.score == 0.88
    assert entry.hits == 8
    assert entry.content == "用户的主要开发语言是 Python，常用 FastAPI 框架"
    rendered = render_memory(healed.entries, healed.quarantined, now=NOW)
    assert f"## {QUARANTINED}" not in rendered
    assert section_of(rendered, "d4e5f6") == "Active Memories"


def test_fixed_block_in_quarantine_keeps_its_archive_flag() -> None:
    entry = make_entry("e1", 0.7, archived=ArchiveReason.MANUAL)
    saved = render_memory([entry], now=NOW)
    broken = saved.replace("| 0.70 |", "| seventy |")
    parsed = parse_memory(broken)
    assert parsed.entries == []
    assert len(parsed.quarantined) == 1
    quarantined_file = render_memory(parsed.entries, parsed.quarantined, now=NOW)
    healed = parse_memory(quarantined_file.replace("| seventy |", "| 0.70 |"))
    assert healed.entries == [entry]


# --- sections and order ------------------------------------------------------------------


def test_active_archived_partition() -> None:
    entries = [
        make_entry("edge", 0.2),
        make_entry("below", 0.19999),
        make_entry("high", 0.9),
        make_entry("low", 0.06),
        make_entry("pinlow", 0.1, pinned=True),
        make_entry("manual", 0.7, archived=ArchiveReason.MANUAL),
        make_entry("expired", 0.19, category="todo", archived=ArchiveReason.EXPIRED),
    ]
    text = render_memory(entries, now=NOW)
    assert section_of(text, "edge") == "Active Memories"
    assert section_of(text, "high") == "Active Memories"
    assert section_of(text, "pinlow") == "Active Memories"
    for archived in ("below", "low", "manual", "expired"):
        assert section_of(text, archived) == ARCHIVED
    parsed = by_id(parse_memory(text))
    assert parsed["manual"].archived is ArchiveReason.MANUAL
    assert parsed["expired"].archived is ArchiveReason.EXPIRED
    assert parsed["below"].archived is None
    assert "<!-- Total entries: 7 -->" in text


def test_sections_sorted_by_score_desc() -> None:
    entries = [
        make_entry("s3", 0.3),
        make_entry("s9", 0.9),
        make_entry("s5", 0.5),
        make_entry("a1", 0.1),
        make_entry("a15", 0.15),
        make_entry("s7", 0.7),
    ]
    text = render_memory(entries, now=NOW)
    assert headers(text) == ["s9", "s7", "s5", "s3", "a15", "a1"]
    parsed = parse_memory(text)
    assert [e.id for e in parsed.entries] == ["s9", "s7", "s5", "s3", "a15", "a1"]


def test_header_shows_two_decimals_and_meta_keeps_precision() -> None:
    entry = make_entry("p1", 0.744, when=datetime(2026, 2, 20, 10, 30, 15, tzinfo=UTC))
    text = render_memory([entry], now=NOW)
    assert "### [p1] fact | 0.74 | 2026-02-20 | 0" in text
    parsed = parse_memory(text).entries[0]
    assert parsed.score == 0.744
    assert parsed.last_activated == datetime(2026, 2, 20, 10, 30, 15, tzinfo=UTC)


def test_escaped_content_cannot_forge_structure() -> None:
    content = "\n".join(
        [
            "# Agent Memory",
            "## Active Memories",
            "### [zz] fact | 0.99 | 2026-01-01 | 1",
            "<!-- chatmem: {} -->",
            "\\# already escaped",
            "\\\\### two backslashes",
            "## Quarantined Blocks",
            "normal line",
        ]
    )
    entry = make_entry("c1", 0.5, content=content)
    text = render_memory([entry], now=NOW)
    assert headers(text) == ["c1"]
    assert "\n### [zz]" not in text
    parsed = parse_memory(text)
    assert parsed.quarantined == []
    assert parsed.entries == [entry]


# --- hand-edited files -------------------------------------------------------------------


def assert_stable(text: str) -> ParsedMemory:
    """parse -> render -> parse is a fixed point, and rendering is deterministic."""
    first = parse_memory(text)
    rendered = render_memory(first.entries, first.quarantined, now=NOW)
    second = parse_memory(rendered)
    # A hand edit may leave entries out of order; the save sorts them.
    assert by_id(second) == by_id(first)
    assert second.quarantined == first.quarantined
    rendered_again = render_memory(second.entries, second.quarantined, now=LATER)
    assert rendered_again != rendered  # only the stamp moved
    assert without_stamp(rendered_again) == without_stamp(rendered)
    return first


def test_seed_example_without_meta_is_stable() -> None:
    parsed = assert_stable(SEED_EXAMPLE)
    assert len(parsed.entries) == 4
    rendered = render_memory(parsed.entries, now=NOW)
    assert rendered.count("<!-- chatmem: ") == 4


def test_carriage_returns_are_kept_and_a_hand_edit_of_the_lines_wins() -> None:
    content = "line one\r\nline two\rline three"
    text = render_memory([make_entry("cr1", 0.5, content)], now=NOW)
    assert "line one\nline two\nline three\n" in text  # readable lines in the file
    assert parse_memory(text).entries[0].content == content
    edited = text.replace("line two\n", "line 2\n")
    assert parse_memory(edited).entries[0].content == "line one\nline 2\nline three"


def test_hand_edited_header_score_wins() -> None:
    saved = render_memory([make_entry("h1", 0.6049), make_entry("h2", 0.5)], now=NOW)
    assert "| 0.60 |" in saved
    edited = saved.replace("### [h1] fact | 0.60 |", "### [h1] fact | 0.90 |")
    parsed = assert_stable(edited)
    assert by_id(parsed)["h1"].score == 0.9
    # Untouched header: the precise meta score is kept.
    assert by_id(parse_memory(saved))["h1"].score == 0.6049


def test_hand_edited_header_date_wins() -> None:
    saved = render_memory([make_entry("h1", 0.6)], now=NOW)
    edited = saved.replace("| 2026-03-01 |", "| 2026-02-10 |")
    parsed = assert_stable(edited)
    assert by_id(parsed)["h1"].last_activated == day("2026-02-10")


def test_hand_moved_to_archived_is_manual_archive() -> None:
    saved = render_memory([make_entry("m1", 0.9), make_entry("m2", 0.8)], now=NOW)
    block = next(b for b in saved.split("\n\n") if b.startswith("### [m1]"))
    moved = saved.replace(block + "\n\n", "").rstrip("\n") + "\n\n" + block + "\n"
    assert section_of(moved, "m1") == ARCHIVED
    parsed = assert_stable(moved)
    entry = by_id(parsed)["m1"]
    assert entry.archived is ArchiveReason.MANUAL
    assert entry.score == 0.9
    assert section_of(render_memory(parsed.entries, now=NOW), "m1") == ARCHIVED


def test_hand_moved_back_to_active_clears_manual_archive() -> None:
    saved = render_memory(
        [make_entry("m1", 0.9, archived=ArchiveReason.MANUAL), make_entry("m2", 0.8)], now=NOW
    )
    block = next(b for b in saved.split("\n\n") if b.startswith("### [m1]"))
    moved = saved.replace("\n" + block + "\n", "\n").replace(
        "## Active Memories\n\n", "## Active Memories\n\n" + block + "\n\n"
    )
    assert section_of(moved, "m1") == "Active Memories"
    parsed = assert_stable(moved)
    assert by_id(parsed)["m1"].archived is None


def test_extra_blank_lines_and_crlf_are_stable() -> None:
    spaced = SEED_EXAMPLE.replace("\n", "\n\n\n")
    parsed = assert_stable(spaced)
    assert parsed.entries == parse_memory(SEED_EXAMPLE).entries
    crlf = SEED_EXAMPLE.replace("\n", "\r\n")
    assert assert_stable(crlf).entries == parse_memory(SEED_EXAMPLE).entries


def test_multi_line_content_with_hand_written_hash_line() -> None:
    text = SEED_EXAMPLE.replace(
        "用户喜欢简洁的代码风格，不喜欢过多注释",
        "用户喜欢简洁的代码风格\n# not a heading, written by hand\n\n  indented tail",
    )
    parsed = assert_stable(text)
    assert by_id(parsed)["a1b2c3"].content == (
        "用户喜欢简洁的代码风格\n# not a heading, written by hand\n\n  indented tail"
    )


def test_unknown_notes_section_is_kept() -> None:
    notes = "## Notes\nThings I wrote myself.\n\n- a list item"
    text = SEED_EXAMPLE.rstrip("\n") + "\n\n" + notes + "\n"
    parsed = assert_stable(text)
    assert len(parsed.entries) == 4
    assert [q.text for q in parsed.quarantined] == [notes]
    saved = render_memory(parsed.entries, parsed.quarantined, now=NOW)
    assert notes in saved


def test_entry_written_outside_the_sections_is_an_entry() -> None:
    stray = "### [b1] fact | 0.50 | 2026-01-01 | 1\nwritten above the sections"
    text = SEED_EXAMPLE.replace("## Active Memories\n", stray + "\n\n## Active Memories\n")
    parsed = assert_stable(text)
    assert parsed.quarantined == []
    assert by_id(parsed)["b1"].content == "written above the sections"


def test_entries_after_a_stray_heading_keep_their_archive_flag() -> None:
    saved = render_memory(
        [make_entry("k1", 0.9), make_entry("k2", 0.7, archived=ArchiveReason.MANUAL)], now=NOW
    )
    broken = saved.replace("## Archived Memories\n", "## Archived Memories\n\n## My notes\n")
    parsed = assert_stable(broken)
    assert by_id(parsed)["k2"].archived is ArchiveReason.MANUAL
    assert [q.text for q in parsed.quarantined] == ["## My notes"]


def test_stray_text_after_another_quarantined_block_is_stable() -> None:
    text = SEED_EXAMPLE.replace("| 0.88 |", "| high |").replace(
        "## Archived Memories\n", "## Archived Memories\n\nstray paragraph\n"
    )
    assert_stable(text)


@pytest.mark.parametrize("kept", ["", "### broken", "### broken\n\n\n", "\n\n"])
@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_file_ends_in_one_newline(kept: str, count: int) -> None:
    """Whatever the last block (an entry, an empty section, a quarantined text that ends
    in newlines or is nothing but them), the file ends in exactly one newline."""
    entries = [
        MemoryEntry(f"e{n}", f"fact {n}", "fact", 0.9 - n / 10, NOW, NOW, NOW) for n in range(count)
    ]
    blocks = [QuarantinedBlock(kept, 1, "bad")] if kept or count else []
    text = render_memory(entries, blocks, now=NOW)
    assert text.endswith("\n") and not text.endswith("\n\n")
