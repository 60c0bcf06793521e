"""Pure parse/render of MEMORY.md in the seed's format (seed 002 §2.3, §8.2).

The header line stays exactly the seed's `### [id] category | score | last_activated | hits`;
what the seed has no room for rides in one `<!-- chatmem: {json} -->` line under it. The
parser is tolerant: a block it cannot read is returned verbatim as quarantined, never lost,
and rendered back in a `## Quarantined Blocks` section until a person fixes it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from json.encoder import encode_basestring as _encode_string

from memory_core.clock import EARLIEST, LATEST, format_when, parse_when
from memory_core.entries import (
    ArchiveReason,
    Granularity,
    Importance,
    MemoryClass,
    MemoryEntry,
    build_entry,
    is_valid_entry_id,
)
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


def split_lines(text: str) -> list[str]:
    """Lines split at LF, CRLF and CR only (what a file read in text mode gives).

    `str.splitlines` also splits at U+2028, U+0085, form feeds and the like, which may sit
    inside content or a metadata string and must survive a save unchanged.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _as_lines(text: str) -> str:
    """`text` as its lines in the file give it back: every line break a `\n`."""
    return "\n".join(split_lines(text)).strip()


def _exact_text(content: str) -> str | None:
    """The content again, for the metadata comment, when its lines in the file would not
    give it back byte for byte (None otherwise, nearly always): a carriage return, lone
    or before a newline, is a line break to every reader of a text file, so the lines
    alone would turn it into `\n`."""
    return content if "\r" in content else None


def format_score(score: float) -> str:
    return f"{score:.2f}"


# --- parse ---------------------------------------------------------------------------


def parse_memory(text: str, *, archive_below: float = 0.2) -> ParsedMemory:
    """Parse a MEMORY.md; never raises for content, only sorts what it cannot read aside.

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
            _take_block(block, block_start, block_section, result, seen_ids, archive_below)
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
) -> None:
    last = _last_filled(lines)
    if last < 0:
        return  # only blank lines: nothing to keep
    try:
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


_PARSED: OrderedDict[tuple[object, ...], MemoryEntry] = OrderedDict()
"""(section, archive_below, *block lines) -> the entry they parse to: see below."""
_PARSED_KEPT = 1 << 14
"""As `_BLOCKS_KEPT`: more blocks than the largest file, or re-parsing it would evict its
own blocks first (first in, first out)."""


def _parse_block_remembered(
    lines: list[str], section: str | None, archive_below: float
) -> MemoryEntry:
    """`_parse_block`, remembered by the block's exact text.

    The same file is parsed again and again with few blocks changed: after every write
    the index re-reads it, the TUI polls it, another process's write invalidates the
    store's cache. `_parse_block` is a pure function of its arguments and entries are
    frozen, so an unchanged block can be given the very entry it gave before (which also
    lets `_entry_block` find its rendering). Blocks that fail are not kept: they raise
    again, with the same message.
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
_EXACT_KEY = "text"
"""Metadata key of the content's exact text, written only when its lines lose something
(`_exact_text`)."""
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


def _labels(entry: MemoryEntry) -> list[tuple[str, str]]:
    """The seed 001 labels an entry carries explicitly, in the order they are written;
    an entry without them (every file older than them) renders exactly as before."""
    labels = []
    if entry.memory_class is not None:
        labels.append(("memory_class", entry.memory_class.value))
    if entry.granularity is not None:
        labels.append(("granularity", entry.granularity.value))
    if entry.importance is not None:
        labels.append(("importance", entry.importance.value))
    return labels


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
    exact = meta.get(_EXACT_KEY)
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
    return build_entry(
        entry_id,
        content,
        category,
        score,
        created_at,
        last_activated,
        scored_at,
        int(hits_text),
        source if isinstance(source, str) else None,
        float(confidence) if isinstance(confidence, _NUMBER) else None,
        _when(meta.get("expires_at")),
        pinned,
        archived,
        tuple(s for s in sessions if isinstance(s, str)) if isinstance(sessions, list) else (),
        _CLASSES.get(kind) if isinstance(kind, str) else None,
        _GRANULARITIES.get(granularity) if isinstance(granularity, str) else None,
        _IMPORTANCES.get(importance) if isinstance(importance, str) else None,
    )


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
        block = _entry_block(entry)
        positions[entry.id] = (len(out) + 1, len(out) + len(block) - 1)
        out.extend(block)
    out.extend([f"## {ARCHIVED}", ""])
    for entry in archived:
        block = _entry_block(entry)
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
    active: list[MemoryEntry] = []
    archived: list[MemoryEntry] = []
    for entry in entries:
        (active if _is_active(entry, archive_below) else archived).append(entry)
    return sort_entries(active), sort_entries(archived)


def _is_active(entry: MemoryEntry, archive_below: float) -> bool:
    if entry.archived is not None:
        return False
    return entry.pinned or entry.score >= archive_below


_BLOCKS: OrderedDict[int, tuple[MemoryEntry, tuple[str, ...]]] = OrderedDict()
"""id(entry) -> (entry, its rendered block): see `_entry_block`."""
_BLOCKS_KEPT = 1 << 14
"""More than the entries of the largest file we expect, or a save would evict its own
blocks before the next save could use them (first in, first out)."""


