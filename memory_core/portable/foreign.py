"""What other memory tools leave behind, read as chatmem's export records.

- A workspace directory laid out as chatmem's main scope is (`MEMORY.md` and
  `memory/YYYY-MM-DD.md`), as other agents' memory folders are too. `MEMORY.md` is read
  by chatmem's own tolerant parser; of a block it cannot read, each Markdown list item
  becomes a memory (its category from the heading above it when that names one), and
  whatever else the block holds is quarantined verbatim, never dropped. Daily files are
  read as chatmem reads its own (hand-written lines are notes too).
- A mem0 export: a JSON list of objects with `user_id`, `memory` and `created_at`. Each
  user's memories go to the scope `peer:<user_id>` (the key a per-peer bot gives that
  person), or, for a file of one user, to the scope named with `--scope`.

A memory made here gets an id from its text (`content_id`), so reading the same source
twice gives the same records and an import of them adds nothing the second time.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from memory_core.base import safe_files
from memory_core.base.clock import parse_when
from memory_core.base.entries import CATEGORIES, Importance, MemoryEntry
from memory_core.base.errors import ScopeError
from memory_core.base.scope import ScopeKey, printable_key
from memory_core.longterm.matching import normalize_content
from memory_core.longterm.memory_md import QuarantinedBlock
from memory_core.longterm.memory_md_parser import parse_memory
from memory_core.longterm.scoring import initial_score
from memory_core.notes.daily import parse_notes
from memory_core.portable.records import DAILY_FILE, ImportRefused, Record, entry_data

_ITEM = re.compile(r"^\s*[-*+]\s+(?:\[[ xX]\]\s+)?(?P<text>\S.*)$")
_HEADING = re.compile(r"^#{1,6}\s+(?P<name>.+?)\s*#*\s*$")
MEM0_BYTES = 1 << 30


def content_id(text: str) -> str:
    """A memory's id from its text: the same text, the same id, in every import."""
    return "m" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:11]


@dataclass
class Placement:
    """Which incoming entries a scope lacks, under which ids (`place`)."""

    added: list[MemoryEntry] = field(default_factory=list)
    present: int = 0
    expired: int = 0


def place(
    held: Iterable[MemoryEntry],
    incoming: Iterable[MemoryEntry],
    expired: Callable[[MemoryEntry], bool] | None = None,
) -> Placement:
    """Pure: the entries of `incoming` the scope lacks (by normalised text), each under
    its own id or, when the scope uses that id for another text, one made from both (so
    the same import places it the same way again); those present, and those `expired`
    says are past keeping, only counted."""
    held = list(held)
    texts = {normalize_content(e.content) for e in held}
    used = {e.id for e in held}
    placement = Placement()
    for entry in incoming:
        text = normalize_content(entry.content)
        if text in texts:
            placement.present += 1
            continue
        if expired is not None and expired(entry):
            placement.expired += 1
            continue
        placed = entry
        if entry.id in used:
            placed = entry.with_(id=content_id(f"{entry.id}\n{entry.content}"))
        texts.add(text)
        used.add(placed.id)
        placement.added.append(placed)
    return placement


def new_entry(text: str, category: str, created: datetime, now: datetime) -> MemoryEntry:
    """An imported memory: scored as a new one of medium importance, from now (an old
    `created_at` must not make it decay away at the next write)."""
    return MemoryEntry(
        id=content_id(text),
        content=text,
        category=category,
        score=initial_score(Importance.MEDIUM),
        created_at=created,
        last_activated=now,
        scored_at=now,
        hits=0,
    )


def category_of(heading: str) -> str:
    """The category a heading names ("Preferences" → preference), else fact."""
    words = re.findall(r"[a-z]+", heading.lower())
    for word in words:
        for category in CATEGORIES:
            if word in (category, category + "s", category + "es"):
                return category
    return "fact"


def lenient(block: QuarantinedBlock) -> tuple[list[str], list[tuple[str, str]], str]:
    """Pure: a block the parser could not read, as (list items, (item, category) pairs,
    the rest). The rest keeps every line that is not a list item, in order, so nothing
    is lost; a heading goes with it only when no list item followed it."""
    items: list[tuple[str, str]] = []
    rest: list[str] = []
    heading: str | None = None
    heading_used = False
    for raw in block.text.splitlines():
        head = _HEADING.match(raw)
        item = _ITEM.match(raw)
        if head:
            if heading is not None and not heading_used:
                rest.append(heading)
            heading, heading_used = raw, False
        elif item:
            items.append((item.group("text").strip(), category_of(heading or "")))
            heading_used = True
        elif raw.startswith(("  ", "\t")) and items and not rest[-1:]:
            text, category = items[-1]
            items[-1] = (f"{text}\n{raw.strip()}", category)
        elif raw.strip():
            rest.append(raw)
    if heading is not None and not heading_used:
        rest.append(heading)
    return [t for t, _ in items], items, "\n".join(rest).strip()


