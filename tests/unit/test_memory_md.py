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

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from random import Random
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.base.clock import ensure_aware, format_when, parse_when
from memory_core.base.entries import ArchiveReason, MemoryEntry, is_valid_entry_id
from memory_core.longterm import memory_md_parser, memory_md_renderer
from memory_core.longterm.memory_md import (
    ARCHIVED,
    QUARANTINED,
    QuarantinedBlock,
    escape_line,
    format_score,
    split_lines,
)
from memory_core.longterm.memory_md_parser import ParsedMemory, clear_parse_cache, parse_memory
from memory_core.longterm.memory_md_renderer import (
    clear_render_cache,
    render_entry,
    render_memory,
    render_memory_lines,
)
from memory_core.longterm.store import read_memory_file

SEED_EXAMPLE = """\
# Agent Memory

<!-- Last updated: 2026-02-20T10:30:00 -->
<!-- Total entries: 15 -->

## Active Memories

### [a1b2c3] preference | 0.92 | 2026-02-20 | 12
用户喜欢简洁的代码风格，不喜欢过多注释

### [d4e5f6] fact | 0.88 | 2026-02-19 | 8
用户的主要开发语言是 Python，常用 FastAPI 框架

### [g7h8i9] workflow | 0.85 | 2026-02-20 | 15
用户每天早上 9 点查看 A 股行情，关注新能源板块

## Archived Memories

### [x1y2z3] fact | 0.18 | 2026-01-10 | 2
用户曾尝试用 Vue 写前端，但后来放弃了
"""

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=3, hours=5)


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


def headers(text: str) -> list[str]:
    return re.findall(r"^### \[([^\]]+)\]", text, flags=re.MULTILINE)


def section_of(text: str, entry_id: str) -> str:
    """Name of the `## ` section a rendered entry sits in."""
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        elif line.startswith(f"### [{entry_id}]"):
            return current
    raise AssertionError(f"{entry_id} not rendered")


def without_stamp(text: str) -> str:
    return re.sub(r"<!-- Last updated: .* -->", "<!-- Last updated: X -->", text)


def by_id(parsed: ParsedMemory) -> dict[str, MemoryEntry]:
    return {e.id: e for e in parsed.entries}


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


# --- round trip (hypothesis) -------------------------------------------------------------

TRICKY_LINES = [
    "#",
    "# Agent Memory",
    "## Active Memories",
    "## Archived Memories",
    "## Quarantined Blocks",
    "### [a1b2c3] preference | 0.92 | 2026-02-20 | 12",
    "###",
    "\\#",
    "\\\\## x",
    "\\<!-- chatmem: {} -->",
    "<!-- chatmem: {}-->",
    '<!-- chatmem: {"score": 1} -->',
    "<!-- Last updated: 2026-02-20T10:30:00 -->",
    "<!-- Total entries: 15 -->",
    "-->",
    "用户喜欢用 pytest 而非 unittest",
    "emoji 🎉 and ümlauts",
    "",
    "   ",
    "  ### indented",
]

zones = st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5))])
moments = st.datetimes(
    min_value=datetime(2000, 1, 2), max_value=datetime(2100, 1, 1), timezones=zones
).map(lambda d: d.replace(microsecond=0))
lines = st.one_of(
    st.sampled_from(TRICKY_LINES), st.text(max_size=30), st.sampled_from(["\r", "a\rb", "\r\r"])
)
contents = st.lists(lines, min_size=1, max_size=6).map("\n".join).map(str.strip).filter(bool)
ids = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "N"]) | st.sampled_from("-_"),
    min_size=1,
    max_size=12,
).filter(is_valid_entry_id)
categories = st.sampled_from(["preference", "fact", "todo", "skill_usage"]) | st.from_regex(
    r"[\w-]{1,40}", fullmatch=True
)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    return MemoryEntry(
        id=draw(ids),
        content=draw(contents),
        category=draw(categories),
        score=draw(unit),
        created_at=draw(moments),
        last_activated=draw(moments),
        scored_at=draw(moments),
        hits=draw(st.integers(0, 10**6)),
        source_session=draw(st.none() | st.text(min_size=1, max_size=20)),
        confidence=draw(st.none() | unit),
        expires_at=draw(st.none() | moments),
        pinned=draw(st.booleans()),
        archived=draw(st.none() | st.sampled_from(ArchiveReason)),
        sessions=tuple(draw(st.lists(st.text(max_size=12), max_size=3))),
        speaker=draw(st.none() | st.text(min_size=1, max_size=20).filter(str.strip)),
        claim_on=draw(st.none() | ids),
    )


