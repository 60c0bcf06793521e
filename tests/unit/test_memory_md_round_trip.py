"""MEMORY.md round trips: any entry (hypothesis) renders and parses back to itself, through
the disk too, and the remembered blocks and fast paths give what the plain code gives."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from random import Random
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.base.clock import ensure_aware, format_when, parse_when
from memory_core.base.entries import ArchiveReason, MemoryEntry, is_valid_entry_id
from memory_core.longterm import memory_md_parser, memory_md_renderer
from memory_core.longterm.memory_md import QuarantinedBlock, escape_line, format_score, split_lines
from memory_core.longterm.memory_md_parser import clear_parse_cache, parse_memory
from memory_core.longterm.memory_md_renderer import (
    clear_render_cache,
    render_entry,
    render_memory,
    render_memory_lines,
)
from memory_core.longterm.store import read_memory_file
from tests.unit.memory_md_support import LATER, NOW, SEED_EXAMPLE, by_id, headers, without_stamp

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
