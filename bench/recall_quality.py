"""Recall quality of the product's own recall paths on labelled data.

    python bench/recall_quality.py [--variant NAME ...] [--all] [--set section.key=value ...]
        [--sets PATTERN] [--mode history|archived|both] [--summaries] [--madial DIR]
        [--locomo DIR] [--limit N] [--json OUT] [--jobs N] [-v]

Two paths are scored, both through `MemoryCore` only: *explicit* is
`core.finder.search(scope, question, limit=10)` (a person's search, the memory_search tool),
*automatic* is `core.finder.recall(scope, question, recent, now=...).hits`, the hits the model
sees in its prompt. Each run starts from empty workspaces with no chat model; vectors
come from what `[embedding]` resolves to (by default the local model package when it is
installed), and the questions wait until every stored chunk has its vector, as they
would days later in a running bot. A full run takes about 2 minutes on 2 idle cores with
the local model (15 s with `--set embedding.provider=none`).

* `bench/data/recall_*.json`: conversations stored as a bot stores them, one per-peer
  scope per person, either left in session history (`history`) or moved out by the
  bot's archive pass at the time of the first question (`archived`; `archive.raw_days`
  is raised so every turn is kept verbatim in raw archive files, unless `--summaries`
  keeps the default rules and older days become offline extractive summaries). A hit is
  anchored on an evidence turn when it ranks that turn; it shows one when the turn's text
  is inside the hit (speaker and time prefixes stripped) or a line of the hit of 20+
  characters is inside the turn.
* LoCoMo's public development split (`--locomo DIR`, by default
  a folder beside the repository; read from there, never copied): five long conversations
  between two people, stored by the protocol of its README (`testkit/quality/locomo.py`:
  a group scope, every turn through `core.conversation.turn`, the bot's scheduler on a
  simulated clock, default configuration), asked one day after the last session; by
  category (single, multi, temporal, open). The yardstick that counts.
* MADial-Bench (`--madial DIR`, by default a folder beside the repository): memories as
  dated long-term entries, one scope per user, scored on `relevant-id`; beside it the
  published embedding baselines (`bench/data/madial_published.json`), scored the same way.
* `pooled-zh` (`testkit/quality/pooled.py`): many people's short Chinese messages in ONE
  group scope, as a stress set: MADial-zh's memories as their users' messages (the
  dialogue's pending line as question, `relevant-id` as evidence) and the labelled zh
  sets' user turns (their labelled evidence), moved by whole weeks into the same weeks,
  790 messages and 316 questions, stored (`history`) then archived (`archived`).

Variant `plain-bm25` is the floor (`testkit/quality/floor.py`): the same storing, then
textbook BM25 (jieba precise mode, stopwords, the reference scorer, k1 1.2, b 0.75) over
exactly the chunks the scope's index holds, each hit anchored on its own chunk. The
product's default must be at or above it on every set.

Metrics (means over questions), each hit counted for the one turn it is anchored on (the
turn whose text it ranks, known by its time), never for the neighbours it shows:
recall@5 = share of questions with at least one wanted item in the top 5; nDCG@5 with binary gains (ideal: min(5, wanted) relevant hits first);
frac@k = share of a question's wanted items in the top k; shown@5 (a diagnostic) = share
of the wanted turns shown anywhere in the first 5 hits' text. Not a test: it never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_core.config import Config
from testkit.quality import labelled, locomo, madial, pooled, published
from testkit.quality.report import Group, Key, main_table, type_table
from testkit.quality.report import pooled as pooled_groups
from testkit.quality.setup import RAW_FOREVER, apply_overrides, merge_overrides, sets_to_overrides

DATA = Path(__file__).resolve().parent / "data"

_WORDS = {"embedding": {"provider": "none"}}
VARIANTS: dict[str, dict[str, dict[str, object]]] = {
    "current": {},
    "bm25": _WORDS,
    "plain-bm25": _WORDS,
    "bm25-no-reply-anchors": {**_WORDS, "recall": {"reply_anchors": False}},
    "bm25-no-exchange-documents": {**_WORDS, "recall": {"exchange_documents": False}},
    "bm25-no-speaker-names": {**_WORDS, "recall": {"speaker_names": False, "speaker_weight": 0.5}},
    "bm25-no-context-window": {**_WORDS, "recall": {"context_window": []}},
    "bm25-no-time": {**_WORDS, "recall": {"time_boost": 0.0}},
    "bm25-no-priors": {
        **_WORDS,
        "recall": {"long_term_boost": 0.0, "recency_boost": 0.0, "summary_factor": 1.0},
    },
    "bm25-no-diversity": {**_WORDS, "recall": {"duplicate_similarity": 1.01}},
    "bm25-no-answer-kind": {**_WORDS, "recall": {"answer_boost": 0.0}},
    "bm25-no-entities": {**_WORDS, "recall": {"entity_expansion": False}},
    "bm25-no-question-factor": {**_WORDS, "recall": {"question_factor": 1.0}},
    "bm25-session-diversity-0.9": {**_WORDS, "recall": {"session_repeat": 0.9}},
    "bm25-session-diversity-0.8": {**_WORDS, "recall": {"session_repeat": 0.8}},
    "bm25-snapshot": {**_WORDS, "snapshot": {"enabled": True}},
    "hybrid-weighted-0.7": {"recall": {"fusion": "weighted", "dense_weight": 0.7}},
    "hybrid-weighted-0.3": {"recall": {"fusion": "weighted", "dense_weight": 0.3}},
    "hybrid-rrf-0.3": {"recall": {"fusion": "rrf", "dense_weight": 0.3}},
    "hybrid-rrf-0.7": {"recall": {"fusion": "rrf", "dense_weight": 0.7}},
    "hybrid-gated-floor-0.2": {"recall": {"turn_dense_floor": 0.2}},
    "hybrid-gated-floor-0.4": {"recall": {"turn_dense_floor": 0.4}},
    "hybrid-gated-turn-0.5": {"recall": {"turn_dense_weight": 0.5}},
    "hybrid-no-context-window": {"recall": {"context_window": []}},
    "hybrid-session-diversity-0.9": {"recall": {"session_repeat": 0.9}},
    "hybrid-gated-plain": {"recall": {"turn_window_max": False, "dense_feedback": 0}},
    "hybrid-window-max": {"recall": {"turn_window_max": True, "dense_feedback": 0}},
    "hybrid-rocchio-3": {"recall": {"dense_feedback": 3, "turn_window_max": False}},
    "hybrid-rocchio-3-window-max": {"recall": {"dense_feedback": 3, "turn_window_max": True}},
    "hybrid-rocchio-3-w1-window-max": {
        "recall": {"dense_feedback": 3, "dense_feedback_weight": 1.0, "turn_window_max": True}
    },
    "hybrid-rocchio-5-window-max": {"recall": {"dense_feedback": 5, "turn_window_max": True}},
    "hybrid-e5-small": {"embedding": {"model": "e5-small"}},
    "bm25-prf-rare-5": {**_WORDS, "recall": {"lexical_feedback": 5}},
    "hybrid-prf-rare-5": {"recall": {"lexical_feedback": 5}},
    "hybrid-snapshot": {"snapshot": {"enabled": True}},
}
"""Variant name -> {config section -> {key: value}} on top of the product's defaults."""