@settings(max_examples=300, deadline=None)
@given(entries())
def test_round_trip_single_entry(entry: MemoryEntry) -> None:
    text = render_memory([entry], now=NOW)
    parsed = parse_memory(text)
    assert parsed.quarantined == []
    assert parsed.entries == [entry]  # CR and CRLF included


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entries(), max_size=6, unique_by=lambda e: e.id))
def test_round_trip_many_entries(items: list[MemoryEntry]) -> None:
    text = render_memory(items, now=NOW)
    parsed = parse_memory(text)
    assert parsed.quarantined == []
    assert by_id(parsed) == {e.id: e for e in items}
    assert len(headers(text)) == len(items)
    # And a second save changes nothing but the stamp.
    assert without_stamp(render_memory(parsed.entries, now=LATER)) == without_stamp(text)


@settings(max_examples=50, deadline=None)
@given(st.lists(entries(), min_size=1, max_size=4, unique_by=lambda e: e.id))
def test_round_trip_through_disk(
    tmp_path_factory: pytest.TempPathFactory, items: list[MemoryEntry]
) -> None:
    path = tmp_path_factory.mktemp("rt") / "MEMORY.md"
    path.write_bytes(render_memory(items, now=NOW).encode("utf-8"))
    parsed = read_memory_file(path, 0.2, root=path.parent).parsed
    assert parsed.quarantined == []
    assert by_id(parsed) == {e.id: e for e in items}


def test_quarantined_block_dataclass_compares_by_text_only() -> None:
    assert QuarantinedBlock("x", 1, "a") == QuarantinedBlock("x", 9, "b")


# --- remembered blocks and fast paths give what the plain code gives -----------------------
#
# render remembers each entry object's block and builds the metadata JSON itself; parse
# remembers each block's entry and reads timestamps through a fast path. These tests hold
# them to the plain versions.


def reference_render_entry(entry: MemoryEntry) -> list[str]:
    """`render_entry` as written before its fast paths, from the public helpers."""
    header = (
        f"### [{entry.id}] {entry.category} | {format_score(entry.score)} | "
        f"{ensure_aware(entry.last_activated).date().isoformat()} | {entry.hits}"
    )
    meta: dict[str, object] = {
        "created_at": format_when(entry.created_at),
        "last_activated": format_when(entry.last_activated),
        "scored_at": format_when(entry.scored_at),
        "score": entry.score,
    }
    if entry.source_session:
        meta["source_session"] = entry.source_session
    if entry.sessions:
        meta["sessions"] = list(entry.sessions)
    if entry.confidence is not None:
        meta["confidence"] = entry.confidence
    if entry.expires_at is not None:
        meta["expires_at"] = format_when(ensure_aware(entry.expires_at))
    if entry.pinned:
        meta["pinned"] = True
    if entry.archived is not None:
        meta["archived"] = entry.archived.value
    if entry.speaker is not None:
        meta["speaker"] = entry.speaker
    if entry.claim_on is not None:
        meta["claim_on"] = entry.claim_on
    if "\r" in entry.content:
        meta["text"] = entry.content
    encoded = json.dumps(meta, ensure_ascii=False, separators=(", ", ": "))
    encoded = encoded.replace("-->", "--\\u003e")
    lines = [header, f"<!-- chatmem: {encoded} -->"]
    lines.extend(escape_line(line) for line in split_lines(entry.content))
    return [*lines, ""]


any_zone = st.sampled_from(
    [
        UTC,
        timezone(timedelta(hours=8)),
        timezone(-timedelta(hours=3, minutes=30)),
        ZoneInfo("Europe/Berlin"),
        ZoneInfo("America/New_York"),
    ]
)
any_moment = st.datetimes(
    min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1), timezones=any_zone
) | st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1))
odd_numbers = st.sampled_from([0, 1, 0.0, -0.0, 1.0, float("nan"), float("inf"), True]) | unit


@st.composite
def odd_entries(draw: st.DrawFn) -> MemoryEntry:
    """Entries as code may build them, not only as files hold them."""
    base = draw(entries())
    return base.with_(
        score=draw(odd_numbers | unit),
        confidence=draw(st.none() | odd_numbers),
        created_at=draw(any_moment),
        last_activated=draw(any_moment),
        expires_at=draw(st.none() | any_moment),
        source_session=draw(st.none() | st.text(max_size=8)),
        sessions=tuple(draw(st.lists(st.text(max_size=8), max_size=3))),
    )


@settings(max_examples=400, deadline=None)
@given(odd_entries())
def test_render_entry_matches_the_plain_version(entry: MemoryEntry) -> None:
    clear_render_cache()
    assert render_entry(entry) == reference_render_entry(entry)
    assert render_memory_lines([entry], now=NOW) == render_memory_lines([entry], now=NOW)


@settings(max_examples=300, deadline=None)
@given(any_moment)
def test_format_when_fast_path_matches_format_when(when: datetime) -> None:
    assert memory_md_renderer._format_when(when) == format_when(when)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(odd_entries(), max_size=6, unique_by=lambda e: e.id))
