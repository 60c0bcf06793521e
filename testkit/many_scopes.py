"""The workspace of a bot with many users, written straight to disk in the product's layout.

One scope per person (`telegram:peer:<n>`), each with two long-term memories and one daily
note, as the issue describes a bot with per-peer memory. A generator that called the core
once per scope would take hours at 100 000 scopes; this one writes the files directly
(about a minute at 100 000), in the layout and format of docs/formats.md "Files": a
scope's directory `memory/scopes/<slug>/` with its `.scope` key file, `LONG_TERM.md` as
`memory_md_renderer.render_memory` writes it (a test checks the two agree), and a daily
note `YYYY-MM-DD.md`. Every file is dated an hour back, past any "racy" window, as a
workspace a bot restarts into. No index: each tree under test builds its own.

Pure standard library: the text is the same for every revision, and the generator needs
no tree's code. `bench/many_scopes_bench.py` measures with it; tests check that what it
writes is the product's format and reads as a real workspace.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

KEY = "telegram:peer:{n}"
SLUG = "telegram_peer_{n}"
AGE_SECONDS = 3600
NOW = datetime(2026, 11, 1, 9, 30, 0, tzinfo=UTC)
"""Fixed, so the generated files (and what a search finds in them) never change."""

_NAMES = [
    "Alice",
    "Bob",
    "Chen",
    "Dana",
    "Emil",
    "Fang",
    "Gus",
    "Hana",
    "Ivan",
    "Jun",
    "Kai",
    "Lena",
    "Mia",
    "Noor",
    "Omar",
    "Pia",
]
_LIKES = (
    "green tea",
    "black coffee",
    "hiking on weekends",
    "spicy noodles",
    "jazz records",
    "board games",
    "long bike rides",
    "dumplings",
    "science fiction",
    "swimming before work",
)
_WORK = (
    "works at the bakery on Main street",
    "is a nurse at the city hospital",
    "teaches math at the middle school",
    "writes software for a bank",
    "runs a small flower shop",
    "studies law at the university",
    "drives a delivery van",
    "is an architect in the old town",
)
_NOTES = (
    "asked about the project deadline on Friday",
    "talked about the weekend trip to the lake",
    "wants a reminder for the dentist appointment",
    "shared a recipe for lemon cake",
    "mentioned the meeting moved to Thursday",
    "said the new apartment is near the station",
)
QUERY = "tea coffee deadline"
"""What the bench searches for in the measured scope (some scopes match, some not)."""


def key(n: int) -> str:
    return KEY.format(n=n)


def entry_id(n: int, j: int) -> str:
    return hashlib.blake2b(f"{n}/{j}".encode(), digest_size=4).hexdigest()


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _block(eid: str, category: str, score: float, when: datetime, text: str) -> str:
    meta = {
        "created_at": _stamp(when),
        "last_activated": _stamp(when),
        "scored_at": _stamp(when),
        "score": score,
        "importance": "medium",
    }
    return (
        f"### [{eid}] {category} | {score:.2f} | {when.date().isoformat()} | 0\n"
        f"<!-- chatmem: {json.dumps(meta)} -->\n{text}\n\n"
    )


def memories(n: int) -> list[tuple[str, str, float, datetime, str]]:
    """Scope n's two memories: (id, category, score, when, text), best first."""
    rng = random.Random(n)
    name = rng.choice(_NAMES)
    when = NOW - timedelta(days=rng.randrange(1, 30), minutes=rng.randrange(600))
    return [
        (entry_id(n, 0), "preference", 0.70, when, f"{name} likes {rng.choice(_LIKES)}"),
        (entry_id(n, 1), "fact", 0.60, when, f"{name} {rng.choice(_WORK)}"),
    ]


def long_term_text(entries: list[tuple[str, str, float, datetime, str]]) -> str:
    """LONG_TERM.md (or MEMORY.md) of `entries` as the product's renderer writes it."""
    head = (
        f"# Agent Memory\n\n<!-- Last updated: {_stamp(NOW)} -->\n"
        f"<!-- Total entries: {len(entries)} -->\n\n## Active Memories\n\n"
    )
    return head + "".join(_block(*entry) for entry in entries) + "## Archived Memories\n"


def daily_note(n: int) -> tuple[str, str]:
    """Scope n's daily note: (file name, text)."""
    rng = random.Random(-n - 1)
    day = (NOW - timedelta(days=rng.randrange(1, 30))).date().isoformat()
    clock = f"{rng.randrange(8, 23):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
    return f"{day}.md", f"# {day}\n\n- {clock} {rng.choice(_NOTES)}\n"


def _write(path: Path, text: str, stamp: float) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, (stamp, stamp))


def generate(root: Path, scopes: Iterable[int]) -> int:
    """Write a workspace at `root` (which must not exist) holding an empty main scope and
    the scopes numbered `scopes`; returns how many were written."""
    stamp = time.time() - AGE_SECONDS
    root.mkdir(parents=True)
    _write(root / "MEMORY.md", long_term_text([]), stamp)
    base = root / "memory" / "scopes"
    base.mkdir(parents=True)
    count = 0
    for n in scopes:
        folder = base / SLUG.format(n=n)
        folder.mkdir()
        _write(folder / ".scope", key(n), stamp)
        _write(folder / "LONG_TERM.md", long_term_text(memories(n)), stamp)
        name, text = daily_note(n)
        _write(folder / name, text, stamp)
        count += 1
    return count