FLOOR = "plain-bm25"
"""The variant that stores as the product does and ranks with the plain-BM25 floor
(`testkit/quality/floor.py`): the row the product's default must stay at or above."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", default=[], help="variant name (repeatable)")
    parser.add_argument("--all", action="store_true", help="every variant in VARIANTS")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="config override on top of every variant (JSON value when it parses)",
    )
    parser.add_argument(
        "--sets",
        default="*",
        metavar="PATTERN",
        help="datasets to run, by name (en-a, zh-b, madial-en, ...; shell pattern)",
    )
    parser.add_argument("--mode", choices=("history", "archived", "both"), default="both")
    parser.add_argument(
        "--summaries",
        action="store_true",
        help="archive with the default rules (older days summarised) instead of verbatim",
    )
    parser.add_argument("--madial", type=Path, default=madial.DEFAULT_DIR, metavar="DIR")
    parser.add_argument("--locomo", type=Path, default=locomo.DEFAULT_DIR, metavar="DIR")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="questions per set")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        metavar="N",
        help="worker processes; each runs one dataset with one variant at a time",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def chosen_variants(args: argparse.Namespace) -> list[str]:
    names = list(VARIANTS) if args.all else (args.variant or ["current"])
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    return list(dict.fromkeys(names))


def labelled_sets(pattern: str, limit: int | None) -> list[labelled.LabelledSet]:
    sets = []
    for path in sorted(DATA.glob("recall_*.json")):
        name = path.stem.removeprefix("recall_")
        if fnmatch.fnmatch(name, pattern):
            sets.append(labelled.load_set(path).limited(limit))
    return sets


def madial_sets(root: Path, pattern: str, limit: int | None) -> list[madial.MadialSet]:
    wanted = [lang for lang in madial.LANGUAGES if fnmatch.fnmatch(f"madial-{lang}", pattern)]
    if not wanted:
        return []
    if not all((root / lang / "dialogue.json").is_file() for lang in wanted):
        print(f"MADial-Bench not found under {root}: skipped (--madial DIR)")
        return []
    return [madial.load_set(root, lang).limited(limit) for lang in wanted]


def locomo_sets(root: Path, pattern: str, limit: int | None) -> list[locomo.LocomoSet]:
    if not fnmatch.fnmatch("locomo-dev", pattern):
        return []
    if not (root / locomo.FILE).is_file():
        print(f"LoCoMo dev split not found under {root}: skipped (--locomo DIR)")
        return []
    return [locomo.load_set(root).limited(limit)]


def pooled_sets(root: Path, pattern: str, limit: int | None) -> list[pooled.PooledSet]:
    if not fnmatch.fnmatch(pooled.NAME, pattern):
        return []
    if not (root / "zh" / "dialogue.json").is_file():
        print(f"MADial-Bench not found under {root}: {pooled.NAME} skipped (--madial DIR)")
        return []
    return [pooled.load_set(root, sorted(DATA.glob("recall_zh-*.json"))).limited(limit)]


Dataset = labelled.LabelledSet | madial.MadialSet | locomo.LocomoSet | pooled.PooledSet


@dataclass(frozen=True, slots=True)
class Task:
    """One dataset with one variant: the unit a worker process runs."""

    variant: str
    overrides: dict[str, dict[str, object]]
    dataset: Dataset
    modes: tuple[str, ...]
    summaries: bool

    @property
    def floor(self) -> bool:
        return self.variant == FLOOR


@dataclass(slots=True)
class Done:
    task: Task
    runs: dict[str, labelled.SetRun] | None
    madial_run: madial.MadialRun | None
    wall_s: float


def run_task(task: Task) -> Done:
    """In a worker process (or inline with --jobs 1): fresh workspaces, fresh cores."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chatmem-quality-") as tmp:
        if isinstance(task.dataset, madial.MadialSet):
            mrun = asyncio.run(
                madial.run_set(task.dataset, task.overrides, Path(tmp), floor=task.floor)
            )
            return Done(task, None, mrun, time.perf_counter() - started)
        if isinstance(task.dataset, pooled.PooledSet):
            prun = asyncio.run(
                pooled.run_set(
                    task.dataset, task.modes, task.overrides, Path(tmp), floor=task.floor
                )
            )
            return Done(task, prun, None, time.perf_counter() - started)
        if isinstance(task.dataset, locomo.LocomoSet):
            lrun = asyncio.run(
                locomo.run_set(task.dataset, task.overrides, Path(tmp), floor=task.floor)
            )
            return Done(task, {locomo.MODE: lrun}, None, time.perf_counter() - started)
        runs = asyncio.run(
            labelled.run_set(
                task.dataset,
                task.modes,
                task.overrides,
                Path(tmp),
                summaries=task.summaries,
                floor=task.floor,
            )
        )
    return Done(task, runs, None, time.perf_counter() - started)


