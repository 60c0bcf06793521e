"""The write that copies the old file's unchanged blocks as bytes (`memory_md_bytes`)
gives exactly what the render by lines gives (`render_memory_lines` reusing the same
blocks): the same bytes, the same lines per entry, the same block keys, over random
sequences of captures, edits, removals, reorders and archivals (hypothesis); and where
the old file is not as its parse says (a hand edit, CRLF, no final newline, ...) it
either still matches or declines, and the store renders by lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from random import Random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.base.entries import ArchiveReason, MemoryEntry
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_bytes import _line_at, render_memory_bytes
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.memory_md_renderer import (
    render_memory,
    render_memory_lines,
    split_sections,
)
from memory_core.longterm.store_versions import (
    blocks_of,
    digest_of,
    line_index,
    line_offset,
    rendered_blocks,
    stamp_of,
)
from tests.unit.memory_md_support import LATER, NOW
from tests.unit.test_memory_md_round_trip import contents, entries, unit
from tests.unit.test_parse_cache import entry

QUARANTINED = [
    "### [broken] fact | not a score | 2026-01-01 | 1\nsome text",
    "free text a person wrote\n\n",
    "### [\n\n\n",
    "## Archived Memories",
]

OPERATIONS = ["capture", "edit", "rescore", "remove", "copy", "archive", "shuffle", "restore"]

DAMAGES = [
    None,
    "crlf",
    "no final newline",
    "blank lines at the end",
    "blank line inside a block",
    "line removed",
    "header touched",
]


@dataclass(frozen=True)
class Write:
    """A file the renderer wrote (then maybe damaged by hand), and what a write does to
    the entries parsed from it."""

    items: list[MemoryEntry]
    quarantined: list[str]
    damage: str | None
    operations: list[tuple[str, int]]
    new: list[MemoryEntry]
    texts: list[str]
    scores: list[float]
    with_keys: bool


@st.composite
def writes(draw: st.DrawFn, *, damages: list[str | None]) -> Write:
    items = draw(st.lists(entries(), max_size=8, unique_by=lambda e: e.id))
    count = draw(st.integers(0, 6))
    return Write(
        items=items,
        quarantined=draw(st.lists(st.sampled_from(QUARANTINED), max_size=2)),
        damage=draw(st.sampled_from(damages)),
        operations=draw(
            st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 10**6)), max_size=6)
        ),
        new=draw(st.lists(entries(), min_size=count, max_size=count)),
        texts=draw(st.lists(contents, min_size=count, max_size=count)),
        scores=draw(st.lists(unit, min_size=count, max_size=count)),
        with_keys=draw(st.booleans()),
    )


def damaged(text: str, damage: str | None, seed: int) -> str:
    """The file as a person (or another program) may have left it."""
    lines = text.split("\n")
    picked = Random(seed).randrange(len(lines))
    if damage == "crlf":
        return text.replace("\n", "\r\n")
    if damage == "no final newline":
        return text.rstrip("\n")
    if damage == "blank lines at the end":
        return text + "\n\n\n"
    if damage == "blank line inside a block":
        lines.insert(picked, "")
    elif damage == "line removed":
        del lines[picked]
    elif damage == "header touched":
        headers = [n for n, line in enumerate(lines) if line.startswith("### [")]
        if headers:
            lines[headers[picked % len(headers)]] += " "
    return "\n".join(lines)


def changed(parsed: list[MemoryEntry], write: Write) -> list[MemoryEntry]:
    """The parse's entries after the write's operations: untouched entries stay the very
    objects of the parse (their blocks are the ones reused)."""
    out = list(parsed)
    fresh = iter(range(len(write.new)))
    taken = {e.id for e in out}
    for operation, number in write.operations:
        at = number % (len(out) + 1)
        has = bool(out) and at < len(out)
        if operation == "capture":
            made = next(fresh, None)
            if made is not None and write.new[made].id not in taken:
                taken.add(write.new[made].id)
                out.insert(at, write.new[made])
        elif operation == "edit" and has:
            made = next(fresh, None)
            if made is not None:
                out[at] = out[at].with_(content=write.texts[made])
        elif operation == "rescore" and has:
            made = next(fresh, None)
            if made is not None:
                out[at] = out[at].with_(score=write.scores[made])
        elif operation == "remove" and has:
            del out[at]
        elif operation == "copy" and has:
            out[at] = out[at].with_()  # equal, but another object: rendered again
        elif operation == "archive" and has:
            out[at] = out[at].with_(archived=ArchiveReason.MANUAL, pinned=False)
        elif operation == "restore" and has:
            out[at] = out[at].with_(archived=None, score=1.0)
        elif operation == "shuffle":
            Random(number).shuffle(out)
    return out


def both_ways(
    data: bytes, write: Write, parsed_from: bytes | None = None
) -> tuple[tuple[object, ...] | None, tuple[object, ...]]:
    """(the byte render or None, the render by lines), each with the entries' lines, the
    entries in the file's order and their keys; the parse read from `parsed_from` when
    given (another file than the one whose blocks are reused)."""
    parsed = parse_memory((parsed_from or data).decode("utf-8"), known={})
    keys = [parsed.keys[e.id] for e in parsed.entries] if write.with_keys else None
    new = changed(parsed.entries, write)
    fast_keys: dict[str, bytes] = {}
    fast = render_memory_bytes(
        new, parsed.quarantined, old=blocks_of(data, parsed, keys), now=LATER, keys=fast_keys
    )
    old = blocks_of(data, parsed, keys)
    slow_keys: dict[str, bytes] = {}
    text, lines = render_memory_lines(
        new, parsed.quarantined, now=LATER, keys=slow_keys, reuse=old, reuse_key=old.key
    )
    active, archived = split_sections(new)
    slow = (text.encode("utf-8"), lines, active + archived, slow_keys)
    return (None if fast is None else (*fast[:3], fast_keys)), slow


def rendered(write: Write) -> bytes:
    kept = [QuarantinedBlock(text, 0, "unreadable") for text in write.quarantined]
    return render_memory(write.items, kept, now=NOW).encode("utf-8")


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes(damages=[None]))
def test_copying_the_unchanged_blocks_gives_what_rendering_by_lines_gives(write: Write) -> None:
    fast, slow = both_ways(rendered(write), write)
    assert fast is not None  # a file the renderer wrote: every block is where its parse says
    assert fast == slow


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes(damages=DAMAGES), st.integers(0, 1000))
def test_a_file_not_as_the_renderer_wrote_it_still_matches_or_is_declined(
    write: Write, seed: int
) -> None:
    data = damaged(rendered(write).decode("utf-8"), write.damage, seed).encode("utf-8")
    fast, slow = both_ways(data, write)
    assert fast is None or fast == slow


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes(damages=DAMAGES), st.integers(0, 1000))
def test_a_parse_of_another_file_still_matches_or_is_declined(write: Write, seed: int) -> None:
    """The parse read from the file as the renderer wrote it, the blocks taken from the
    file as a person then left it: every block the parse places elsewhere is caught."""
    data = rendered(write)
    left = damaged(data.decode("utf-8"), write.damage, seed).encode("utf-8")
    fast, slow = both_ways(left, write, parsed_from=data)
    assert fast is None or fast == slow


def test_a_block_the_parse_misplaces_is_declined() -> None:
    """The parse's lines for a block that is not there (a parse of another file)."""
    items = [entry(n, f"line {n}\nand more") for n in range(3)]
    data = render_memory(items, now=NOW).encode("utf-8")
    parsed = parse_memory(data.decode("utf-8"), known={})
    first, last = parsed.lines[items[1].id]
    parsed.lines[items[1].id] = (first + 1, last + 1)
    keys: dict[str, bytes] = {"stale": b"x"}
    assert render_memory_bytes(parsed.entries, [], old=blocks_of(data, parsed), keys=keys) is None
    assert keys == {}  # the caller renders by lines into the same dict


