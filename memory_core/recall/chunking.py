"""Pure: turn a memory file's text into search chunks with line ranges.

One long-term entry is one chunk, one daily note is one chunk, and other Markdown
(archived raw history, summaries) is cut by paragraph. The index and the file-only
fallback both use this, so a degraded search sees the same units as the index.
"""

from __future__ import annotations

import bisect
import re
from datetime import UTC, date, datetime, time, tzinfo
from pathlib import PurePosixPath

from memory_core.base.chunks import Chunk, ChunkKind
from memory_core.base.clock import parse_day
from memory_core.base.requests import searchable
from memory_core.base.workspace import MAIN_LONG_TERM, SCOPED_LONG_TERM
from memory_core.longterm.claims import shown
from memory_core.longterm.memory_md_parser import ParsedMemory, parse_memory
from memory_core.notes.daily import parse_notes

_TURN = re.compile(r"^(\d{2}):(\d{2}):(\d{2}) ([^:\n]{1,64}): ")
BOT_SPEAKER = "assistant"
"""Who the bot's turns are said by in an archived conversation (its messages have no
speaker name: the archive writes their role)."""


def search_text(chunk: Chunk) -> str:
    """What a chunk is tokenized from: a turn without its 'HH:MM:SS who: ' prefix."""
    if chunk.speaker is None:
        return chunk.text
    m = _TURN.match(chunk.text)
    return chunk.text[m.end() :] if m else chunk.text


_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
_RAW_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})-[a-z0-9-]+\.md$")
_MONTH_FILE = re.compile(r"^(\d{4}-\d{2})\.md$")
_ENTRY_HEADER = re.compile(r"^### \[([^\]]*)\]")
_STRUCTURE = re.compile(r"^#{1,3} ")
MAX_PARAGRAPH_CHARS = 2000


def classify(relative_path: str) -> tuple[ChunkKind, date | None] | None:
    """Kind and date of a memory file from its workspace-relative path; None to skip."""
    path = PurePosixPath(relative_path)
    return classify_name(path.name, in_summary=path.parent.name == "summary")


def classify_name(name: str, *, in_summary: bool) -> tuple[ChunkKind, date | None] | None:
    """`classify` of a file called `name`, in a `summary` directory or not: what listing
    a directory asks for every file in it."""
    if name in (MAIN_LONG_TERM, SCOPED_LONG_TERM):
        return ChunkKind.LONG_TERM, None
    if in_summary:
        if m := _DAY_FILE.match(name):
            return _dated(ChunkKind.SUMMARY, m.group(1))
        if m := _MONTH_FILE.match(name):
            return _dated(ChunkKind.SUMMARY, m.group(1) + "-01")
        return None
    if m := _DAY_FILE.match(name):
        return _dated(ChunkKind.DAILY, m.group(1))
    if m := _RAW_FILE.match(name):
        return _dated(ChunkKind.ARCHIVE_RAW, m.group(1))
    return None


def _dated(kind: ChunkKind, iso: str) -> tuple[ChunkKind, date | None] | None:
    """A date-shaped name that is no date (`2026-02-30.md`, made by hand) or one far out of
    range (`9999-12-31.md`) is not a memory file: raising here would stop every sync of the scope, and the core's start."""
    try:
        return kind, parse_day(iso)
    except ValueError:
        return None


def summary_period(relative_path: str) -> str | None:
    """'YYYY-MM' for a monthly summary file, 'YYYY-MM-DD' for a daily one, else None."""
    path = PurePosixPath(relative_path)
    if path.parent.name != "summary":
        return None
    return path.stem


def chunk_file(relative_path: str, text: str, zone: tzinfo = UTC) -> list[Chunk]:
    """Chunks of one file; `zone` is the workspace's time zone, in which daily notes and
    archive file names give their local dates and times."""
    classified = classify(relative_path)
    if classified is None:
        return []
    kind, day = classified
    if kind is ChunkKind.LONG_TERM:
        return chunk_long_term(text)
    if kind is ChunkKind.DAILY and day is not None:
        return [
            Chunk(n.line_from, n.line_to, n.text, _at(day, n.time, zone))
            for n in parse_notes(text, day)
        ]
    chunks = chunk_paragraphs(text, _at(day, "", zone) if day else None)
    if kind is ChunkKind.ARCHIVE_RAW and day is not None:
        # The file's "# date conversation" heading is no turn: the date is every turn's
        # own, and as a chunk it would sit in the exchange shown around the first turn.
        return searchable_only(
            [_as_turn(c, day, zone) for c in chunks if not c.text.startswith("# ")]
        )
    return chunks