def run_all(tasks: Sequence[Task], jobs: int) -> list[Done]:
    """Tasks in worker processes (the ranking is CPU work under one GIL per process), the
    results in task order."""
    if jobs <= 1 or len(tasks) <= 1:
        return [run_task(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        return list(pool.map(run_task, tasks))


class Results:
    """Everything one invocation measured, for the tables and --json."""

    def __init__(self) -> None:
        self.groups: dict[Key, Group] = {}
        self.languages: dict[str, str] = {}
        self.timing: list[dict[str, Any]] = []
        self.questions: list[dict[str, Any]] = []

    def group(self, key: Key) -> Group:
        return self.groups.setdefault(key, Group(key))

    def add(self, done: Done, verbose: bool, shown: set[tuple[str, str]]) -> None:
        task = done.task
        dataset = task.dataset
        self.languages[dataset.name] = dataset.language
        if done.madial_run is not None:
            self._add_madial(task, done.madial_run, done.wall_s, verbose, shown)
        for mode, run in (done.runs or {}).items():
            self._add_labelled(task, mode, run, done.wall_s, verbose, shown)

    def _add_labelled(
        self,
        task: Task,
        mode: str,
        run: labelled.SetRun,
        wall_s: float,
        verbose: bool,
        shown: set[tuple[str, str]],
    ) -> None:
        name = task.dataset.name
        kinds: Counter[str] = Counter()
        for outcome in run.outcomes:
            self.group(Key(name, outcome.path, mode, task.variant)).add(
                outcome.scores, outcome.type
            )
            kinds.update(f"{outcome.path}:{k}" for k in outcome.kinds)
            self.questions.append(
                {"variant": task.variant, "dataset": name, "mode": mode, **asdict(outcome)}
            )
        self.timing.append(
            {
                "dataset": name,
                "mode": mode,
                "variant": task.variant,
                "questions": len(run.outcomes) // 2,
                "ingest_s": run.ingest_s,
                "query_s": run.query_s,
                "task_wall_s": wall_s,
            }
        )
        if verbose and (name, mode) not in shown:
            shown.add((name, mode))
            stored = ", ".join(f"{k} {v}" for k, v in sorted(run.stored.items()) if v)
            hit_kinds = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
            print(f"  {name}/{mode}: stored: {stored}")
            print(f"  {name}/{mode}: hits by kind: {hit_kinds}")

    def _add_madial(
        self,
        task: Task,
        run: madial.MadialRun,
        wall_s: float,
        verbose: bool,
        shown: set[tuple[str, str]],
    ) -> None:
        dataset = task.dataset
        assert isinstance(dataset, madial.MadialSet)
        for outcome in run.outcomes:
            key = Key(dataset.name, outcome.path, "long-term", task.variant)
            self.group(key).add(outcome.scores)
            self.questions.append(
                {
                    "variant": task.variant,
                    "dataset": dataset.name,
                    "mode": "long-term",
                    **asdict(outcome),
                }
            )
        self.timing.append(
            {
                "dataset": dataset.name,
                "mode": "long-term",
                "variant": task.variant,
                "questions": len(dataset.dialogues),
                "ingest_s": run.ingest_s,
                "query_s": run.query_s,
                "task_wall_s": wall_s,
            }
        )
        if verbose and (dataset.name, "long-term") not in shown:
            shown.add((dataset.name, "long-term"))
            print(
                f"  {dataset.name}: {run.memories} memories stored as {run.entries} long-term "
                f"entries (one scope per user), asked on {dataset.asked_at().date()}"
            )


def baseline_groups(sets: Sequence[madial.MadialSet]) -> list[Group]:
    out = []
    by_language = {s.language: s for s in sets}
    for baseline in published.load():
        dataset = by_language.get(baseline.language)
        if dataset is None:
            continue
        group = Group(Key(dataset.name, "published", "top-20 list", baseline.model), baseline=True)
        summary = published.score_baseline(baseline, dataset)
        group.summary_override = summary
        stored = baseline.stored.get("recall@5")
        full = summary.n == len(baseline.top5)
        if full and stored is not None and abs(stored - summary.recall5) > 1e-6:
            print(
                f"warning: {baseline.model} ({baseline.language}): recall@5 "
                f"{summary.recall5:.6f} differs from the stored {stored:.6f}"
            )
        out.append(group)
    return out


def ordered(results: Results) -> list[Group]:
    """Each labelled file, then each language's files pooled, then MADial-Bench."""
    groups = list(results.groups.values())
    public = [g for g in groups if g.key.dataset == "locomo-dev"]
    out = sorted(public, key=lambda g: (g.key.path, g.key.variant))
    plain = [
        g
        for g in groups
        if not g.key.dataset.startswith(("madial-", "locomo-")) and g.key.dataset != pooled.NAME
    ]
    out += sorted(plain, key=lambda g: (g.key.dataset, g.key.mode, g.key.path, g.key.variant))
    for language in sorted({results.languages[g.key.dataset] for g in plain}):
        files = [g for g in plain if results.languages[g.key.dataset] == language]
        if len({g.key.dataset for g in files}) > 1:
            out.extend(
                sorted(
                    pooled_groups(f"{language} (all)", files),
                    key=lambda g: (g.key.mode, g.key.path, g.key.variant),
                )
            )
    out.extend(
        sorted(
            (g for g in groups if g.key.dataset == pooled.NAME),
            key=lambda g: (g.key.mode, g.key.path, g.key.variant),
        )
    )
    out.extend(
        sorted(
            (g for g in groups if g.key.dataset.startswith("madial-")),
            key=lambda g: (g.key.dataset, g.key.path, g.key.variant),
        )
    )
    return out


def run(args: argparse.Namespace) -> Results:
    variants = chosen_variants(args)
    extra = sets_to_overrides(args.set)
    modes = tuple(labelled.MODES) if args.mode == "both" else (args.mode,)
    sets = labelled_sets(args.sets, args.limit)
    mad = madial_sets(args.madial, args.sets, args.limit)
    public = locomo_sets(args.locomo, args.sets, args.limit)
    pool = pooled_sets(args.madial, args.sets, args.limit)
    archive_rule = (
        "default archive rules (older days summarised offline)"
        if args.summaries
        else f"archive.raw_days = {RAW_FOREVER} (every archived turn kept verbatim)"
    )
    datasets: list[Dataset] = [*public, *sets, *pool, *mad]
    names = ", ".join(d.name for d in datasets) or "none"
    print(f"variants: {', '.join(variants)}; sets: {names}; --jobs {args.jobs}")
    if (sets or pool) and "archived" in modes:
        print(f"archived mode: {archive_rule}")
    tasks: list[Task] = []
    for variant in variants:
        overrides = merge_overrides(VARIANTS[variant], extra)
        embedding = apply_overrides(Config(), overrides).embedding
        print(
            f"variant {variant}: {json.dumps(overrides) if overrides else 'product defaults'}"
            f" (embedding.provider {embedding.provider!r}, model {embedding.model or 'default'!r})"
        )
        for d in datasets:
            if isinstance(d, locomo.LocomoSet):
                # One task per conversation: they are the longest to store.
                tasks.extend(
                    Task(
                        variant, overrides, locomo.LocomoSet(d.name, d.language, (c,)), modes, False
                    )
                    for c in d.conversations
                )
            else:
                tasks.append(Task(variant, overrides, d, modes, args.summaries))
    started = time.perf_counter()
    results = Results()
    shown: set[tuple[str, str]] = set()
    for done in run_all(tasks, args.jobs):
        results.add(done, args.verbose, shown)
    wall_s = time.perf_counter() - started
    groups = ordered(results)
    baselines = baseline_groups(mad)
    print()
    print(main_table([*groups, *baselines]))
    print()
    print("frac@5 by question type (n):")
    print()
    print(type_table([g for g in groups if not g.key.dataset.startswith("madial-")]))
    print()
    print_timing(results.timing, wall_s, args.jobs)
    if args.json is not None:
        write_json(args, results, groups, baselines, archive_rule)
    return results


def print_timing(timing: Sequence[dict[str, Any]], wall_s: float, jobs: int) -> None:
    """Wall time of the whole run; storing and asking summed over the worker processes
    (which run side by side with --jobs above 1)."""
    total_q = sum(t["questions"] for t in timing)
    ingest_s = sum(t["ingest_s"] for t in timing)
    query_s = sum(t["query_s"] for t in timing)
    if not total_q or wall_s <= 0:
        return
    print(
        f"timing: {total_q} questions (both paths each) in {wall_s:.1f} s wall "
        f"({total_q / wall_s:.1f} questions/s, --jobs {jobs}); summed over workers: storing "
        f"{ingest_s:.1f} s, asking {query_s:.1f} s ({total_q / query_s if query_s else 0:.1f} "
        "questions/s)"
    )


def write_json(
    args: argparse.Namespace,
    results: Results,
    groups: Sequence[Group],
    baselines: Sequence[Group],
    archive_rule: str,
) -> None:
    def row(g: Group) -> dict[str, Any]:
        return {**asdict(g.key), **asdict(g.summary), "baseline": g.baseline}

    out = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "archive_rule": archive_rule,
        "variants": {name: VARIANTS[name] for name in chosen_variants(args)},
        "rows": [row(g) for g in [*groups, *baselines]],
        "types": [
            {
                **asdict(g.key),
                **{t: asdict(g.by_type(t)) for t in ("single", "multi", "temporal", "open")},
            }
            for g in groups
            if not g.key.dataset.startswith("madial-")
        ],
        "timing": list(results.timing),
        "questions": results.questions,
    }
    args.json.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"results written to {args.json}")


def main(argv: Sequence[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("recall_quality"):
        main()
