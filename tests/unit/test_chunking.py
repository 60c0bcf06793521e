"""Chunking: which files are memory files and of what kind, and how each kind is cut into
chunks whose line ranges point back into the file."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime

import pytest

from memory_core.base.chunks import ChunkKind
from memory_core.base.entries import MemoryEntry
from memory_core.base.text import tokenize
from memory_core.longterm.memory_md_renderer import render_memory
from memory_core.notes.daily import format_note
from memory_core.recall.chunking import (
    MAX_PARAGRAPH_CHARS,
    chunk_file,
    chunk_long_term,
    chunk_paragraphs,
    classify,
    summary_period,
)

D = date(2026, 3, 1)
SCOPED = "memory/scopes/peer_1"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("MEMORY.md", (ChunkKind.LONG_TERM, None)),
        (f"{SCOPED}/LONG_TERM.md", (ChunkKind.LONG_TERM, None)),
        ("memory/2026-03-01.md", (ChunkKind.DAILY, D)),
        (f"{SCOPED}/2026-03-01.md", (ChunkKind.DAILY, D)),
        ("memory/2026-03-01-chat-export.md", (ChunkKind.ARCHIVE_RAW, D)),
        (f"{SCOPED}/2026-03-01-a1b2-session-9.md", (ChunkKind.ARCHIVE_RAW, D)),
        ("memory/summary/2026-03-01.md", (ChunkKind.SUMMARY, D)),
        ("memory/summary/2026-03.md", (ChunkKind.SUMMARY, date(2026, 3, 1))),
        (f"{SCOPED}/summary/2026-02-28.md", (ChunkKind.SUMMARY, date(2026, 2, 28))),
        (f"{SCOPED}/summary/2025-12.md", (ChunkKind.SUMMARY, date(2025, 12, 1))),
        ("memory/2024-02-29.md", (ChunkKind.DAILY, date(2024, 2, 29))),  # leap day
        # Not memory files.
        ("MEMORY.md.bak", None),
        (f"{SCOPED}/LONG_TERM.md.bak", None),
        ("memory/notes.md", None),
        ("memory/2026-03-01.txt", None),
        ("memory/2026-3-1.md", None),
        ("memory/20260301.md", None),
        ("memory/2026-03-01-Chat.md", None),  # raw slugs are lower case
        ("memory/2026-03-01-.md", None),
        ("memory/2026-03.md", None),  # a month file outside summary/
        ("memory/summary/notes.md", None),
        ("memory/summary/2026-03-01-extra.md", None),
        ("memory/summary/2026.md", None),
        (f"{SCOPED}/.scope", None),
        ("", None),
        # Date-shaped names that are no dates are skipped, not an error.
        ("memory/2026-02-30.md", None),
        ("memory/2026-13-01.md", None),
        ("memory/2025-02-29.md", None),
        ("memory/2026-00-10-export.md", None),
        ("memory/summary/2026-02-31.md", None),
        ("memory/summary/2026-13.md", None),
        ("memory/summary/0000-01.md", None),
    ],
)
def test_classify(path: str, expected: tuple[ChunkKind, date | None] | None) -> None:
    assert classify(path) == expected


def test_unclassified_files_have_no_chunks() -> None:
    assert chunk_file("memory/notes.md", "some text\n") == []
    assert chunk_file("memory/2026-02-30.md", "- 10:00:00 text\n") == []


def test_summary_period() -> None:
    assert summary_period("memory/summary/2026-03.md") == "2026-03"
    assert summary_period(f"{SCOPED}/summary/2026-03-02.md") == "2026-03-02"
    assert summary_period("memory/2026-03-02.md") is None
    assert summary_period("MEMORY.md") is None


# --- long-term --------------------------------------------------------------------------


def entry(entry_id: str, content: str, score: float, **kw: object) -> MemoryEntry:
    when = datetime(2026, 2, 1, tzinfo=UTC)
    return MemoryEntry(
        id=entry_id,
        content=content,
        category="fact",
        score=score,
        created_at=when,
        last_activated=when,
        scored_at=when,
        hits=0,
        **kw,  # type: ignore[arg-type]
    )


def test_chunk_long_term_line_ranges() -> None:
    entries = [
        entry("aaaa0001", "user likes green tea", 0.9),
        entry("bbbb0002", "multi-line memory\n# a line that looks like a heading\nthird", 0.7),
        entry("cccc0003", "archived: old phone number 555-0100", 0.1),
    ]
    text = render_memory(entries, now=datetime(2026, 3, 1, tzinfo=UTC))
    lines = text.splitlines()
    chunks = {c.ref: c for c in chunk_long_term(text)}
    assert set(chunks) == {"aaaa0001", "bbbb0002", "cccc0003"}
    for item in entries:
        chunk = chunks[item.id]
        assert lines[chunk.line_from - 1].startswith(f"### [{item.id}] fact | ")
        assert chunk.text == item.content
        assert chunk.created_at == item.created_at
        # The range covers header, metadata and content, and no trailing blank line.
        body = lines[chunk.line_from - 1 : chunk.line_to]
        assert body[-1].strip() and body[-1] == lines[chunk.line_to - 1]
        assert chunk.line_to - chunk.line_from + 1 == 2 + len(item.content.splitlines())
    assert lines[chunks["bbbb0002"].line_to - 2] == "\\# a line that looks like a heading"
    # Archived entries follow the Archived heading: the range stops before nothing else.
    assert lines[chunks["cccc0003"].line_from - 3] == "## Archived Memories"


def test_chunk_long_term_hand_written_file() -> None:
    text = (
        "# Agent Memory\n"
        "\n"
        "## Active Memories\n"
        "\n"
        "### [tea1] preference | 0.80 | 2026-02-01 | 3\n"
        "Prefers oolong tea.\n"
        "No sugar.\n"
        "\n"
        "\n"
        "### [bad!] preference | 0.80 | 2026-02-01 | 3\n"
        "unparseable id: quarantined, not indexed\n"
        "### [run2] habit | 0.50 | 2026-01-01 | 0\n"
        "Runs 5k on Sundays.\n"
    )
    chunks = chunk_long_term(text)
    assert [(c.ref, c.line_from, c.line_to, c.text) for c in chunks] == [
        ("tea1", 5, 7, "Prefers oolong tea.\nNo sugar."),
        ("run2", 12, 13, "Runs 5k on Sundays."),
    ]
    assert chunk_long_term("") == []
    assert chunk_long_term("# Agent Memory\n\n## Active Memories\n") == []


# --- daily notes ------------------------------------------------------------------------


def test_daily_notes_multi_line() -> None:
    at = datetime(2026, 3, 1, 9, 30, 5, tzinfo=UTC)
    text = (
        "# 2026-03-01\n\n"
        + format_note("standup: ship the billing fix", at)
        + format_note("meeting notes\nalice: ship it\n\nbob: agreed", at.replace(hour=14))
        + "hand-written line without a time\n"
        + "- 18:00 dinner with Carol\n"
        + "\n"
        + "- 23:59:59 last one\n"
    )
    chunks = chunk_file("memory/2026-03-01.md", text)
    assert [(c.line_from, c.line_to, c.text) for c in chunks] == [
        (3, 3, "standup: ship the billing fix"),
        (4, 6, "meeting notes\nalice: ship it\nbob: agreed"),
        (7, 7, "hand-written line without a time"),
        (8, 8, "dinner with Carol"),
        (10, 10, "last one"),
    ]
    assert [c.created_at for c in chunks] == [
        at,
        at.replace(hour=14),
        datetime(2026, 3, 1, tzinfo=UTC),
        datetime(2026, 3, 1, 18, tzinfo=UTC),
        datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC),
    ]
    lines = text.splitlines()
    for chunk in chunks:
        window = "\n".join(lines[chunk.line_from - 1 : chunk.line_to])
        assert set(tokenize(chunk.text)) <= set(tokenize(window))


def test_daily_note_with_a_bad_time_gets_the_day() -> None:
    chunks = chunk_file("memory/2026-03-01.md", "- 25:61 impossible time\n")
    assert [(c.text, c.created_at) for c in chunks] == [
        ("impossible time", datetime(2026, 3, 1, tzinfo=UTC))
    ]


# --- paragraphs (summaries, archived raw history) ---------------------------------------


def test_paragraphs_with_headings() -> None:
    text = (
        "# February 2026\n"  # 1
        "## Work\n"  # 2: a heading closes the paragraph before it
        "Shipped the billing rewrite.\n"  # 3
        "Postmortem for the outage.\n"  # 4
        "\n"  # 5
        "\n"  # 6
        "## Home\n"  # 7
        "\n"  # 8
        "Painted the kitchen.\n"  # 9
        "   \n"  # 10: whitespace only is blank
        "Fixed the bike.\n"  # 11
        "#hashtag is not a heading\n"  # 12
        "#### nor is a level-4 heading\n"  # 13
    )
    when = datetime(2026, 2, 1, tzinfo=UTC)
    chunks = chunk_file("memory/summary/2026-02.md", text)
    assert [(c.line_from, c.line_to, c.text) for c in chunks] == [
        (1, 1, "# February 2026"),
        (2, 4, "## Work\nShipped the billing rewrite.\nPostmortem for the outage."),
        (7, 7, "## Home"),
        (9, 9, "Painted the kitchen."),
        (
            11,
            13,
            "Fixed the bike.\n#hashtag is not a heading\n#### nor is a level-4 heading",
        ),
    ]
    assert all(c.created_at == when for c in chunks)
    raw = chunk_file("memory/2026-02-03-chat.md", "user: hi\nassistant: hello\n")
    assert [(c.line_from, c.line_to, c.created_at) for c in raw] == [
        (1, 2, datetime(2026, 2, 3, tzinfo=UTC))
    ]
    assert chunk_paragraphs("", None) == []
    assert chunk_paragraphs("\n\n  \n", None) == []


def test_long_paragraphs_are_split_without_losing_text() -> None:
    lines = [" ".join(f"w{n}x{i}" for i in range(200)) for n in range(6)]  # ~1.2k chars each
    text = "\n".join(lines) + "\n"
    chunks = chunk_paragraphs(text, None)
    assert len(chunks) > 1
    assert all(len(c.text) <= MAX_PARAGRAPH_CHARS for c in chunks)
    # Every word of the paragraph is in some chunk, once.
    words = [w for c in chunks for w in c.text.split()]
    assert words == text.split()
    for chunk in chunks:
        window = "\n".join(lines[chunk.line_from - 1 : chunk.line_to])
        assert set(chunk.text.split()) <= set(window.split())
    assert chunks[0].line_from == 1 and chunks[-1].line_to == 6
    # In file order; pieces of one paragraph share its line range.
    for a, b in itertools.pairwise(chunks):
        assert (a.line_from, a.line_to) <= (b.line_from, b.line_to)
        assert a.line_to < b.line_from or (a.line_from, a.line_to) == (b.line_from, b.line_to)


def test_one_huge_line_is_split_too() -> None:
    cjk = "数据库连接池" * 1000  # 6000 characters, no space to cut at
    chunks = chunk_file("memory/summary/2026-02-03.md", "intro\n\n" + cjk + "\n\nafter\n")
    assert chunks[0].text == "intro" and chunks[-1].text == "after"
    middle = chunks[1:-1]
    assert len(middle) == 3
    assert "".join(c.text for c in middle) == cjk
    assert all((c.line_from, c.line_to) == (3, 3) for c in middle)
    latin = " ".join(["word"] * 1500)  # 7499 characters: cut at spaces
    pieces = chunk_paragraphs(latin, None)
    assert all(len(p.text) <= MAX_PARAGRAPH_CHARS for p in pieces)
    assert all(set(p.text.split()) == {"word"} for p in pieces)
    assert sum(len(p.text.split()) for p in pieces) == 1500
