"""Memory-core benchmark: capture, merge + decay, MEMORY.md load and save.

Run `python bench/core_bench.py [--quick]`.  Not a test: it prints figures and never
asserts on wall-clock time.  Everything runs in a temporary workspace that is removed at
the end; entries and texts come from `bench/corpus.py` with fixed seeds.

What is measured:

* `core.memories.capture` of one entry into a scope holding a small file, and into one
  holding 1 000 entries (p50 / p95 over >= 200 captures in full mode), three ways: as a
  caller sees it by default (applied to the in-memory view and committed to the capture
  journal; MEMORY.md, audit and index follow in one background write per burst), with a
  `flush` after each capture (so the figure includes that capture's own file write and
  index update), and with the journal turned off; plus where the time goes at each size
  (journal commit, staging, parse, merge, render, atomic writes, re-index);
* the pure `memory_core.longterm.merge.merge` (5 candidates) and `decay_all` over 100, 1 000
  and 10 000 entries (median of >= 5 runs);
* the Layer 1 snapshot's build (rank the Active entries, allocate, render) over 100,
  1 000 and 10 000 entries, and one Layer 3 event-log append with its fsync;
* the consolidation over 100 and 10 000 entries of four classes: the pure
  decisions (verify beliefs, plan and apply summaries) and a whole run of every phase
  through `core.consolidation.run` (files written), then a second run;
* MEMORY.md load (read + parse) and save (render + atomic write, and the store's
  backup-then-write) at 1 000 and 10 000 entries; parse and render both with their
  per-block memos cleared before each call and warm.

The machine is shared, so every figure is a median over rounds or a percentile over many
samples; compare medians, not single runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import machine_load, memory_entries, percentile, sentences, table

from memory_core.base import text as mtext
from memory_core.base.atomic import atomic_write_text, backup_then_write
from memory_core.base.clock import ManualClock
from memory_core.base.entries import CATEGORIES, MemoryClass, MemoryEntry
from memory_core.base.merge_values import Proposal
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.consolidation.phases import (
    Judgement,
    apply_judgements,
    apply_summaries,
    plan_summaries,
    polarity_verdict,
    verification_pairs,
)
from memory_core.engine import MemoryCore
from memory_core.longterm.decay import decay_all
from memory_core.longterm.matching import EntryView
from memory_core.longterm.memory_md_parser import clear_parse_cache, parse_memory
from memory_core.longterm.memory_md_renderer import clear_render_cache, render_memory
from memory_core.longterm.merge import apply_candidates, merge
from memory_core.longterm.prompt import select_prompt_entries
from memory_core.longterm.store import read_memory_file
from memory_core.notes.event_log import append_blocking, message_events
from memory_core.recall.index import prepare_file
from memory_core.snapshot.builder import Snapshot, build_snapshot
from memory_core.snapshot.snapshots import MAX_RANKED
from memory_core.storage.journal import CaptureJournal

SEED = 20260602
CAPTURE_TARGET_MS = 2.0
MERGE_TARGET_MS = 100.0
REFERENCE = "reference design: 39 ms per add, 43 ms to decay 100 entries"


@dataclass
class Row:
    what: str
    size: str
    samples: int
    median: float
    p50: float
    p95: float
    note: str = ""


def ms(seconds: float) -> str:
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def row(what: str, size: str, rounds: Sequence[Sequence[float]], note: str = "") -> Row:
    """median = median of the rounds' medians; p50 / p95 over every sample pooled."""
    pooled = [s for r in rounds for s in r]
    median = statistics.median(statistics.median(r) for r in rounds if r)
    return Row(
        what,
        size,
        len(pooled),
        median,
        percentile(pooled, 50),
        percentile(pooled, 95),
        note,
    )


def runs(
    func: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None
) -> list[float]:
    """Wall time of `repeats` calls (one warm-up call first); `setup`, untimed, before each."""
    func()
    out = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        gc.collect()
        start = time.perf_counter()
        func()
        out.append(time.perf_counter() - start)
    return out


# ---------------------------------------------------------------------------
# capture


