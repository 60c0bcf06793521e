"""Pure parse/render of MEMORY.md in the seed's format (seed 002 §2.3, §8.2).

The header line stays exactly the seed's `### [id] category | score | last_activated | hits`;
what the seed has no room for rides in one `<!-- chatmem: {json} -->` line under it. The
parser is tolerant: a block it cannot read is returned verbatim as quarantined, never lost,
and rendered back in a `## Quarantined Blocks` section until a person fixes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memory_core.clock import ensure_aware, format_when, parse_when
from memory_core.entries import ArchiveReason, MemoryEntry, is_valid_entry_id
from memory_core.merge import sort_entries

TITLE = "# Agent Memory"
ACTIVE = "Active Memories"
ARCHIVED = "Archived Memories"
QUARANTINED = "Quarantined Blocks"
QUARANTINE_NOTE = (
    "<!-- Blocks below could not be parsed and are kept verbatim. "
    "Fix a block and it becomes an entry again. -->"
)

_HEADER = re.compile(
    r"^### \[(?P<id>[^\]]*)\]\s*(?P<category>[^|]*?)\s*\|\s*(?P<score>[^|]*?)\s*\|"
    r"\s*(?P<when>[^|]*?)\s*\|\s*(?P<hits>[^|]*?)\s*$"
)
_META = re.compile(r"^<!-- chatmem: (?P<json>\{.*\}) -->\s*$")
_SECTION = re.compile(r"^## (?P<name>.+?)\s*$")
_STRUCTURE = re.compile(r"^#{1,3} ")
_DELIMITER = re.compile(r"^<!-- quarantined(?::.*)? -->\s*$")
_FILE_COMMENT = re.compile(r"^<!-- (Last updated|Total entries):.*-->\s*$")
_ESCAPED = re.compile(r"^\\(\\*)(#|<!-- chatmem:)")
_NEEDS_ESCAPE = re.compile(r"^\\*(#|<!-- chatmem:)")
_CATEGORY = re.compile(r"^[\w-]{1,40}$")


@dataclass(frozen=True, slots=True)
class QuarantinedBlock:
    """Text the parser could not turn into an entry, kept verbatim."""

    text: str
    line: int = field(default=0, compare=False)
    reason: str = field(default="", compare=False)


@dataclass(slots=True)
class ParsedMemory:
    entries: list[MemoryEntry] = field(default_factory=list)
    quarantined: list[QuarantinedBlock] = field(default_factory=list)
    lines: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    """Entry id → (first, last) line of its block in the file, for `path:line` answers."""


def escape_line(line: str) -> str:
    return "\\" + line if _NEEDS_ESCAPE.match(line) else line


def unescape_line(line: str) -> str:
    return line[1:] if _ESCAPED.match(line) else line


def split_lines(text: str) -> list[str]:
    """Lines split at LF, CRLF and CR only (what a file read in text mode gives).

    `str.splitlines` also splits at U+2028, U+0085, form feeds and the like, which may sit
    inside content or a metadata string and must survive a save unchanged.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def format_score(score: float) -> str:
    return f"{score:.2f}"


# --- parse ---------------------------------------------------------------------------


def parse_memory(text: str, *, archive_below: float = 0.2) -> ParsedMemory:
    """Parse a MEMORY.md; never raises for content, only sorts what it cannot read aside."""
    result = ParsedMemory()
    seen_ids: set[str] = set()
    section: str | None = None
    block: list[str] = []
    block_start = 0
    block_section: str | None = None

    def flush() -> None:
        nonlocal block
        if block and any(line.strip() for line in block):
            _take_block(block, block_start, block_section, result, seen_ids, archive_below)
        block = []

    for number, line in enumerate(split_lines(text), start=1):
        if section == QUARANTINED and _DELIMITER.match(line):
            # Each quarantined block is introduced by its own delimiter, so stray text
            # never merges into the block before it.
            flush()
            continue
        heading = _SECTION.match(line)
        if heading and not line.startswith("###"):
            flush()
            name = heading.group("name")
            if name in (ACTIVE, ARCHIVED, QUARANTINED):
                section = name
            else:
                section = None
                block, block_start, block_section = [line], number, None
            continue
        if line.startswith("### "):
            flush()
            block, block_start, block_section = [line], number, section
            continue
        if block:
            block.append(line)
            continue
        if _is_file_furniture(line, section):
            continue
        block, block_start, block_section = [line], number, None
    flush()
    return result


def _is_file_furniture(line: str, section: str | None) -> bool:
    stripped = line.strip()
    if not stripped or _FILE_COMMENT.match(stripped):
        return True
    if section is None and stripped == TITLE:
        return True
    return section == QUARANTINED and stripped == QUARANTINE_NOTE


def _take_block(
    lines: list[str],
    start: int,
    section: str | None,
    result: ParsedMemory,
    seen_ids: set[str],
    archive_below: float,
) -> None:
    verbatim = "\n".join(lines).strip("\n")
    try:
        entry = _parse_block(lines, section, archive_below)
    except ValueError as exc:
        result.quarantined.append(QuarantinedBlock(verbatim, start, str(exc)))
        return
    if entry.id in seen_ids:
        result.quarantined.append(QuarantinedBlock(verbatim, start, f"duplicate id {entry.id}"))
        return
    seen_ids.add(entry.id)
    result.entries.append(entry)
    last = max((i for i, line in enumerate(lines) if line.strip()), default=0)
    result.lines[entry.id] = (start, start + last)


