"""MADial-Bench (He et al., NAACL 2025): a person's dated memories and dialogues in which
the assistant should bring some of them up at a known turn (`test-turn`).

The memories are stored as the long-term entries a bot holds, each with its own date,
in one scope per user (the benchmark's authors ranked each dialogue over its user's
memories only). The automatic path gets the last user line before the first test turn
as the pending message and the lines before it as the recent ones, as a chat turn
would; the explicit path searches with the pending line. Hits are mapped back to
memory ids through the entry each hit names.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import ManualClock
from memory_core.base.merge_values import ChangeKind, Proposal
from memory_core.base.records import Hit
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest
from testkit.quality.floor import Floor
from testkit.quality.metrics import Scores, found_ids, score
from testkit.quality.setup import Overrides, bench_config, peer_scope

DEFAULT_DIR = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "madial-bench"
LANGUAGES = ("en", "zh")
ASSISTANT = "Assistant"

_LINE = re.compile(r"^\s*<([^<>\n]{1,64})>\s*[:：]\s*(.*)$", re.DOTALL)
_QUOTES = "\"'“”‘’「」 "


@dataclass(frozen=True, slots=True)
class Memory:
    id: int
    user: int
    day: date
    scene: str
    text: str


@dataclass(frozen=True, slots=True)
class Line:
    speaker: str | None
    """None for a line without the '<Name>:' wrapper."""
    text: str


@dataclass(frozen=True, slots=True)
class Dialogue:
    index: int
    user: int
    lines: tuple[Line, ...]
    """Lines as in the file, '<BOD>' at 0, so `test_turn` indexes them directly."""
    test_turn: int
    relevant: tuple[int, ...]

    def query(self) -> tuple[str, list[str]]:
        """(pending, recent): the last user line before the test turn, and the lines
        before it, text only."""
        before = [line for line in self.lines[: self.test_turn] if line.text]
        for i in range(len(before) - 1, -1, -1):
            if before[i].speaker != ASSISTANT:
                return before[i].text, [line.text for line in before[:i]]
        raise ValueError(f"dialogue {self.index}: no user line before the test turn")


@dataclass(frozen=True, slots=True)
class MadialSet:
    language: str
    memories: tuple[Memory, ...]
    dialogues: tuple[Dialogue, ...]

    @property
    def name(self) -> str:
        return f"madial-{self.language}"

    def asked_at(self) -> datetime:
        """Noon of the day after the newest memory: every memory is in the past."""
        newest = max(m.day for m in self.memories)
        return datetime.combine(newest + timedelta(days=1), dtime(12), tzinfo=UTC)

    def limited(self, limit: int | None) -> MadialSet:
        if limit is None:
            return self
        return MadialSet(self.language, self.memories, self.dialogues[:limit])


def parse_line(raw: str) -> Line:
    """'<Bart>: "text"\\n' → Line('Bart', 'text'); '<BOD>' and '<EOD>' have no text."""
    stripped = raw.strip()
    if stripped in ("<BOD>", "<EOD>"):
        return Line(None, "")
    match = _LINE.match(stripped)
    if match is None:
        return Line(None, stripped.strip("<>").strip(_QUOTES))
    return Line(match.group(1).strip(), match.group(2).strip().strip(_QUOTES).strip())


def _json_lines(path: Path) -> Iterator[Any]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def parse_set(
    language: str,
    memory_rows: Sequence[Mapping[str, Any]],
    dialogue_rows: Sequence[Mapping[str, Any]],
) -> MadialSet:
    """Memories carry their user's id in the zh file only; in the en file a memory
    belongs to the user its text names (each user's dialogues give the name)."""
    dialogues = []
    names: dict[str, int] = {}
    for index, row in enumerate(dialogue_rows):
        lines = tuple(parse_line(raw) for raw in row["dialogue"])
        user = int(row["user-id"])
        for line in lines:
            if line.speaker and line.speaker != ASSISTANT:
                names.setdefault(line.speaker, user)
                break
        dialogues.append(
            Dialogue(
                index=index,
                user=user,
                lines=lines,
                test_turn=int(row["test-turn"][0]),
                relevant=tuple(int(r) for r in row["relevant-id"]),
            )
        )
    memories = []
    for row in memory_rows:
        for key, value in row.items():
            user = value.get("user-id")
            if user is None:
                named = [uid for name, uid in names.items() if name in value["event"]]
                if len(set(named)) != 1:
                    raise ValueError(f"memory {key}: cannot tell whose it is")
                user = named[0]
            memories.append(
                Memory(
                    id=int(key),
                    user=int(user),
                    day=date.fromisoformat(value["time"]),
                    scene=str(value.get("scene", "")),
                    text=str(value["event"]).strip(),
                )
            )
    return MadialSet(language, tuple(memories), tuple(dialogues))


def load_set(root: Path, language: str) -> MadialSet:
    folder = root / language
    return parse_set(
        language,
        list(_json_lines(folder / "memory.json")),
        list(_json_lines(folder / "dialogue.json")),
    )


def category_of(memory: Memory) -> str:
    """A liking is a preference; everything else the benchmark holds is an experience."""
    return (
        "preference" if "prefer" in memory.scene.lower() or "喜好" in memory.scene else "experience"
    )


@dataclass(slots=True)
class Outcome:
    dialogue: int
    path: str
    scores: Scores
    ranked: list[int]


@dataclass(slots=True)
class MadialRun:
    outcomes: list[Outcome] = field(default_factory=list)
    ingest_s: float = 0.0
    query_s: float = 0.0
    entries: int = 0
    """Long-term entries the scopes hold after storing (fewer than memories when the
    merge took one memory for a restatement of another)."""
    memories: int = 0


async def run_set(
    dataset: MadialSet, overrides: Overrides, workspace: Path, *, floor: bool = False
) -> MadialRun:
    """One workspace; one scope per user; memories merged as extraction would merge
    them, each on its own day, newest first (so no entry decays between its day and the
    next one's: the benchmark ranks over every memory). With `floor`, the pending line
    is ranked by the plain-BM25 floor over the stored entries (one list, both paths)."""
    run = MadialRun(memories=len(dataset.memories))
    config = bench_config(workspace, overrides, raw_days=None)
    asked = dataset.asked_at()
    clock = ManualClock(asked)
    started = time.perf_counter()
    async with MemoryCore.open(config, clock=clock) as core:
        owners: dict[int, dict[str, list[int]]] = {}
        for memory in sorted(dataset.memories, key=lambda m: (m.day, m.id), reverse=True):
            scope = peer_scope(f"madial-{memory.user}")
            when = datetime.combine(memory.day, dtime(12), tzinfo=UTC)
            clock.set(when)
            result = await core.memories.merge_candidates(
                scope,
                [Proposal(content=memory.text, category=category_of(memory))],
                session_id=None,
                source="madial",
                now=when,
            )
            kept = [
                c for c in result.changes if c.kind in (ChangeKind.ADDED, ChangeKind.REINFORCED)
            ]
            for change in kept[-1:]:
                owners.setdefault(memory.user, {}).setdefault(change.entry_id, []).append(memory.id)
        run.entries = sum(len(entries) for entries in owners.values())
        clock.set(asked)
        await core.vectors_ready()
        run.ingest_s = time.perf_counter() - started
        started = time.perf_counter()
        floors: dict[int, Floor] = {}
        for dialogue in dataset.dialogues:
            scope = peer_scope(f"madial-{dialogue.user}")
            pending, recent = dialogue.query()
            if floor:
                if dialogue.user not in floors:
                    floors[dialogue.user] = await Floor.of(core, scope)
                explicit = automatic = floors[dialogue.user].search(pending)
            else:
                explicit = await core.finder.search(scope, SearchRequest(pending, limit=10))
                injection = await core.finder.recall(scope, pending, recent, now=asked)
                automatic = injection.hits
            for path, hits in (("explicit", explicit), ("automatic", automatic)):
                ranked = memory_ranking(hits, owners.get(dialogue.user, {}))
                found = found_ids(dialogue.relevant, ranked)
                run.outcomes.append(
                    Outcome(dialogue.index, path, score(found, len(set(dialogue.relevant))), ranked)
                )
        run.query_s = time.perf_counter() - started
    return run


def memory_ranking(hits: Sequence[Hit], owners: Mapping[str, Sequence[int]]) -> list[int]:
    """Memory ids in hit order (an entry that holds several memories lists them all at
    its rank); hits that are no long-term entry are passed over."""
    ranked: list[int] = []
    for hit in hits:
        if hit.kind is ChunkKind.LONG_TERM and hit.ref:
            ranked.extend(i for i in owners.get(hit.ref, ()) if i not in ranked)
    return ranked
