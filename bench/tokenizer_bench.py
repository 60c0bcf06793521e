"""Benchmark behind the choices documented in `memory_core/base/text.py`.

Run with `/work/venv/bin/python bench/tokenizer_bench.py`.  It compares jieba
and rjieba (dictionary load time, throughput, agreement) on a seeded sample of
bilingual chat text, measures the full `memory_core.base.text.tokenize`
pipeline, and scores segmentation variants (search vs precise mode, HMM,
single Han characters) on a small labelled BM25 retrieval set.  Not a test.
"""

from __future__ import annotations

import argparse
import functools
import logging
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rank_bm25 import BM25Okapi

from memory_core.base import text
from testkit.chat_sample import CHUNK_CHARS, SEED, generate_sentences, make_chunks

SENTENCES = 6000
HAN_RUN = re.compile(f"[{text._HAN}]+")

# ---------------------------------------------------------------------------
# Backends


def import_jieba() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import jieba
    jieba.setLogLevel(logging.WARNING)
    return jieba


class JiebaAdapter:
    """Gives a `jieba.Tokenizer` rjieba's call signatures (text, hmm)."""

    def __init__(self, tokenizer: object) -> None:
        self._tk = tokenizer

    def cut(self, text: str, hmm: bool = True) -> list[str]:
        return list(self._tk.lcut(text, HMM=hmm))  # type: ignore[attr-defined]

    def cut_for_search(self, text: str, hmm: bool = True) -> list[str]:
        return list(self._tk.lcut_for_search(text, HMM=hmm))  # type: ignore[attr-defined]

    def tokenize(
        self, text: str, mode: str = "default", hmm: bool = True
    ) -> list[tuple[str, int, int]]:
        return list(self._tk.tokenize(text, mode=mode, HMM=hmm))  # type: ignore[attr-defined]