def _candidates(entries: Sequence[MemoryEntry], rng: random.Random) -> list[Proposal]:
    """~5 candidates as one extraction proposes: one restates an entry word for word, one
    nearly (case and punctuation changed), three are new."""
    fresh = sentences(3, rng.randrange(1 << 30))
    same, near = rng.sample(list(entries), 2)
    return [
        Proposal(content=same.content, category=same.category),
        Proposal(content=near.content.upper().replace("，", ", ") + "!", category=near.category),
        *(Proposal(content=t, category=rng.choice(CATEGORIES)) for t in fresh),
    ]


CAPTURE_MODES = {
    "journalled": "MemoryCore.capture (default: journalled, file written in groups)",
    "settled": "  capture + flush (until in MEMORY.md and the index)",
    "direct": "  capture with long_term.journal = false (writes the file itself)",
}


async def capture_round(
    workspace: Path, existing: int, samples: int, seed: int, repeats: int, mode: str
) -> tuple[list[float], dict[str, list[float]]]:
    """Captures into a fresh scope holding `existing` entries; then one breakdown.

    `mode` "journalled" times `capture` as a caller sees it (the default configuration);
    "settled" adds `flush` after each, so the figure includes rendering and writing
    MEMORY.md and updating the index for that one capture; "direct" turns the journal off.
    """
    config = load_config(None, env={}, workspace=workspace)
    if mode == "direct":
        config = config.model_copy(
            update={"long_term": config.long_term.model_copy(update={"journal": False})}
        )
    rng = random.Random(seed)
    async with MemoryCore.open(config) as core:
        assert core.guard.index is not None
        scope = ScopeKey(f"peer:core-{existing}-{seed}")
        now = core.now()
        entries = memory_entries(existing, seed, now=now - timedelta(days=1))
        await core.memories.store.update(scope, lambda parsed: (list(entries), None), now)
        await core.guard.index.sync_scope(scope)
        texts = sentences(samples, seed + 1)
        timings = []
        for content in texts:
            category = rng.choice(CATEGORIES)
            start = time.perf_counter()
            await core.memories.capture(scope, content, category=category)
            if mode == "settled":
                await core.memories.flush(scope)
            timings.append(time.perf_counter() - start)
        await core.memories.flush()
        if mode != "journalled":
            return timings, {}
        breakdown = await capture_breakdown(core, scope, rng, repeats)
    return timings, breakdown


async def capture_breakdown(
    core: MemoryCore, scope: ScopeKey, rng: random.Random, repeats: int
) -> dict[str, list[float]]:
    """The steps of one capture, timed one by one on the scope as it is now."""
    assert core.guard.index is not None
    path = core.memories.path(scope)
    relative = core.workspace.relative(path)
    policy = core.policy
    now = core.now()
    parsed = read_memory_file(path, policy.archive_below, root=path.parent).parsed
    entries = parsed.entries
    cand = [Proposal(content=sentences(1, rng.randrange(1 << 30))[0], category="fact")]
    rendered = render_memory(entries, now=now, archive_below=policy.archive_below)
    scratch = path.with_name("scratch.md")
    out: dict[str, list[float]] = {}
    out["read + parse MEMORY.md"] = runs(
        lambda: read_memory_file(path, policy.archive_below, root=path.parent), repeats
    )
    view = EntryView.of(entries)
    fresh = iter(sentences(4 * repeats + 4, rng.randrange(1 << 30)))
    out["stage: apply_candidates on the in-memory view"] = runs(
        lambda: apply_candidates(view, [Proposal(next(fresh), "fact")], now, policy), repeats
    )
    journal = await CaptureJournal.open(path.with_name("bench-journal.sqlite3"), path.parent)
    timings = []
    for number in range(repeats):
        start = time.perf_counter()
        await journal.append(scope.value, {"content": f"bench {number}"})
        timings.append(time.perf_counter() - start)
    await journal.close()
    out["journal append (one synchronous = FULL commit)"] = timings
    out["merge (1 candidate)"] = runs(lambda: merge(entries, cand, now, None, policy), repeats)
    out["render_memory"] = runs(
        lambda: render_memory(entries, now=now, archive_below=policy.archive_below), repeats
    )
    out["backup_then_write (2 atomic writes)"] = runs(
        lambda: backup_then_write(
            scratch, rendered.encode(), scratch.with_name("scratch.md.bak"), root=scratch.parent
        ),
        repeats,
    )
    out["atomic write of 1 KB (fsync floor)"] = runs(
        lambda: atomic_write_text(scratch.with_name("small.md"), "x" * 1024, root=scratch.parent),
        repeats,
    )
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        await core.guard.index.sync_file(scope, relative)
        timings.append(time.perf_counter() - start)
    out["index.sync_file (re-chunk, re-tokenize, replace all)"] = timings
    # What sync_file spends outside SQLite: chunking (a second parse) and tokenizing.
    out["  of which prepare_file (parse + tokenize)"] = runs(
        lambda: prepare_file(core.workspace, path), repeats
    )
    for name in ("scratch.md", "scratch.md.bak", "small.md", "bench-journal.sqlite3"):
        path.with_name(name).unlink(missing_ok=True)
    return out