def test_lines_and_offsets_are_what_splitting_finds() -> None:
    data = b"# x\n\n### [a] x\n\\### [b]\n\n### [c] y\n\n## Archived Memories\n### [d]"
    split = data.split(b"\n")
    starts = [sum(len(line) + 1 for line in split[:n]) for n in range(len(split))]
    blanks = [starts[1], starts[4]]  # the empty lines before the headers of a and c
    firsts = [3, 6]  # the headers' lines, 1-based
    for offset in range(len(data) + 1):
        assert _line_at(data, blanks, firsts, offset) == data.count(b"\n", 0, offset)
    for line in [b"## Archived Memories", b"### [d]", b"# x", b"nowhere", b"\\### [b]", b""]:
        want = split.index(line) if line in split else None
        assert line_index(data, line) == want
        assert line_offset(data, line) == (None if want is None else starts[want])


def test_the_blocks_are_read_when_the_stamp_or_the_hash_vouches(tmp_path: Path) -> None:
    """`rendered_blocks`: the file's bytes are taken when they hash to the parse's digest,
    or without hashing when the file still shows the stamp the digest was read under;
    a file changed since (another stamp, other bytes) gives nothing."""
    items = [entry(n, f"line {n}") for n in range(3)]
    data = render_memory(items, now=NOW).encode("utf-8")
    path = tmp_path / "MEMORY.md"
    path.write_bytes(data)
    parsed = parse_memory(data.decode("utf-8"), known={})
    stamp = stamp_of(tmp_path, path)
    digest = digest_of(data)
    for known in (None, stamp):
        found = rendered_blocks(tmp_path, path, digest, parsed, stamp=known)
        assert found is not None and found.data == data
    assert rendered_blocks(tmp_path, path, b"another version", parsed) is None
    assert rendered_blocks(tmp_path, path, None, parsed, stamp=stamp) is None
    path.write_bytes(data.replace(b"line 1", b"line 19"))
    assert stamp is not None and stamp_of(tmp_path, path) != stamp  # another size
    assert rendered_blocks(tmp_path, path, digest, parsed, stamp=stamp) is None
    assert rendered_blocks(tmp_path, path, digest, parsed) is None
