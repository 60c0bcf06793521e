"""Pure parse of MEMORY.md (the format: `memory_md`); never raises for content.

A block it cannot read is returned verbatim as a `QuarantinedBlock`, never lost. Apart
from the renderer because reading is where the tolerance lives (hand edits, moved
sections, broken metadata) and the caches differ: the parser remembers blocks by their
text, the renderer by the entry object.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memory_core.base.clock import EARLIEST, LATEST, parse_when
from memory_core.base.entries import (
    ArchiveReason,
    EntryFields,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    build_entry,
    is_valid_entry_id,
)
from memory_core.longterm.memory_md import (
    ACTIVE,
    ARCHIVED,
    EXACT_KEY,
    QUARANTINE_NOTE,
    QUARANTINED,
    TITLE,
    QuarantinedBlock,
    block_key,
    format_score,
    split_lines,
)

_HEADER = re.compile(
    r"^### \[(?P<id>[^\]]*)\]\s*(?P<category>[^|]*?)\s*\|\s*(?P<score>[^|]*?)\s*\|"
    r"\s*(?P<when>[^|]*?)\s*\|\s*(?P<hits>[^|]*?)\s*$"
)
_META = re.compile(r"^<!-- chatmem: (?P<json>\{.*\}) -->\s*$")
_SECTION = re.compile(r"^## (?P<name>.+?)\s*$")
_DELIMITER = re.compile(r"^<!-- quarantined(?::.*)? -->\s*$")
_FILE_COMMENT = re.compile(r"^<!-- (Last updated|Total entries):.*-->\s*$")
_ESCAPED = re.compile(r"^\\(\\*)(#|<!-- chatmem:)")
_CATEGORY = re.compile(r"^[\w-]{1,40}$")


@dataclass(slots=True)
class ParsedMemory:
    entries: list[MemoryEntry] = field(default_factory=list)
    quarantined: list[QuarantinedBlock] = field(default_factory=list)
    lines: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    """Entry id → (first, last) line of its block in the file, for `path:line` answers."""
    keys: dict[str, bytes] = field(default_factory=dict, compare=False)
    """Entry id → its block's key (`block_key`), when the parse was asked for them: what a
    later parse of the changed file looks its unchanged blocks up by (`parse_cache.py`)."""
    reused: int = field(default=0, compare=False)
    """Blocks whose entry came from `known` instead of being parsed."""


def _as_lines(text: str) -> str:
    """`text` as its lines in the file give it back: every line break a `\n`."""
    return "\n".join(split_lines(text)).strip()


def parse_memory(
    text: str, *, archive_below: float = 0.2, known: Mapping[bytes, MemoryEntry] | None = None
) -> ParsedMemory:
    """Parse a MEMORY.md; never raises for content, only sorts what it cannot read aside.

    With `known` (block key → entry, from an earlier parse made with the same
    `archive_below`), each block is keyed (`ParsedMemory.keys`) and a block found there
    is not parsed again: a file of 100 000 entries with one edited is read at the cost
    of splitting and hashing its blocks, and of parsing one. Give `{}` to have the keys
    of a first parse.

    Lines not starting with `#` (most of a file) are sorted out first: `_SECTION` and a
    block header both need a leading `#`, and `_DELIMITER` a leading `<`.
    """
    result = ParsedMemory()
    seen_ids: set[str] = set()
    section: str | None = None
    block: list[str] = []
    block_start = 0
    block_section: str | None = None

    def flush() -> None:
        nonlocal block
        if block:
            _take_block(block, block_start, block_section, result, seen_ids, archive_below, known)
        block = []

    for number, line in enumerate(split_lines(text), start=1):
        if line[:1] != "#":
            # Not a heading (most lines): only the quarantine delimiter, block lines and
            # furniture to tell apart.
            if section == QUARANTINED and _DELIMITER.match(line):
                # Each quarantined block is introduced by its own delimiter, so stray
                # text never merges into the block before it.
                flush()
            elif block:
                block.append(line)
            elif not _is_file_furniture(line, section):
                block, block_start, block_section = [line], number, None
            continue
        heading = _SECTION.match(line) if line.startswith("## ") else None
        if heading:
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


def _last_filled(lines: list[str]) -> int:
    """Index of the last line that is not blank, -1 if every line is."""
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].strip():
            return index
    return -1


def _take_block(
    lines: list[str],
    start: int,
    section: str | None,
    result: ParsedMemory,
    seen_ids: set[str],
    archive_below: float,
    known: Mapping[bytes, MemoryEntry] | None = None,
) -> None:
    last = _last_filled(lines)
    if last < 0:
        return  # only blank lines: nothing to keep
    key = b""
    found = None
    if known is not None:
        key = block_key(section, lines)
        found = known.get(key)
    try:
        if found is not None:
            entry = found
            result.reused += 1
        else:
            entry = _parse_block_remembered(lines, section, archive_below)
    except ValueError as exc:
        verbatim = "\n".join(lines).strip("\n")
        result.quarantined.append(QuarantinedBlock(verbatim, start, str(exc)))
        return
    if entry.id in seen_ids:
        verbatim = "\n".join(lines).strip("\n")
        result.quarantined.append(QuarantinedBlock(verbatim, start, f"duplicate id {entry.id}"))
        return
    seen_ids.add(entry.id)
    result.entries.append(entry)
    result.lines[entry.id] = (start, start + last)
    if known is not None:
        result.keys[entry.id] = key


_PARSED: OrderedDict[tuple[object, ...], MemoryEntry] = OrderedDict()
"""(section, archive_below, *block lines) -> the entry they parse to: see below."""
_PARSED_KEPT = 1 << 14
"""As the renderer's `_BLOCKS_KEPT`: more blocks than the largest file, or re-parsing it
would evict its own blocks first (first in, first out)."""


def _parse_block_remembered(
    lines: list[str], section: str | None, archive_below: float
) -> MemoryEntry:
    """`_parse_block`, remembered by the block's exact text.

    The same file is parsed again and again with few blocks changed: after every write
    the index re-reads it, the TUI polls it, another process's write invalidates the
    store's cache. `_parse_block` is a pure function of its arguments and entries are
    frozen, so an unchanged block can be given the very entry it gave before (which also
    lets the renderer's `entry_block` find its rendering). Blocks that fail are not
    kept: they raise again, with the same message.
    """
    key = (section, archive_below, *lines)
    entry = _PARSED.get(key)
    if entry is None:
        entry = _parse_block(lines, section, archive_below)
        if len(_PARSED) >= _PARSED_KEPT:
            with contextlib.suppress(KeyError):  # another thread emptied it meanwhile
                _PARSED.popitem(last=False)
        _PARSED[key] = entry
    return entry


def clear_parse_cache() -> None:
    """Forget every remembered block (for tests and cold-start measurements)."""
    _PARSED.clear()


_META_PREFIX = "<!-- chatmem:"
_NUMBER = (int, float)
"""`int | float` for isinstance, as a constant: the union would be built on every call."""
_DATES: dict[str, datetime] = {}
_DATES_KEPT = 4096


def _header_date(text: str) -> datetime:
    """`parse_when` of a header's date, remembered: a file has far fewer distinct days than
    entries, and datetimes are immutable. Only successes are kept (errors propagate)."""
    when = _DATES.get(text)
    if when is None:
        when = parse_when(text)
        if len(_DATES) >= _DATES_KEPT:
            _DATES.clear()
        _DATES[text] = when
    return when


_ARCHIVE_REASONS: dict[str, ArchiveReason] = {reason.value: reason for reason in ArchiveReason}
_CLASSES: dict[str, MemoryClass] = {kind.value: kind for kind in MemoryClass}
_GRANULARITIES: dict[str, Granularity] = {kind.value: kind for kind in Granularity}
_IMPORTANCES: dict[str, Importance] = {kind.value: kind for kind in Importance}


def _parse_block(lines: list[str], section: str | None, archive_below: float) -> MemoryEntry:
    header = _HEADER.match(lines[0])
    if header is None:
        raise ValueError("header is not `### [id] category | score | last_activated | hits`")
    entry_id_text, category_text, score_text, when_text, hits_text = header.groups()
    entry_id = entry_id_text.strip()
    if not is_valid_entry_id(entry_id):
        raise ValueError(f"bad id {entry_id!r}")
    category = category_text.strip()
    if not _CATEGORY.match(category):
        raise ValueError(f"bad category {category!r}")
    try:
        header_score = float(score_text)
    except ValueError:
        raise ValueError(f"score {score_text!r} is not a number") from None
    if not 0.0 <= header_score <= 1.0:
        raise ValueError(f"score {score_text} is outside [0, 1]")
    header_when = _header_date(when_text)
    if not hits_text.isdigit():
        raise ValueError(f"hits {hits_text!r} is not a whole number")

    body = lines[1:]
    meta: dict[str, object] = {}
    if body and body[0].startswith(_META_PREFIX):
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
    # Only a line starting with a backslash can be an escaped one (`_ESCAPED`).
    content = "\n".join(
        [line[1:] if line[:1] == "\\" and _ESCAPED.match(line) else line for line in body]
    ).strip()
    if not content:
        raise ValueError("entry has no content")
    exact = meta.get(EXACT_KEY)
    if isinstance(exact, str) and _as_lines(exact) == content:
        content = exact  # unless a person edited the lines since: then they win

    score = header_score
    meta_score = meta.get("score")
    if isinstance(meta_score, _NUMBER) and format_score(meta_score) == format_score(score):
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
    if isinstance(flag, str):
        archived = _ARCHIVE_REASONS.get(flag)
    if section == ACTIVE:
        # Moved to Active by hand: the section wins over the flag.
        archived = None
    elif section == ARCHIVED and archived is None and (score >= archive_below or pinned):
        # Moved to Archived by hand although its score would keep it Active.
        archived = ArchiveReason.MANUAL
    sessions = meta.get("sessions")
    confidence = meta.get("confidence")
    source = meta.get("source_session")
    kind = meta.get("memory_class")
    granularity = meta.get("granularity")
    importance = meta.get("importance")
    speaker = meta.get("speaker")
    claim_on = meta.get("claim_on")
    speaker_id = meta.get("speaker_id")
    fields = EntryFields.blank()
    fields.id = entry_id
    fields.content = content
    fields.category = category
    fields.score = score
    fields.created_at = created_at
    fields.last_activated = last_activated
    fields.scored_at = scored_at
    fields.hits = int(hits_text)
    fields.source_session = source if isinstance(source, str) else None
    fields.confidence = float(confidence) if isinstance(confidence, _NUMBER) else None
    fields.expires_at = _when(meta.get("expires_at"))
    fields.pinned = pinned
    fields.archived = archived
    fields.sessions = (
        tuple(s for s in sessions if isinstance(s, str)) if isinstance(sessions, list) else ()
    )
    fields.memory_class = _CLASSES.get(kind) if isinstance(kind, str) else None
    fields.granularity = _GRANULARITIES.get(granularity) if isinstance(granularity, str) else None
    fields.importance = _IMPORTANCES.get(importance) if isinstance(importance, str) else None
    fields.speaker = speaker if isinstance(speaker, str) and speaker.strip() else None
    fields.claim_on = (
        claim_on if isinstance(claim_on, str) and is_valid_entry_id(claim_on) else None
    )
    fields.speaker_id = speaker_id if isinstance(speaker_id, str) and speaker_id.strip() else None
    return build_entry(fields)


def _when(value: object) -> datetime | None:
    """A metadata timestamp, None when missing or unreadable.

    `format_when`'s own form (`2026-06-01T12:00:00Z`, what this module writes) is read by
    `datetime.fromisoformat` directly, which gives exactly what `parse_when` gives for it
    (UTC, the same tzinfo object) without its strip, suffix rewrite and conversion.
    """
    if not isinstance(value, str):
        return None
    if len(value) == 20 and value[19] == "Z" and value[10] == "T":
        try:
            when: datetime | None = datetime.fromisoformat(value)
        except ValueError:
            when = None  # not that form after all: parse_when below has the last word
        if when is not None and when.tzinfo is UTC and EARLIEST <= when <= LATEST:
            return when
    try:
        return parse_when(value)
    except ValueError:
        return None