def _entry_block(entry: MemoryEntry) -> tuple[str, ...]:
    """`render_entry(entry)`, remembered for this very entry object.

    A save re-renders the whole file although a merge returns the unchanged entries as the
    same objects (and the store keeps the entries it wrote), so most blocks are ones
    rendered before. The key is the object's identity, not equality: equal entries can
    render differently (score `1` vs `1.0`, `-0.0` vs `0.0`), an object never does, being
    frozen. The entry is kept in the value so its id cannot be reused while cached.
    """
    key = id(entry)
    cached = _BLOCKS.get(key)
    if cached is not None and cached[0] is entry:
        return cached[1]
    block = tuple(render_entry(entry))
    if len(_BLOCKS) >= _BLOCKS_KEPT:
        with contextlib.suppress(KeyError):  # another thread emptied it meanwhile
            _BLOCKS.popitem(last=False)
    _BLOCKS[key] = (entry, block)
    return block


def clear_render_cache() -> None:
    """Forget every remembered block (for tests and cold-start measurements)."""
    _BLOCKS.clear()


_META_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
"""What `json.dumps(meta, ensure_ascii=False, separators=(", ", ": "))` builds per call."""


def _format_when(when: datetime) -> str:
    """`format_when`, with the usual case (an aware UTC datetime) done in one call."""
    if when.tzinfo is UTC and type(when) is datetime:
        return when.isoformat(timespec="seconds")[:-6] + "Z"
    return format_when(when)


def render_entry(entry: MemoryEntry) -> list[str]:
    last_activated = _format_when(entry.last_activated)
    # The first ten characters are the UTC date, as `ensure_aware(...).date()` gives it.
    header = (
        f"### [{entry.id}] {entry.category} | {format_score(entry.score)} | "
        f"{last_activated[:10]} | {entry.hits}"
    )
    created_at = _format_when(entry.created_at)
    scored_at = _format_when(entry.scored_at)
    encoded = _meta_json(entry, created_at, last_activated, scored_at)
    if encoded is None:
        meta: dict[str, object] = {
            "created_at": created_at,
            "last_activated": last_activated,
            "scored_at": scored_at,
            "score": entry.score,
        }
        if entry.source_session:
            meta["source_session"] = entry.source_session
        if entry.sessions:
            meta["sessions"] = list(entry.sessions)
        if entry.confidence is not None:
            meta["confidence"] = entry.confidence
        if entry.expires_at is not None:
            meta["expires_at"] = _format_when(entry.expires_at)
        if entry.pinned:
            meta["pinned"] = True
        if entry.archived is not None:
            meta["archived"] = entry.archived.value
        for name, value in _labels(entry):
            meta[name] = value
        exact = _exact_text(entry.content)
        if exact is not None:
            meta[_EXACT_KEY] = exact
        encoded = _META_ENCODER.encode(meta)
    encoded = encoded.replace("-->", "--\\u003e")
    lines = [header, f"<!-- chatmem: {encoded} -->"]
    lines.extend(escape_line(line) for line in split_lines(entry.content))
    lines.append("")
    return lines


def _json_number(value: object) -> str | None:
    """How `json.dumps` writes a plain finite float or int; None for anything else."""
    kind = type(value)
    if kind is float:
        return repr(value) if math.isfinite(value) else None  # type: ignore[arg-type]
    if kind is int:
        return repr(value)
    return None


def _meta_json(
    entry: MemoryEntry, created_at: str, last_activated: str, scored_at: str
) -> str | None:
    """The metadata object as `json.dumps(meta, ensure_ascii=False, separators=(", ", ": "))`
    writes it, built directly (the encoder costs about 8 us per entry).

    Covers the field types entries normally have (plain str, float or int); for anything
    else (a NaN score, a str subclass, ...) it returns None and `render_entry` uses the
    encoder. Timestamps come from `format_when` and never need escaping.
    `tests/unit/test_memory_md.py` compares both ways over random entries.
    """
    score = _json_number(entry.score)
    if score is None:
        return None
    if (
        not type(entry.created_at)
        is type(entry.last_activated)
        is type(entry.scored_at)
        is datetime
    ):
        return None  # a datetime subclass might format itself in ways that need escaping
    parts = [
        f'{{"created_at": "{created_at}", "last_activated": "{last_activated}", '
        f'"scored_at": "{scored_at}", "score": {score}'
    ]
    source = entry.source_session
    if source:
        if type(source) is not str:
            return None
        parts.append(f', "source_session": {_encode_string(source)}')
    if entry.sessions:
        if not all(type(session) is str for session in entry.sessions):
            return None
        parts.append(f', "sessions": [{", ".join(map(_encode_string, entry.sessions))}]')
    if entry.confidence is not None:
        confidence = _json_number(entry.confidence)
        if confidence is None:
            return None
        parts.append(f', "confidence": {confidence}')
    if entry.expires_at is not None:
        if type(entry.expires_at) is not datetime:
            return None
        parts.append(f', "expires_at": "{_format_when(entry.expires_at)}"')
    if entry.pinned:
        parts.append(', "pinned": true')
    if entry.archived is not None:
        reason = entry.archived.value
        if type(reason) is not str:
            return None
        parts.append(f', "archived": {_encode_string(reason)}')
    for name, value in _labels(entry):
        if type(value) is not str:
            return None
        parts.append(f', "{name}": {_encode_string(value)}')
    exact = _exact_text(entry.content)
    if exact is not None:
        if type(exact) is not str:
            return None
        parts.append(f', "{_EXACT_KEY}": {_encode_string(exact)}')
    parts.append("}")
    return "".join(parts)
