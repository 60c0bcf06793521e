"""The MEMORY.md format (docs/formats.md): what its parser and renderer agree on.

The header line stays exactly `### [id] category | score | last_activated | hits`;
what it has no room for rides in one `<!-- chatmem: {json} -->` line under it. The
parser is tolerant: a block it cannot read is returned verbatim as quarantined, never lost,
and rendered back in a `## Quarantined Blocks` section until a person fixes it.

The parser is `memory_md_parser`, the renderer `memory_md_renderer`; this module holds the
section names, the quarantined block, line splitting, escaping and the score's format
they share, so neither side depends on the other.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

TITLE = "# Agent Memory"
ACTIVE = "Active Memories"
ARCHIVED = "Archived Memories"
QUARANTINED = "Quarantined Blocks"
QUARANTINE_NOTE = (
    "<!-- Blocks below could not be parsed and are kept verbatim. "
    "Fix a block and it becomes an entry again. -->"
)

_NEEDS_ESCAPE = re.compile(r"^\\*(#|<!-- chatmem:)")

EXACT_KEY = "text"
"""Metadata key of the content's exact text, written only when its lines lose something
(`memory_md_renderer`'s `_exact_text`)."""


@dataclass(frozen=True, slots=True)
class QuarantinedBlock:
    """Text the parser could not turn into an entry, kept verbatim."""

    text: str
    line: int = field(default=0, compare=False)
    reason: str = field(default="", compare=False)


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


def format_score(score: float) -> str:
    return f"{score:.2f}"


def block_key(section: str | None, lines: Sequence[str]) -> bytes:
    """What a block of lines parses from: its section and its lines up to the last one
    that is not blank (the blank lines after a block change nothing of its entry). Equal
    keys parse to equal entries, wherever the block stands; the parse cache finds the
    unchanged blocks of an edited file by them (`parse_cache.py`)."""
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    head = "" if section is None else section
    text = head + "\x00" + "\n".join(lines[:end])
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