def test_remembered_render_equals_a_fresh_render(items: list[MemoryEntry]) -> None:
    clear_render_cache()
    fresh = render_memory_lines(items, now=NOW)
    again = render_memory_lines(items, now=NOW)
    # Equal but distinct objects: nothing remembered for them, rendered anew.
    copies = render_memory_lines([e.with_() for e in items], now=NOW)
    assert again == fresh
    assert copies == fresh
    text, positions = fresh
    lines = text.split("\n")
    for entry in items:
        first, last = positions[entry.id]
        assert lines[first - 1].startswith(f"### [{entry.id}]")
        assert lines[last - 1] == reference_render_entry(entry)[-2]


def test_equal_entries_that_render_differently_keep_their_own_blocks() -> None:
    clear_render_cache()
    base = MemoryEntry("e1", "text", "fact", 1.0, NOW, NOW, NOW)
    as_int = base.with_(score=1)
    negative_zero, zero = base.with_(score=-0.0), base.with_(score=0.0)
    assert as_int == base
    assert negative_zero == zero
    for one in (base, as_int, zero, negative_zero, base, as_int):
        assert render_memory([one], now=NOW) == render_memory_lines([one], now=NOW)[0]
        assert render_entry(one) == reference_render_entry(one)
    assert '"score": 1}' in render_memory([as_int], now=NOW)
    assert '"score": 1.0}' in render_memory([base], now=NOW)
    assert "| -0.00 |" in render_memory([negative_zero], now=NOW)
    assert "| 0.00 |" in render_memory([zero], now=NOW)


def test_unchanged_blocks_parse_to_the_same_entries() -> None:
    clear_parse_cache()
    text = render_memory(parse_memory(SEED_EXAMPLE).entries, now=NOW)
    first = parse_memory(text)
    # The same file again, and again with a note above everything: the line numbers move,
    # the (remembered) entries do not.
    second = parse_memory(text)
    shifted = parse_memory("<!-- note -->\n\n" + text)
    assert second == first
    assert [a is b for a, b in zip(first.entries, second.entries, strict=True)] == [True] * 4
    assert shifted.entries == first.entries
    assert shifted.lines == {k: (a + 2, b + 2) for k, (a, b) in first.lines.items()}
    # An edited block parses anew; a broken one is quarantined every time, same reason.
    edited = parse_memory(text.replace("| 12\n", "| 13\n"))
    assert by_id(edited)["a1b2c3"].hits == 13
    broken = text.replace("| 0.88 |", "| lots |")
    reasons = [parse_memory(broken).quarantined for _ in range(2)]
    assert reasons[0] == reasons[1]
    assert [q.reason for q in reasons[0]] == [q.reason for q in reasons[1]]
    assert [q.reason for q in reasons[0]] == ["score 'lots' is not a number"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entries(), max_size=5, unique_by=lambda e: e.id), st.randoms())
def test_remembered_parse_equals_a_fresh_parse(items: list[MemoryEntry], rnd: Random) -> None:
    lines = render_memory(items, now=NOW).split("\n")
    for _ in range(3):
        at = rnd.randrange(len(lines) + 1)
        if rnd.random() < 0.3 and at < len(lines):
            del lines[at]
        else:
            lines.insert(at, rnd.choice(TRICKY_LINES))
    text = "\n".join(lines)
    for archive_below in (0.2, 0.5):
        clear_parse_cache()
        fresh = parse_memory(text, archive_below=archive_below)
        again = parse_memory(text, archive_below=archive_below)
        assert again == fresh
        assert again.lines == fresh.lines
        assert [(q.text, q.line, q.reason) for q in again.quarantined] == [
            (q.text, q.line, q.reason) for q in fresh.quarantined
        ]


stamps = st.one_of(
    any_moment.map(format_when),
    any_moment.map(lambda d: d.isoformat()),
    st.text(alphabet="0123456789-T:Z+ .", min_size=18, max_size=22),
    st.sampled_from(["2026-02-30T10:00:00Z", " 2026-06-01T12:00:00Z", "2026-06-01T12:00:00z"]),
)


@settings(max_examples=500, deadline=None)
@given(stamps)
def test_metadata_timestamp_fast_path_matches_parse_when(text: str) -> None:
    try:
        expected: datetime | None = parse_when(text)
    except ValueError:
        expected = None
    got = memory_md_parser._when(text)
    assert repr(got) == repr(expected)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"[\w-]{0,34}", fullmatch=True))
def test_entry_id_check_matches_the_character_rule(value: str) -> None:
    plain = 1 <= len(value) <= 32 and all(c.isalnum() or c in "-_" for c in value)
    assert is_valid_entry_id(value) == plain
