"""chatmem's search beside peers' engines: the same chunks and questions through each.

Run `python bench/peer_bench.py [--chunks N] [--queries N] [--passes N] [--quick]`
(the `bench` extra: jieba, tantivy, bm25s). Not a test: it prints figures. One
corpus (bench/corpus.py: 100 000 mixed Chinese/English chat-memory chunks, fixed seed)
and 200 questions made from its sentences (`query_targets`: each knows the sentence it
was made from, its label) go through

* **chatmem**: the real index on SQLite (`core.finder.search`, limit 10, words alone:
  `embedding.provider = "none"`; and `SearchIndex.search` of the same index, without
  the finder's question analysis). The chunks are daily-note files indexed by
  `sync_scope` (tokenized by the product's own tokenizer: rjieba search mode and
  stemmed latin words); size = the index database (its text, tokens and FTS5 postings).
  Hybrid recall is left out: the vectors of 100 000 chunks take the local model minutes
  of a core (bench/pg_scale_bench.py --hybrid and bench/recall_bench.py time it).
* **FTS5 unicode61**: an SQLite FTS5 table of the raw text with its default tokenizer,
  queried with the question's `\\w+` runs OR-ed, ranked by `bm25()`. unicode61 keeps
  a run of Chinese characters as one token, so a Chinese question finds only a chunk
  holding that exact run: what a plain FTS5 setup gives.
* **FTS5 + jieba**: the same table over text pre-tokenized by jieba
  (`cut_for_search`, lower-cased, punctuation dropped), questions tokenized alike.
* **tantivy**: the same jieba tokens (whitespace tokenizer, lower-cased), text stored,
  a should-match term per question token (BM25).
* **bm25s**: the same jieba tokens as lists (`BM25().index`), size = its saved index
  (no texts).

Per engine: build time (for the three jieba engines it includes jieba's tokenization of
the corpus, each time, since each would do it), size on disk, query latency p50/p95
(pooled over the passes; each query's own tokenization included), recall@10 of the
label (all questions, and the Chinese and the other ones apart) and overlap@10 with
chatmem's top 10; each figure also as a ratio to chatmem's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import machine_load, percentile, query_targets, sentences, table
from recall_bench import Corpus, write_daily_files

from memory_core.base import text as mtext
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.recall.index import SearchIndex
from memory_core.recall.request import SearchRequest

SEED = 20261201
CHUNKS = 100_000
QUERIES = 200
PASSES = 3
TOP = 10
WORD_RE = re.compile(r"\w+")
HAN_RE = re.compile(r"[\u4e00-\u9fff]")


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def dir_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class Engine:
    """One engine's figures: build seconds, bytes, per-pass query seconds, top lists."""

    name: str
    build_s: float = 0.0
    size: int = 0
    passes: list[list[float]] = field(default_factory=list)
    tops: list[list[int]] = field(default_factory=list)

    @property
    def samples(self) -> list[float]:
        return [s for p in self.passes for s in p]


# ---------------------------------------------------------------------------
# Tokenization for the peers


def jieba_tokens(text: str) -> list[str]:
    """jieba's search-mode words of `text`, lower-cased, punctuation and spaces dropped:
    how a project without a tokenizer of its own feeds Chinese to a BM25 engine."""
    import jieba

    return [w.lower() for w in jieba.cut_for_search(text) if WORD_RE.search(w)]


def jieba_all(texts: Sequence[str]) -> list[list[str]]:
    return [jieba_tokens(t) for t in texts]