TINY = False
"""`--tiny` (a smoke run): each part at its smallest size only."""


def sizes(*every: int) -> tuple[int, ...]:
    return every[:1] if TINY else every


async def bench_capture(root: Path, quick: bool) -> tuple[list[Row], list[Row]]:
    rows: list[Row] = []
    parts: list[Row] = []
    rounds = 1 if quick else 2
    plan = [(20, 100 if quick else 200), (1000, 30 if quick else 200)]
    if TINY:
        plan = [(20, 5)]
    for existing, samples in plan:
        breakdowns: list[dict[str, list[float]]] = []
        size = f"{existing:,} -> {existing + samples:,} entries"
        for mode, label in CAPTURE_MODES.items():
            all_rounds: list[list[float]] = []
            for index in range(rounds):
                workspace = root / f"capture-{existing}-{mode}-{index}"
                timings, breakdown = await capture_round(
                    workspace,
                    existing,
                    samples,
                    SEED + 100 * index + existing,
                    3 if quick else 5,
                    mode,
                )
                all_rounds.append(timings)
                if breakdown:
                    breakdowns.append(breakdown)
                shutil.rmtree(workspace, ignore_errors=True)
            note = f"target <= {CAPTURE_TARGET_MS:g} ms; ref 39 ms" if mode == "journalled" else ""
            rows.append(row(label, size, all_rounds, note))
        for step in breakdowns[0]:
            step_rounds = [b[step] for b in breakdowns]
            parts.append(row(step, f"~{existing + samples:,} entries", step_rounds))
    return rows, parts


# ---------------------------------------------------------------------------
# merge + decay, load + save


def bench_merge(quick: bool) -> list[Row]:
    rows: list[Row] = []
    repeats = 3 if quick else 9
    for size in sizes(100, 1000, 10_000):
        written = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
        entries = memory_entries(size, SEED + size, now=written)
        later = written + timedelta(days=30)
        cands = _candidates(entries, random.Random(SEED + size))
        merged = partial(merge, entries, cands, later, "bench-session")
        kinds = ", ".join(f"{k} {v}" for k, v in merged().stats.items())
        target = f"target <= {MERGE_TARGET_MS:g} ms; " if size == 10_000 else ""
        label = f"{size:,} entries"
        rows.append(
            row("merge (5 candidates) incl. decay", label, [runs(merged, repeats)], target + kinds)
        )
        decayed = partial(decay_all, entries, later)
        note = "ref 43 ms for 100" if size == 100 else ""
        rows.append(row("decay_all (no candidates)", label, [runs(decayed, repeats)], note))
    return rows


def bench_layers(root: Path, quick: bool) -> list[Row]:
    """Layer 1: ranking the entries and building the snapshot (pure, what a rebuild
    computes); Layer 3: one event-log append."""
    rows: list[Row] = []
    repeats = 3 if quick else 9
    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    summaries = [f"2026-04-{d:02d}: " + " ".join(sentences(3, SEED + d)) for d in range(1, 11)]
    recent = [f"- 05-01 11:{m:02d} input: {text}" for m, text in enumerate(sentences(12, SEED))]
    for size in sizes(100, 1000, 10_000):
        entries = memory_entries(size, SEED + size, now=now)

        def build(entries: Sequence[MemoryEntry] = entries) -> Snapshot:
            ranked = select_prompt_entries(entries, now, min_score=0.0, top_k=MAX_RANKED)
            return build_snapshot(ranked, summaries, recent, {}, now)

        tokens = build().tokens
        note = f"{tokens} tokens" + ("; ref ~690 tokens" if size == 100 else "")
        rows.append(row("snapshot build", f"{size:,} entries", [runs(build, repeats)], note))
    log_file = root / "events" / "2026-05-01.jsonl"
    events = message_events("user", sentences(1, SEED)[0], now, "bench-session", "alice")
    samples = runs(lambda: append_blocking(log_file, events, root=root), 200 if not quick else 20)
    rows.append(row("event log append (fsync)", "1 event", [samples]))
    return rows