def best_of(repeats: int, func: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        timings.append(time.perf_counter() - start)
    return min(timings)


def measure_loads() -> tuple[dict[str, float], text._Segmenter, JiebaAdapter]:
    loads: dict[str, float] = {}
    start = time.perf_counter()
    import rjieba

    loads["rjieba import (builds dict)"] = time.perf_counter() - start
    loads["rjieba new Jieba()"] = best_of(3, rjieba.Jieba)

    jieba = import_jieba()
    with tempfile.TemporaryDirectory() as tmp:
        cold = jieba.Tokenizer()  # type: ignore[attr-defined]
        cold.tmp_dir = tmp
        start = time.perf_counter()
        cold.initialize()
        loads["jieba initialize, no cache"] = time.perf_counter() - start
        warm = jieba.Tokenizer()  # type: ignore[attr-defined]
        warm.tmp_dir = tmp
        start = time.perf_counter()
        warm.initialize()
        loads["jieba initialize, cache hit"] = time.perf_counter() - start
    return loads, rjieba, JiebaAdapter(warm)


# ---------------------------------------------------------------------------
# Throughput and agreement


def han_runs(chunks: Sequence[str]) -> list[list[str]]:
    return [HAN_RUN.findall(chunk) for chunk in chunks]


def throughput(
    chunks: Sequence[str], per_chunk: Callable[[str], object], repeats: int = 5
) -> tuple[float, float]:
    chars = sum(len(chunk) for chunk in chunks)

    def run() -> None:
        for chunk in chunks:
            per_chunk(chunk)

    run()  # warm caches
    seconds = best_of(repeats, run)
    return chars / seconds, len(chunks) / seconds


def agreement(
    runs_per_chunk: Sequence[Sequence[str]],
    left: Callable[[str], list[str]],
    right: Callable[[str], list[str]],
) -> tuple[float, float, list[tuple[str, list[str], list[str]]]]:
    runs_same = runs_total = chunks_same = 0
    examples: list[tuple[str, list[str], list[str]]] = []
    for runs in runs_per_chunk:
        chunk_ok = True
        for run in runs:
            a, b = left(run), right(run)
            runs_total += 1
            if a == b:
                runs_same += 1
            else:
                chunk_ok = False
                if len(examples) < 3:
                    examples.append((run, a, b))
        chunks_same += chunk_ok
    return runs_same / max(runs_total, 1), chunks_same / max(len(runs_per_chunk), 1), examples


# ---------------------------------------------------------------------------
# Retrieval quality

LABELLED: list[tuple[str, str]] = [
    # (memory text, query that should find it)
    ("我们的服务用了数据库连接池来减少延迟", "数据库"),
    ("公司在做一个向量检索服务，基于 Faiss", "向量检索"),
    ("用户养了一只猫，名字叫年糕", "猫"),
    ("用户的生日是三月十二号，记得提醒", "生日"),
    ("测试框架用的是 pytest 而不是 unittest", "用什么测试框架"),
    ("用户对花生过敏，点菜时要注意", "过敏"),
    ("中华人民共和国成立于1949年", "共和国"),
    ("我的笔记本电脑是 MacBook Pro", "电脑"),
    ("他在北京大学读研究生", "北京"),
    ("用户住在上海市浦东新区", "浦东"),
    ("她是素食主义者，不吃肉", "素食"),
    ("客户反馈登录接口偶尔返回502错误", "502"),
    ("服务器的内存不够了，需要扩容", "内存扩容"),
    ("用户的女儿今年上小学一年级", "女儿"),
    ("正在学习日语，准备考N2", "日语"),
    ("我们的自然语言处理模型还需要调优", "自然语言"),
    ("周五晚上团队聚餐吃四川火锅", "聚餐"),
    ("他每天晚上跑步五公里，已经坚持三年", "跑步"),
    ("用户喜欢看刘慈欣的科幻小说", "科幻"),
    ("下周三要做季度工作汇报", "汇报"),
    ("我养了一只柯基犬，叫豆豆", "养了什么狗"),
    ("老板要求所有接口加上限流", "限流"),
    ("The user prefers dark mode in every editor", "dark mode"),
    ("Deploys run on Kubernetes clusters in Frankfurt", "kubernetes deployment"),
    ("升级到 Python 3.12 之后 mypy 报了很多错", "python 3.12"),
    ("用户说他的研究方向是计算机视觉", "视觉"),
]


def evaluate(distractors: Sequence[str], tokenizer: Callable[[str], list[str]]) -> dict[str, float]:
    corpus = [memory for memory, _ in LABELLED] + list(distractors)
    index = BM25Okapi([tokenizer(doc) or ["\u0000"] for doc in corpus])
    hits1 = hits5 = 0
    reciprocal: list[float] = []
    empty = 0
    for target, (_, query) in enumerate(LABELLED):
        terms = tokenizer(query)
        if not terms:
            empty += 1
            reciprocal.append(0.0)
            continue
        scores = index.get_scores(terms)
        ranked = sorted(range(len(corpus)), key=lambda i: -scores[i])
        rank = ranked.index(target) + 1 if scores[target] > 0 else len(corpus) + 1
        hits1 += rank == 1
        hits5 += rank <= 5
        reciprocal.append(1.0 / rank if rank <= len(corpus) else 0.0)
    total = len(LABELLED)
    return {
        "hit@1": hits1 / total,
        "hit@5": hits5 / total,
        "MRR": statistics.fmean(reciprocal),
        "empty queries": float(empty),
    }


# ---------------------------------------------------------------------------
# Report


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def report_sample(sentences: Sequence[str], chunks: Sequence[str]) -> None:
    total = sum(len(c) for c in chunks)
    han = sum(len(r) for rs in han_runs(chunks) for r in rs)
    print(f"sample: {len(sentences)} sentences -> {len(chunks)} chunks, {total} chars")
    print(f"        mean chunk {total / len(chunks):.1f} chars, Han share {han / total:.0%}")
    print("        e.g. " + " | ".join(chunks[:2]))
    print()


def report_loads(loads: dict[str, float]) -> None:
    print("dictionary load")
    print(table(["what", "seconds"], [(k, f"{v:.3f}") for k, v in loads.items()]))
    print()


def segment_runs(func: Callable[[str], list[str]]) -> Callable[[str], None]:
    def per_chunk(chunk: str) -> None:
        for run in HAN_RUN.findall(chunk):
            func(run)

    return per_chunk


def pipeline_throughput(chunks: Sequence[str], segmenter: text._Segmenter) -> tuple[float, float]:
    text.warm_up()
    original = text._STATE.segmenter
    text._STATE.segmenter = segmenter
    try:
        return throughput(chunks, text.tokenize)
    finally:
        text._STATE.segmenter = original


def report_throughput(chunks: Sequence[str], backends: dict[str, text._Segmenter]) -> None:
    rows: list[tuple[str, ...]] = []
    for name, seg in backends.items():
        operations: list[tuple[str, Callable[[str], list[str]]]] = [
            ("cut hmm=off", functools.partial(seg.cut, hmm=False)),
            ("cut hmm=on", functools.partial(seg.cut, hmm=True)),
            ("cut_for_search hmm=off", functools.partial(seg.cut_for_search, hmm=False)),
        ]
        for label, func in operations:
            chars_s, chunks_s = throughput(chunks, segment_runs(func))
            rows.append((name, label, f"{chars_s:,.0f}", f"{chunks_s:,.0f}", ""))
        chars_s, chunks_s = pipeline_throughput(chunks, seg)
        rows.append(
            (
                name,
                "full tokenize() pipeline",
                f"{chars_s:,.0f}",
                f"{chunks_s:,.0f}",
                f"{chars_s / CHUNK_CHARS:,.0f}",
            )
        )
    print("throughput (one core, best of 5, after warm-up)")
    headers = ["backend", "operation", "chars/s", "chunks/s", f"{CHUNK_CHARS}-char chunks/s"]
    print(table(headers, rows))
    print()


def report_agreement(chunks: Sequence[str], rjieba: text._Segmenter, jieba: JiebaAdapter) -> None:
    runs = han_runs(chunks)
    rows: list[tuple[str, ...]] = []
    examples: list[tuple[str, str, list[str], list[str]]] = []
    modes: list[tuple[str, Callable[[str], list[str]], Callable[[str], list[str]]]] = [
        ("cut hmm=off", lambda r: rjieba.cut(r, False), lambda r: jieba.cut(r, False)),
        ("cut hmm=on", lambda r: rjieba.cut(r, True), lambda r: jieba.cut(r, True)),
        (
            "cut_for_search hmm=off",
            lambda r: rjieba.cut_for_search(r, False),
            lambda r: jieba.cut_for_search(r, False),
        ),
    ]
    for label, left, right in modes:
        per_run, per_chunk, differing = agreement(runs, left, right)
        rows.append((label, f"{per_run:.2%}", f"{per_chunk:.2%}"))
        examples += [(label, *example) for example in differing]
    print("segmentation agreement rjieba vs jieba (on the Han runs tokenize() segments)")
    print(table(["mode", "runs identical", "chunks identical"], rows))
    for label, run, a, b in examples:
        print(f"  differs ({label}): {run}: rjieba={a} jieba={b}")
    edge = "𠀀㐀好"
    for hmm in (False, True):
        print(
            f"  edge case outside the sample, {edge} hmm={hmm}: "
            f"rjieba={rjieba.cut(edge, hmm)} jieba={jieba.cut(edge, hmm)}"
        )
    print()


def report_retrieval() -> None:
    rows: list[tuple[str, ...]] = []
    default = text._SEGMENTATION
    distractors = make_chunks(generate_sentences(3000, seed=SEED + 1))
    for search_mode in (True, False):
        for hmm in (False, True):
            for keep_single in (True, False):
                variant = replace(
                    default, search_mode=search_mode, hmm=hmm, keep_single_han=keep_single
                )
                text._SEGMENTATION = variant
                try:
                    scores = evaluate(distractors, text.tokenize)
                finally:
                    text._SEGMENTATION = default
                chosen = " <- chosen" if variant == default else ""
                rows.append(
                    (
                        "search" if search_mode else "precise",
                        "on" if hmm else "off",
                        "keep" if keep_single else "drop",
                        f"{scores['hit@1']:.2f}",
                        f"{scores['hit@5']:.2f}",
                        f"{scores['MRR']:.3f}",
                        f"{scores['empty queries']:.0f}{chosen}",
                    )
                )
    print(
        f"BM25 retrieval: {len(LABELLED)} labelled memories among {len(distractors)} "
        "generated distractor chunks (rank_bm25 BM25Okapi)"
    )
    headers = ["mode", "hmm", "single Han", "hit@1", "hit@5", "MRR", "empty queries"]
    print(table(headers, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{SENTENCES // 10} sentences, not {SENTENCES}"
    )
    args = parser.parse_args()
    loads, rjieba, jieba = measure_loads()
    sentences = generate_sentences(SENTENCES // 10 if args.quick else SENTENCES)
    chunks = make_chunks(sentences)
    report_sample(sentences, chunks)
    report_loads(loads)
    backends: dict[str, text._Segmenter] = {"rjieba": rjieba, "jieba": jieba}
    report_throughput(chunks, backends)
    report_agreement(chunks, rjieba, jieba)
    report_retrieval()


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("tokenizer_bench"):
        main()