def long_term_records(text: str, scope: ScopeKey, now: datetime) -> list[Record]:
    """A foreign long-term file's entries and quarantined blocks as records."""
    parsed = parse_memory(text)
    records = [Record("entry", scope, {"entry": entry_data(e)}) for e in parsed.entries]
    for block in parsed.quarantined:
        _, items, rest = lenient(block)
        for item, category in items:
            entry = new_entry(item, category, now, now)
            records.append(Record("entry", scope, {"entry": entry_data(entry)}))
        if rest:
            records.append(Record("quarantined", scope, {"text": rest, "reason": block.reason}))
    return records


def workspace_records(source: Path, scope: ScopeKey, now: datetime) -> list[Record]:
    """A workspace-like directory's records for `scope` (blocking). Only `MEMORY.md` and
    `memory/YYYY-MM-DD.md` are read, through the same boundary as a workspace's files
    (`safe_files`, rooted at `source`): a link that leads out of it, a FIFO or a device
    is refused, never followed."""
    records: list[Record] = []
    try:
        text = safe_files.read_text(source, source / "MEMORY.md", safe_files.LONG_TERM_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        text = ""
    except UnicodeDecodeError:
        raise ImportRefused(
            f"{source / 'MEMORY.md'} is not UTF-8 text (nothing was imported)"
        ) from None
    if text:
        records.extend(long_term_records(text, scope, now))
    for item in sorted(safe_files.entries(source, source / "memory"), key=lambda i: i.name):
        match = DAILY_FILE.match(item.name)
        if not match or not item.is_file(follow_symlinks=False):
            continue
        try:
            day = date.fromisoformat(match.group(1))
        except ValueError:
            continue
        notes = safe_files.read_text(source, source / "memory" / item.name, safe_files.NOTE_BYTES)
        for note in parse_notes(notes, day):
            data = {"date": day.isoformat(), "time": note.time, "text": note.text}
            records.append(Record("note", scope, data))
    if not records:
        raise ImportRefused(
            f"{source} holds no MEMORY.md and no memory/YYYY-MM-DD.md notes (nothing was imported)"
        )
    return records


def mem0_scope(user_id: str) -> ScopeKey:
    """The documented rule: a mem0 user is the per-peer scope of that id."""
    return ScopeKey.parse(f"peer:{user_id}")


def mem0_records(raw: Any, scope: ScopeKey | None, now: datetime) -> list[Record]:
    """A mem0 export's memories as records. Each object needs `user_id` and `memory`;
    `created_at` is kept when it parses. `scope` puts a file of one user into that
    scope; a file of several users is refused with it (they would be mixed)."""
    items = raw.get("results", raw.get("memories")) if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ImportRefused("not a mem0 export: expected a JSON list of memories")
    users: dict[str, ScopeKey] = {}
    records: list[Record] = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise ImportRefused(f"mem0 item {number}: not an object (nothing was imported)")
        user, memory = item.get("user_id"), item.get("memory")
        if not isinstance(user, str) or not user.strip():
            raise ImportRefused(f"mem0 item {number}: no user_id (nothing was imported)")
        if not isinstance(memory, str) or not memory.strip():
            raise ImportRefused(f"mem0 item {number}: no memory text (nothing was imported)")
        if user not in users:
            try:
                users[user] = scope or mem0_scope(user)
            except ScopeError as exc:
                raise ImportRefused(
                    f"mem0 item {number}: user_id {user!r}: {exc} (nothing was imported)"
                ) from None
            other = next((u for u, k in users.items() if k == users[user] and u != user), None)
            if other is not None and scope is None:
                raise ImportRefused(
                    f"mem0 item {number}: user_ids {printable_key(other)!r} and "
                    f"{printable_key(user)!r} are one scope key ({printable_key(users[user])}): "
                    "importing both would mix them (nothing was imported)"
                )
        created = _created(item.get("created_at"), now)
        category = _mem0_category(item.get("categories"))
        entry = new_entry(memory.strip(), category, created, now)
        records.append(Record("entry", users[user], {"entry": entry_data(entry)}))
    if scope is not None and len(users) > 1:
        shown = ", ".join(sorted(printable_key(u) for u in users)[:5])
        raise ImportRefused(
            f"the file holds {len(users)} users ({shown}): --scope would mix them; "
            "leave it out to import each into peer:<user_id> (nothing was imported)"
        )
    return records


def _created(value: object, now: datetime) -> datetime:
    if isinstance(value, str):
        try:
            return parse_when(value)
        except ValueError:
            pass
    return now


def _mem0_category(value: object) -> str:
    names = value if isinstance(value, list) else []
    for name in names:
        if isinstance(name, str) and category_of(name) != "fact":
            return category_of(name)
    return "fact"


def read_mem0(source: Path) -> Any:
    """A mem0 export file's JSON (blocking; read through the file's own folder's boundary,
    so a FIFO or device is refused)."""
    try:
        text = safe_files.read_text(source.parent, source, MEM0_BYTES)
        return json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise ImportRefused(f"{source} is not a JSON file (nothing was imported)") from None


def detect(source: Path, head: Sequence[str]) -> str:
    """Which reader a source wants: `workspace` (a directory), `chatmem` (an export's
    header first), or `mem0` (JSON)."""
    if source.is_dir():
        return "workspace"
    first = next((line for line in head if line.strip()), "")
    if '"chatmem-export"' in first:
        return "chatmem"
    return "mem0"