def classed_entries(size: int, seed: int, now: datetime) -> list[MemoryEntry]:
    """A scope as consolidation finds it: the corpus's entries, a third of them written
    in the last month; a tenth are beliefs, each followed a day later by a fact on its
    subject (half confirming it, half saying the opposite), and a sixth are events."""
    rng = random.Random(seed)
    out: list[MemoryEntry] = []
    for entry in memory_entries(size, seed, now=now):
        if len(out) >= size:
            break
        if rng.random() < 0.33:
            created = now - timedelta(days=rng.uniform(2, 30))
            entry = entry.with_(created_at=created, last_activated=created, scored_at=created)
        roll = rng.random()
        if roll < 0.1 and len(out) + 2 <= size:
            belief = entry.with_(memory_class=MemoryClass.BELIEF)
            later = entry.created_at + timedelta(days=1)
            text = entry.content if rng.random() < 0.5 else f"no longer: {entry.content}"
            fact = entry.with_(
                id=f"f{entry.id}",
                content=text,
                created_at=later,
                last_activated=later,
                scored_at=later,
            )
            out.extend([belief, fact])
        elif roll < 0.27:
            out.append(entry.with_(memory_class=MemoryClass.EVENT))
        else:
            out.append(entry)
    return out


def consolidation_decisions(entries: list[MemoryEntry], now: datetime) -> int:
    """The pure work of verify and summarize over every entry (what a run decides)."""
    pairs = verification_pairs(entries, None, now, mtext.tokenize)
    judgements = [
        Judgement(belief.id, fact.id, polarity_verdict(belief.content, fact.content))
        for belief, facts in pairs
        for fact in facts
    ]
    after, verified = apply_judgements(entries, judgements, now)
    _, summarized = apply_summaries(after, plan_summaries(after, now), now)
    return len(verified) + len(summarized)