def _parse_block(lines: list[str], section: str | None, archive_below: float) -> MemoryEntry:
    header = _HEADER.match(lines[0])
    if header is None:
        raise ValueError("header is not `### [id] category | score | last_activated | hits`")
    entry_id = header.group("id").strip()
    if not is_valid_entry_id(entry_id):
        raise ValueError(f"bad id {entry_id!r}")
    category = header.group("category").strip()
    if not _CATEGORY.match(category):
        raise ValueError(f"bad category {category!r}")
    score_text = header.group("score")
    try:
        header_score = float(score_text)
    except ValueError:
        raise ValueError(f"score {score_text!r} is not a number") from None
    if not 0.0 <= header_score <= 1.0:
        raise ValueError(f"score {score_text} is outside [0, 1]")
    header_when = parse_when(header.group("when"))
    hits_text = header.group("hits")
    if not hits_text.isdigit():
        raise ValueError(f"hits {hits_text!r} is not a whole number")

    body = lines[1:]
    meta: dict[str, object] = {}
    if body and body[0].startswith("<!-- chatmem:"):
        # Content lines like this one are escaped on write: unescaped, it is the metadata.
        match = _META.match(body[0])
        if match is None:
            raise ValueError("unreadable metadata comment")
        try:
            loaded = json.loads(match.group("json"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"unreadable metadata comment: {exc.msg}") from None
        if not isinstance(loaded, dict):
            raise ValueError("metadata comment is not an object")
        meta = loaded
        body = body[1:]
    content = "\n".join(unescape_line(line) for line in body).strip()
    if not content:
        raise ValueError("entry has no content")

    score = header_score
    meta_score = meta.get("score")
    if isinstance(meta_score, int | float) and format_score(meta_score) == format_score(score):
        score = float(meta_score)
    last_activated = header_when
    meta_last = _when(meta.get("last_activated"))
    if meta_last is not None and meta_last.date() == header_when.date():
        last_activated = meta_last
    scored_at = _when(meta.get("scored_at")) or last_activated
    created_at = _when(meta.get("created_at")) or last_activated
    pinned = meta.get("pinned") is True

    flag = meta.get("archived")
    archived: ArchiveReason | None = None
    if isinstance(flag, str) and flag in ArchiveReason.__members__.values():
        archived = ArchiveReason(flag)
    if section == ACTIVE:
        # Moved to Active by hand: the section wins over the flag.
        archived = None
    elif section == ARCHIVED and archived is None and (score >= archive_below or pinned):
        # Moved to Archived by hand although its score would keep it Active.
        archived = ArchiveReason.MANUAL
    sessions = meta.get("sessions")
    confidence = meta.get("confidence")
    source = meta.get("source_session")
    return MemoryEntry(
        id=entry_id,
        content=content,
        category=category,
        score=score,
        created_at=created_at,
        last_activated=last_activated,
        scored_at=scored_at,
        hits=int(hits_text),
        source_session=source if isinstance(source, str) else None,
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        expires_at=_when(meta.get("expires_at")),
        pinned=pinned,
        archived=archived,
        sessions=tuple(s for s in sessions if isinstance(s, str))
        if isinstance(sessions, list)
        else (),
    )


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_when(value)
    except ValueError:
        return None


# --- render --------------------------------------------------------------------------


def render_memory(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock] = (),
    *,
    now: datetime | None = None,
    archive_below: float = 0.2,
) -> str:
    """The whole file, regenerated: sections sorted by score, bad blocks kept verbatim."""
    return render_memory_lines(entries, quarantined, now=now, archive_below=archive_below)[0]


def render_memory_lines(
    entries: Sequence[MemoryEntry],
    quarantined: Sequence[QuarantinedBlock] = (),
    *,
    now: datetime | None = None,
    archive_below: float = 0.2,
) -> tuple[str, dict[str, tuple[int, int]]]:
    """`render_memory`, plus where each entry's block landed (first and last line)."""
    positions: dict[str, tuple[int, int]] = {}
    active, archived = split_sections(entries, archive_below)
    stamp = format_when(now or datetime.now(UTC))
    out = [
        TITLE,
        "",
        f"<!-- Last updated: {stamp} -->",
        f"<!-- Total entries: {len(entries)} -->",
        "",
        f"## {ACTIVE}",
        "",
    ]
    for entry in active:
        block = render_entry(entry)
        positions[entry.id] = (len(out) + 1, len(out) + len(block) - 1)
        out.extend(block)
    out.extend([f"## {ARCHIVED}", ""])
    for entry in archived:
        block = render_entry(entry)
        positions[entry.id] = (len(out) + 1, len(out) + len(block) - 1)
        out.extend(block)
    if quarantined:
        out.extend([f"## {QUARANTINED}", "", QUARANTINE_NOTE, ""])
        for kept in quarantined:
            reason = " ".join(kept.reason.replace("--", "- -").split()) or "unreadable"
            out.extend([f"<!-- quarantined: {reason} -->", kept.text, ""])
    return "\n".join(out).rstrip("\n") + "\n", positions


def split_sections(
    entries: Sequence[MemoryEntry], archive_below: float = 0.2
) -> tuple[list[MemoryEntry], list[MemoryEntry]]:
    """(Active, Archived), each sorted by score: the order of the file."""
    active = sort_entries(e for e in entries if _is_active(e, archive_below))
    archived = sort_entries(e for e in entries if not _is_active(e, archive_below))
    return active, archived


def _is_active(entry: MemoryEntry, archive_below: float) -> bool:
    if entry.archived is not None:
        return False
    return entry.pinned or entry.score >= archive_below


def render_entry(entry: MemoryEntry) -> list[str]:
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
    encoded = json.dumps(meta, ensure_ascii=False, separators=(", ", ": "))
    encoded = encoded.replace("-->", "--\\u003e")
    lines = [header, f"<!-- chatmem: {encoded} -->"]
    lines.extend(escape_line(line) for line in split_lines(entry.content))
    lines.append("")
    return lines