def fts_match(tokens: Sequence[str]) -> str:
    """An FTS5 query that matches any of `tokens`, each as a quoted string."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(tokens))


# ---------------------------------------------------------------------------
# The engines


async def run_chatmem(
    root: Path,
    corpus: Corpus,
    questions: Sequence[str],
    passes: int,
    engine: Engine,
    bare: Engine,
) -> None:
    """`engine`: `core.finder.search` (what a user's search runs: the question's terms,
    time words and kind, then the ranking pipeline); `bare`: `SearchIndex.search` of the
    same index (the index and its ranking alone: the exact BM25 top N, `topk.py`, then
    the ranking pipeline)."""
    config = load_config(None, env={}, workspace=root)
    embedding = config.embedding.model_copy(update={"provider": "none"})
    config = config.model_copy(update={"embedding": embedding})
    ws = Workspace.at(root)
    async with MemoryCore.open(config) as core:
        index = core.guard.index
        assert isinstance(index, SearchIndex)
        await asyncio.to_thread(write_daily_files, ws, corpus, SEED)
        start = time.perf_counter()
        await index.sync_scope(corpus.scope)
        engine.build_s = time.perf_counter() - start
        key_of = {key: i for i, key in enumerate(corpus.keys)}
        for question in questions[:10]:
            await core.finder.search(corpus.scope, SearchRequest(question, limit=TOP))
        for number in range(passes):
            gc.collect()
            samples = []
            for question in questions:
                start = time.perf_counter()
                hits = await core.finder.search(corpus.scope, SearchRequest(question, limit=TOP))
                samples.append(time.perf_counter() - start)
                if number == 0:
                    engine.tops.append(
                        [key_of.get((h.path, h.anchor or h.line_from), -1) for h in hits]
                    )
            engine.passes.append(samples)
            samples = []
            for question in questions:
                start = time.perf_counter()
                hits = await index.search(corpus.scope, SearchRequest(question, limit=TOP))
                samples.append(time.perf_counter() - start)
                if number == 0:
                    bare.tops.append(
                        [key_of.get((h.path, h.anchor or h.line_from), -1) for h in hits]
                    )
            bare.passes.append(samples)
    with sqlite3.connect(ws.db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.size = bare.size = ws.db_path.stat().st_size
    bare.build_s = engine.build_s


def timed_queries(
    engine: Engine, questions: Sequence[str], passes: int, query: Callable[[str], list[int]]
) -> None:
    for question in questions[:10]:
        query(question)
    for number in range(passes):
        gc.collect()
        samples = []
        for question in questions:
            start = time.perf_counter()
            top = query(question)
            samples.append(time.perf_counter() - start)
            if number == 0:
                engine.tops.append(top)
        engine.passes.append(samples)


def run_fts5(
    path: Path,
    texts: Sequence[str],
    questions: Sequence[str],
    passes: int,
    engine: Engine,
    tokenize: Callable[[str], list[str]] | None,
) -> None:
    """FTS5 (unicode61) over the raw text (`tokenize` None) or over `tokenize`'s words
    joined by spaces."""
    start = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body, tokenize = 'unicode61')")
    if tokenize is None:
        rows = ((i, t) for i, t in enumerate(texts))
    else:
        rows = ((i, " ".join(tokenize(t))) for i, t in enumerate(texts))
    with conn:
        conn.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", rows)
    conn.execute("INSERT INTO docs (docs) VALUES ('optimize')")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.build_s = time.perf_counter() - start
    engine.size = dir_size(path)

    def query(question: str) -> list[int]:
        tokens = WORD_RE.findall(question.lower()) if tokenize is None else tokenize(question)
        if not tokens:
            return []
        return [
            int(r[0])
            for r in conn.execute(
                "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?",
                (fts_match(tokens), TOP),
            )
        ]

    timed_queries(engine, questions, passes, query)
    conn.close()


def run_tantivy(
    path: Path, texts: Sequence[str], questions: Sequence[str], passes: int, engine: Engine
) -> None:
    import tantivy

    start = time.perf_counter()
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("id", stored=True, indexed=False, fast=True)
    builder.add_text_field("body", stored=True, tokenizer_name="words")
    schema = builder.build()
    path.mkdir()
    index = tantivy.Index(schema, path=str(path))
    analyzer = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.lowercase())
        .build()
    )
    index.register_tokenizer("words", analyzer)
    writer = index.writer(heap_size=256 * 1024 * 1024, num_threads=1)
    for number, text in enumerate(texts):
        writer.add_document(tantivy.Document(id=number, body=" ".join(jieba_tokens(text))))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    engine.build_s = time.perf_counter() - start
    engine.size = dir_size(path)
    searcher = index.searcher()

    def query(question: str) -> list[int]:
        tokens = list(dict.fromkeys(jieba_tokens(question)))
        if not tokens:
            return []
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in tokens
        ]
        found = searcher.search(tantivy.Query.boolean_query(clauses), TOP)
        return [int(searcher.doc(address)["id"][0]) for _, address in found.hits]

    timed_queries(engine, questions, passes, query)


def run_bm25s(
    path: Path, texts: Sequence[str], questions: Sequence[str], passes: int, engine: Engine
) -> None:
    import bm25s

    start = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(jieba_all(texts), show_progress=False)
    engine.build_s = time.perf_counter() - start
    retriever.save(str(path))
    engine.size = dir_size(path)
    vocab = retriever.vocab_dict

    def query(question: str) -> list[int]:
        tokens = [t for t in dict.fromkeys(jieba_tokens(question)) if t in vocab]
        if not tokens:
            return []
        docs, scores = retriever.retrieve([tokens], k=TOP, show_progress=False, n_threads=1)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    timed_queries(engine, questions, passes, query)


# ---------------------------------------------------------------------------
# The report


def report(
    engines: Sequence[Engine], targets: Sequence[int], questions: Sequence[str], ours: Engine
) -> str:
    zh = [HAN_RE.search(q) is not None for q in questions]

    def recall(engine: Engine, which: Callable[[int], bool]) -> float:
        picked = [i for i in range(len(targets)) if which(i)]
        found = sum(targets[i] in engine.tops[i] for i in picked)
        return found / max(len(picked), 1)

    def overlap(engine: Engine) -> float:
        shares = []
        for mine, theirs in zip(engine.tops, ours.tops, strict=True):
            if not theirs and not mine:
                shares.append(1.0)
            else:
                shares.append(len(set(mine) & set(theirs)) / max(len(theirs), len(mine)))
        return statistics.mean(shares)

    base_recall = recall(ours, lambda i: True)
    base_p50 = percentile(ours.samples, 50)
    base_p95 = percentile(ours.samples, 95)
    rows = []
    for engine in engines:
        p50, p95 = percentile(engine.samples, 50), percentile(engine.samples, 95)
        every = recall(engine, lambda i: True)
        rows.append(
            [
                engine.name,
                f"{engine.build_s:.1f} ({engine.build_s / ours.build_s:.2f}x)",
                f"{engine.size / 2**20:.1f} ({engine.size / ours.size:.2f}x)",
                f"{p50 * 1000:.2f} ({p50 / base_p50:.2f}x)",
                f"{p95 * 1000:.2f} ({p95 / base_p95:.2f}x)",
                f"{every:.3f} ({every / base_recall:.2f}x)",
                f"{recall(engine, lambda i: zh[i]):.3f}",
                f"{recall(engine, lambda i: not zh[i]):.3f}",
                f"{overlap(engine):.3f}",
            ]
        )
    return table(
        [
            "engine",
            "build s",
            "size MiB",
            "query p50 ms",
            "query p95 ms",
            "recall@10",
            "zh q",
            "other q",
            "overlap@10 w/ chatmem",
        ],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=CHUNKS)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--quick", action="store_true", help="10 000 chunks, one pass")
    args = parser.parse_args()
    if args.quick:
        args.chunks, args.passes = args.chunks // 10, 1
    warnings.simplefilter("ignore")  # jieba's pkg_resources warning
    import jieba

    jieba.setLogLevel(60)
    jieba.initialize()
    mtext.warm_up()
    started = time.perf_counter()
    log(f"generating {args.chunks:,} chunks and {args.queries} questions")
    texts = sentences(args.chunks, SEED)
    pairs = query_targets(texts, args.queries, SEED + 1)
    targets = [t for t, _ in pairs]
    questions = [q for _, q in pairs]
    corpus = Corpus(f"{args.chunks:,}", ScopeKey("peer:bench"), texts)
    tmp = Path(tempfile.mkdtemp(prefix="chatmem-peer-bench-"))
    try:
        ours = Engine("chatmem search (SQLite, words)")
        bare = Engine("chatmem index alone")
        log("chatmem: index and queries")
        asyncio.run(run_chatmem(tmp / "ws", corpus, questions, args.passes, ours, bare))
        engines = [ours, bare]
        peers: list[tuple[str, Callable[[Engine], None]]] = [
            (
                "FTS5 unicode61 (raw text)",
                lambda e: run_fts5(tmp / "fts.db", texts, questions, args.passes, e, None),
            ),
            (
                "FTS5 unicode61 (jieba words)",
                lambda e: run_fts5(
                    tmp / "fts-jieba.db", texts, questions, args.passes, e, jieba_tokens
                ),
            ),
            (
                "tantivy (jieba words)",
                lambda e: run_tantivy(tmp / "tantivy", texts, questions, args.passes, e),
            ),
            (
                "bm25s (jieba words)",
                lambda e: run_bm25s(tmp / "bm25s", texts, questions, args.passes, e),
            ),
        ]
        for name, run in peers:
            log(name)
            engine = Engine(name)
            run(engine)
            engines.append(engine)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(
        f"peer bench, {time.perf_counter() - started:.0f} s: {args.chunks:,} chunks,"
        f" {len(questions)} questions x {args.passes} passes, top {TOP}; machine"
        f" {machine_load()}"
    )
    print("(x) = ratio to chatmem; recall@10 of the sentence each question was made from")
    print(report(engines, targets, questions, ours))


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("peer_bench"):
        main()