async def bench_consolidation(root: Path, quick: bool) -> list[Row]:
    """The consolidation: the pure decisions, then a whole run of every phase
    through MemoryCore (decay, filter and extract over 20 logged inputs, verify,
    summarize, snapshot; files written), on a fresh scope each round, and a second run
    over its result (nothing left to do)."""
    rows: list[Row] = []
    repeats = 3 if quick else 7
    clock = ManualClock(datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    now = clock()
    for size in sizes(100, 10_000):
        label = f"{size:,} entries"
        entries = classed_entries(size, SEED + size, now)
        decided = consolidation_decisions(entries, now)
        note = f"{decided} changes" + ("; ref 51 ms for 100" if size == 100 else "")
        pure = partial(consolidation_decisions, entries, now)
        rows.append(row("consolidation decisions (pure)", label, [runs(pure, repeats)], note))
        config = load_config(None, env={}, workspace=root / f"consolidate-{size}")
        config = config.model_copy(
            update={"snapshot": config.snapshot.model_copy(update={"enabled": True})}
        )
        first: list[float] = []
        again: list[float] = []
        changes = 0
        async with MemoryCore.open(config, clock=clock) as core:
            for round_ in range(repeats + 1):
                scope = ScopeKey(f"peer:consolidate-{round_}")
                await core.memories.store.update(
                    scope, lambda parsed, entries=entries: (list(entries), None), now
                )
                for text in sentences(20, SEED + round_):
                    said = message_events("user", f"I think {text}", now, f"closed-{round_}")
                    await core.event_log.record(scope, *said)
                await core.memories.flush()
                gc.collect()
                start = time.perf_counter()
                reports = await core.consolidation.run(scope)
                took = time.perf_counter() - start
                start = time.perf_counter()
                await core.consolidation.run(scope)
                took_again = time.perf_counter() - start
                if round_:  # the first round warms the caches
                    first.append(took)
                    again.append(took_again)
                changes = sum(r.changes for r in reports)
        rows.append(row("consolidation run, all phases", label, [first], f"{changes} changes"))
        rows.append(row("  second run (nothing to do)", label, [again]))
    return rows


def _save(path: Path, entries: Sequence[MemoryEntry], now: datetime) -> None:
    atomic_write_text(path, render_memory(entries, now=now), root=path.parent)


def _save_like_store(path: Path, entries: Sequence[MemoryEntry], now: datetime) -> None:
    backup_then_write(
        path,
        render_memory(entries, now=now).encode(),
        path.with_name(path.name + ".bak"),
        root=path.parent,
    )


def bench_file(root: Path, quick: bool) -> list[Row]:
    rows: list[Row] = []
    repeats = 3 if quick else 7
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    for size in sizes(1000, 10_000):
        entries = memory_entries(size, SEED + 7 * size, now=now)
        path = root / f"file-{size}" / "MEMORY.md"
        path.parent.mkdir(parents=True)
        text = render_memory(entries, now=now)
        atomic_write_text(path, text, root=path.parent)
        kb = os.path.getsize(path) / 1024
        label = f"{size:,} entries, {kb:,.0f} KB"
        # parse_memory remembers blocks it parsed and render_memory blocks it rendered
        # (the same file is read and written again and again with few blocks changed).
        # "nothing remembered" rows clear those memos before every call, untimed: the cost
        # of a file seen for the first time; the others run warm, as repeated calls do.
        measured: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
            (
                "load: read + parse (cold store.load)",
                partial(read_memory_file, path, 0.2, root=path.parent),
                clear_parse_cache,
            ),
            ("  parse_memory, nothing remembered", partial(parse_memory, text), clear_parse_cache),
            ("  parse_memory, blocks remembered", partial(parse_memory, text), None),
            ("save: render + atomic write", partial(_save, path, entries, now), None),
            (
                "  render_memory, nothing remembered",
                partial(render_memory, entries, now=now),
                clear_render_cache,
            ),
            ("  render_memory, blocks remembered", partial(render_memory, entries, now=now), None),
            (
                "save as the store does (+ .bak copy)",
                partial(_save_like_store, path, entries, now),
                None,
            ),
        ]
        for what, func, setup in measured:
            rows.append(row(what, label, [runs(func, repeats, setup)]))
    return rows


# ---------------------------------------------------------------------------


def print_rows(title: str, rows: Sequence[Row]) -> None:
    print(title)
    print(
        table(
            ["measurement", "size", "samples", "median", "p50", "p95", "target / reference"],
            [(r.what, r.size, r.samples, ms(r.median), ms(r.p50), ms(r.p95), r.note) for r in rows],
        )
    )
    print()


async def main_async(quick: bool) -> None:
    mtext.warm_up()
    sentences(1)  # load the vocabularies before any timing
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chatmem-core-bench-") as tmp:
        root = Path(tmp)
        print(f"workspace under {root} ({'quick' if quick else 'full'} mode)", flush=True)
        load_before = machine_load()
        capture_rows, capture_parts = await bench_capture(root, quick)
        print("capture done", flush=True)
        merge_rows = bench_merge(quick)
        print("merge done", flush=True)
        file_rows = bench_file(root, quick)
        print("file done", flush=True)
        layer_rows = bench_layers(root, quick)
        print("layers done", flush=True)
        consolidation_rows = await bench_consolidation(root, quick)
    print()
    print(f"core bench, {'quick' if quick else 'full'} mode, {time.perf_counter() - started:.0f} s")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; {REFERENCE}")
    print(f"machine: at start {load_before}; at end {machine_load()}")
    print()
    print_rows("capture (MemoryCore.capture, default config, system clock)", capture_rows)
    print_rows("where one capture goes (steps timed separately after the captures)", capture_parts)
    print_rows("merge + decay (pure functions, entries decayed 30 days ahead)", merge_rows)
    print_rows("MEMORY.md load and save", file_rows)
    print_rows("Layer 1 snapshot and Layer 3 event log", layer_rows)
    print_rows("consolidation (every phase; entries of four classes)", consolidation_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples and rounds")
    parser.add_argument(
        "--tiny", action="store_true", help="a smoke run: --quick at each part's smallest size"
    )
    args = parser.parse_args()
    global TINY
    TINY = args.tiny
    asyncio.run(main_async(args.quick or args.tiny))


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("core_bench"):
        main()