def searchable_only(turns: list[Chunk]) -> list[Chunk]:
    """The archived turns search may rank (`requests.searchable`): a command, a forget
    request, the bot's replies to them and its canned replies stay in the file but get no
    chunk, as they got no index row while they were session messages; a "remember …" is
    a turn like any other. A piece of a long turn (no speaker of its own) is kept."""
    spoken = [t for t in turns if t.speaker is not None]
    kept = iter(searchable((t.speaker == BOT_SPEAKER, search_text(t)) for t in spoken))
    return [t for t in turns if t.speaker is None or next(kept)]


def _as_turn(chunk: Chunk, day: date, zone: tzinfo) -> Chunk:
    """An archived turn ('19:02:00 Mia: text') carries its own time and speaker."""
    m = _TURN.match(chunk.text)
    if m is None:
        return chunk
    clock = f"{m.group(1)}:{m.group(2)}:{m.group(3)}"
    return Chunk(
        chunk.line_from,
        chunk.line_to,
        chunk.text,
        _at(day, clock, zone),
        chunk.ref,
        speaker=m.group(4).strip(),
    )


def _at(day: date, clock: str, zone: tzinfo = UTC) -> datetime:
    try:
        moment = time.fromisoformat(clock) if clock else time(0, 0)
    except ValueError:
        moment = time(0, 0)
    return datetime.combine(day, moment, tzinfo=zone).astimezone(UTC)


def chunk_long_term(text: str, parsed: ParsedMemory | None = None) -> list[Chunk]:
    """One chunk per parsed entry (active or archived), located by its header line;
    `parsed` is `text`'s parse when the caller made it (with any `archive_below`: the
    chunks do not depend on it)."""
    lines = text.splitlines()
    starts: dict[str, int] = {}
    boundaries: list[int] = []
    for number, line in enumerate(lines, start=1):
        if _STRUCTURE.match(line):
            boundaries.append(number)
            if m := _ENTRY_HEADER.match(line):
                starts.setdefault(m.group(1).strip(), number)
    boundaries.append(len(lines) + 1)
    chunks: list[Chunk] = []
    for entry in (parsed or parse_memory(text)).entries:
        start = starts.get(entry.id, 1)
        following = bisect.bisect_right(boundaries, start)
        end = boundaries[following] - 1 if following < len(boundaries) else len(lines)
        while end > start and not lines[end - 1].strip():
            end -= 1
        chunks.append(Chunk(start, end, shown(entry), entry.created_at, ref=entry.id))
    return chunks


def chunk_paragraphs(text: str, created_at: datetime | None) -> list[Chunk]:
    """Blank-line separated paragraphs (headings start a new one), long ones split."""
    chunks: list[Chunk] = []
    buffer: list[str] = []
    start = 0

    def close(end: int) -> None:
        body = "\n".join(buffer).strip()
        # A paragraph closes once it passes the limit, so it may end past it (one long
        # line can be far past it): cut it into pieces rather than drop its tail.
        while body:
            piece = _piece(body)
            chunks.append(Chunk(start, end, piece, created_at))
            body = body[len(piece) :].lstrip()

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or (_STRUCTURE.match(line) and buffer):
            close(number - 1)
            buffer = []
            if not line.strip():
                continue
        if not buffer:
            start = number
        buffer.append(line)
        if sum(len(b) for b in buffer) > MAX_PARAGRAPH_CHARS:
            close(number)
            buffer = []
    close(len(text.splitlines()))
    return chunks


def _piece(body: str) -> str:
    """The first at most MAX_PARAGRAPH_CHARS characters of `body`, ending at a space or
    line break when one falls in the second half, so words are rarely cut."""
    if len(body) <= MAX_PARAGRAPH_CHARS:
        return body
    head = body[:MAX_PARAGRAPH_CHARS]
    cut = max(head.rfind(" "), head.rfind("\n"))
    return head[:cut] if cut > MAX_PARAGRAPH_CHARS // 2 else head
