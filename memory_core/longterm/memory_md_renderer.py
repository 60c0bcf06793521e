"""Pure render of MEMORY.md (the format: `memory_md`): the whole file, regenerated.

Sections sorted by score, one metadata comment per entry, quarantined blocks kept
verbatim. Apart from the parser because writing has its own concerns: the metadata JSON
built without the encoder and blocks remembered per entry object, since a save re-renders
every entry of the file.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from json.encoder import encode_basestring as _encode_string

from memory_core.base.clock import format_when, system_clock
from memory_core.base.entries import MemoryEntry, sort_entries
from memory_core.longterm.memory_md import (
    ACTIVE,
    ARCHIVED,
    EXACT_KEY,
    QUARANTINE_NOTE,
    QUARANTINED,
    TITLE,
    QuarantinedBlock,
    block_key,
    escape_line,
    format_score,
    split_lines,
)


def _exact_text(content: str) -> str | None:
    """The content again, for the metadata comment, when its lines in the file would not
    give it back byte for byte (None otherwise, nearly always): a carriage return, lone
    or before a newline, is a line break to every reader of a text file, so the lines
    alone would turn it into `\n`."""
    return content if "\r" in content else None


def _labels(entry: MemoryEntry) -> list[tuple[str, str]]:
    """The labels (class, granularity, confidence, ...) an entry carries explicitly, then who said it in a group
    (`speaker`, and `claim_on` for another member's claim), in the order they are
    written; an entry without them (every file older than them) renders exactly as
    before."""
    labels = []
    if entry.memory_class is not None:
        labels.append(("memory_class", entry.memory_class.value))
    if entry.granularity is not None:
        labels.append(("granularity", entry.granularity.value))
    if entry.importance is not None:
        labels.append(("importance", entry.importance.value))
    if entry.speaker is not None:
        labels.append(("speaker", entry.speaker))
    if entry.claim_on is not None:
        labels.append(("claim_on", entry.claim_on))
    if entry.speaker_id is not None:
        labels.append(("speaker_id", entry.speaker_id))
    return labels


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
    keys: dict[str, bytes] | None = None,
    reuse: Callable[[MemoryEntry], tuple[str, ...] | None] | None = None,
    reuse_key: Callable[[MemoryEntry, str], bytes | None] | None = None,
) -> tuple[str, dict[str, tuple[int, int]]]:
    """`render_memory`, plus where each entry's block landed (first and last line); with
    `keys`, each entry's block key (`memory_md.block_key`) is put there too. `reuse`
    gives an entry's block when it is known already (what rendering it gives, exactly:
    the store's writer takes the unchanged entries' blocks from the file it rendered), and
    `reuse_key` the key of such a block in a section, when known (else it is hashed)."""
    positions: dict[str, tuple[int, int]] = {}
    active, archived = split_sections(entries, archive_below)
    out = head_lines(len(entries), now)
    for entry in active:
        reused = reuse(entry) if reuse is not None else None
        block = reused or entry_block(entry)
        positions[entry.id] = (len(out) + 1, len(out) + len(block) - 1)
        out.extend(block)
        if keys is not None:
            known = reuse_key(entry, ACTIVE) if reused and reuse_key is not None else None
            keys[entry.id] = known or block_key(ACTIVE, block)
    out.extend([f"## {ARCHIVED}", ""])
    for entry in archived:
        reused = reuse(entry) if reuse is not None else None
        block = reused or entry_block(entry)
        positions[entry.id] = (len(out) + 1, len(out) + len(block) - 1)
        out.extend(block)
        if keys is not None:
            known = reuse_key(entry, ARCHIVED) if reused and reuse_key is not None else None
            keys[entry.id] = known or block_key(ARCHIVED, block)
    out.extend(quarantine_lines(quarantined))
    end_lines(out)
    return "\n".join(out), positions


def head_lines(count: int, now: datetime | None) -> list[str]:
    """The lines above the first entry: the title, the stamp and count, the heading."""
    stamp = format_when(now or system_clock())
    return [
        TITLE,
        "",
        f"<!-- Last updated: {stamp} -->",
        f"<!-- Total entries: {count} -->",
        "",
        f"## {ACTIVE}",
        "",
    ]


def quarantine_lines(quarantined: Sequence[QuarantinedBlock]) -> list[str]:
    """The quarantined section's lines (none without quarantined blocks)."""
    if not quarantined:
        return []
    out = [f"## {QUARANTINED}", "", QUARANTINE_NOTE, ""]
    for kept in quarantined:
        reason = " ".join(kept.reason.replace("--", "- -").split()) or "unreadable"
        out.extend([f"<!-- quarantined: {reason} -->", kept.text, ""])
    return out


def end_lines(out: list[str]) -> None:
    """One newline at the end of the text `"\\n".join(out)` gives, as
    `.rstrip("\\n") + "\\n"` of it would, without two more copies of a text that may
    be 40 MB (in place)."""
    while len(out) > 1 and not out[-1].rstrip("\n"):
        out.pop()
    out[-1] = out[-1].rstrip("\n")
    out.append("")


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
"""id(entry) -> (entry, its rendered block): see `entry_block`."""
_BLOCKS_KEPT = 1 << 14
"""More than the entries of the largest file we expect, or a save would evict its own
blocks before the next save could use them (first in, first out)."""


def entry_block(entry: MemoryEntry) -> tuple[str, ...]:
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
            meta[EXACT_KEY] = exact
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
    `tests/unit/test_memory_md_round_trip.py` compares both ways over random entries.
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
        parts.append(f', "{EXACT_KEY}": {_encode_string(exact)}')
    parts.append("}")
    return "".join(parts)
