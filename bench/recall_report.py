"""The report of bench/recall_bench.py: latency, size and recall quality per corpus size,
against the targets and the previous run's baseline."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from corpus import table
from recall_measure import (
    COUNTS,
    DENSE_K,
    POSTGRES_QUERY_TARGETS,
    TARGETS,
    Latency,
    SizeResult,
    WorkspaceFigures,
    ms,
    rate,
)

# ---------------------------------------------------------------------------
# Report


def recall_report(results: list[SizeResult], figures: WorkspaceFigures, largest: int) -> None:
    embedding = figures.embedding
    hybrid = f"recall, hybrid ({embedding.model})" if embedding else "recall, hybrid"
    print(
        f"automatic recall latency in ms (MemoryCore.recall, {COUNTS.timed} queries x passes, each"
        " call a query text of its own: no cache answers; median = median of the passes'"
        " medians; p50/p95/max pooled)"
    )
    rows: list[Sequence[object]] = []
    for r in results:
        for label, lat in (
            ("recall, words (provider none)", r.recall_words),
            (hybrid, r.recall_hybrid),
        ):
            if not lat.passes:
                continue
            target = ""
            if r.chunks == largest and not r.stress:
                target = (
                    f"p50 <= {TARGETS['recall_p50']:g}, p95 <= {TARGETS['recall_p95']:g}"
                    + ("  MET" if lat.p(50) * 1000 <= TARGETS["recall_p50"] else "  MISSED")
                    + ("/MET" if lat.p(95) * 1000 <= TARGETS["recall_p95"] else "/MISSED")
                )
            name = r.name + (" (stress: tiny vocabulary)" if r.stress else "")
            rows.append((name, label, len(lat.pooled), *lat.cells(), target))
    print(table(["chunks", "what", "samples", "median", "p50", "p95", "max", "target"], rows))
    if figures.hybrid_skipped:
        print(f"hybrid recall skipped: {figures.hybrid_skipped}")
    print()
    if embedding is None:
        return

    print(
        f"embedding for reindex ({embedding.model}, the hybrid core's background backfill of"
        " the bench scopes, timed from its open to MemoryCore.vectors_ready())"
    )
    embed_s = embedding.total_s - embedding.load_s
    rows = [
        (
            f"backfill ({embedding.vectors:,} chunks)",
            f"{embedding.total_s:.1f} s: {rate(embedding.vectors, embedding.total_s)} chunks/s",
            f"model load {embedding.load_s:.1f} s included;"
            f" {rate(embedding.vectors, embed_s)} chunks/s after it",
        ),
        (
            "vectors in the database",
            f"{embedding.vectors:,} in {embedding.scopes} scopes",
            "the bench scopes only (bulk and stress scopes have no directory)"
            if embedding.scopes <= embedding.bench_scopes
            else f"MORE scopes than the {embedding.bench_scopes} bench scopes",
        ),
    ]
    for name, count, seconds, graph in embedding.matrices:
        rows.append(
            (
                f"matrix load, {name} chunks",
                f"{count:,} rows in {ms(seconds)} ms",
                f"{count * embedding.dim * 4 / 2**20:,.1f} MiB of float32; "
                + ("searched through its graph (build included)" if graph else "exact search"),
            )
        )
    for label, lat, note in (
        (
            "query embedding alone (embed of one text)",
            embedding.query_embed,
            "the first step of every hybrid recall",
        ),
        (
            f"dense search alone ({embedding.dense_rows:,} rows, k {DENSE_K})",
            embedding.dense_search,
            "VectorIndex.search: matrix product, top k, read back",
        ),
    ):
        if lat.passes:
            _, p50, p95, worst = lat.cells()
            rows.append((label, f"p50 {p50} ms, p95 {p95} ms, max {worst} ms", note))
    rows.append(
        (
            "BLAS while hybrid recall was timed",
            embedding.blas,
            "a model's thread limit can outlive its batches: 2 threads slow small products",
        )
    )
    rows.append(
        (
            "database with everything and the vectors",
            f"{embedding.db_after / 2**20:,.1f} MiB",
            f"{(embedding.db_after - figures.db_after_all) / max(embedding.vectors, 1):,.0f}"
            " bytes/vector more (appends included)",
        )
    )
    print(table(["what", "figure", "note"], rows))
    print()


def quality_report(results: list[SizeResult], largest: int) -> None:
    """Recall@5 against the baseline, asked two ways (the target: docs/decisions/0011)."""
    print(
        f"quality over {COUNTS.quality:,} queries (ours = SearchIndex.search, min_score 0;"
        " recall@5 = the query's source sentence is among the 5 hits; 'same words' = ours searched with"
        " the baseline's words, a list of words: weight 1 each, no time, no kind of answer;"
        " 'as asked' = ours searched with the query's text, read as a question; overlap and"
        " 'as good' compare the same-words top 5 with the baseline's: our hit scores, by the"
        " baseline's BM25, at least the baseline's 5th / 1st best)"
    )
    rows: list[Sequence[object]] = []
    for r in results:
        target = ""
        if r.chunks == largest and not r.stress:
            words, asked = TARGETS["same_words_margin"], TARGETS["as_asked_margin"]
            met = "MET" if r.recall_same_words >= r.recall_base - words / 100 else "MISSED"
            met_asked = "MET" if r.recall_ours >= r.recall_base - asked / 100 else "MISSED"
            target = (
                f"same words >= baseline - {words:g}, as asked >= baseline - {asked:g}"
                f" points  {met}/{met_asked}"
            )
        questions = (
            f"{r.read_as_question}: {r.recall_ours_question:.1%} / {r.recall_base_question:.1%}"
            if r.read_as_question
            else "0"
        )
        rows.append(
            (
                r.name + (" (stress)" if r.stress else ""),
                f"{r.recall_base:.1%}",
                f"{r.recall_same_words:.1%}",
                f"{r.recall_ours:.1%}",
                questions,
                f"{r.overlap:.1%}",
                f"{r.equivalent:.1%}",
                f"{r.same_top1:.1%}",
                target,
            )
        )
    print(
        table(
            [
                "chunks",
                "recall@5 baseline",
                "ours, same words",
                "ours, as asked",
                f"read as a question (of {COUNTS.quality:,}): ours as asked / baseline",
                "top-5 overlap",
                "top-5 as good (ties count)",
                "top-1 as good",
                "target",
            ],
            rows,
        )
    )
    print()


def report(results: list[SizeResult], figures: WorkspaceFigures, backend: str) -> None:
    largest = max(r.chunks for r in results if not r.stress)
    targets = {**TARGETS, **(POSTGRES_QUERY_TARGETS if backend == "postgres" else {})}

    def mark(r: SizeResult, text: str, target: str) -> str:
        return f"{text}  (target {target})" if r.chunks == largest and not r.stress else text

    print("build and tokenization (same run; ours = first index of the scope from its files)")
    rows: list[Sequence[object]] = []
    for r in results:
        rows.append(
            (
                r.name,
                f"{r.chars / r.chunks:.0f}",
                r.files or "-",
                f"{r.build_s:.2f} s" + (" (add_prepared)" if r.stress else ""),
                rate(r.chunks, r.build_s),
                f"{r.tokenize_s + r.baseline_build_s:.2f} s",
                rate(r.chunks, r.tokenize_s),
                rate(r.chars, r.tokenize_s),
            )
        )
    print(
        table(
            [
                "chunks",
                "chars/chunk",
                "files",
                "ours: build",
                "ours: chunks/s",
                "baseline: tokenize + BM25Okapi",
                "tokenize chunks/s",
                "tokenize chars/s",
            ],
            rows,
        )
    )
    print()

    print(
        f"query latency in ms over {COUNTS.timed} queries x passes (limit 5; median = median of"
        " the passes' medians; p50/p95/max pooled)"
    )
    rows = []
    for r in results:
        for label, lat in (
            ("MemoryCore.search", r.core_search),
            ("SearchIndex.search", r.index_search),
            ("baseline get_scores+top5", r.baseline),
        ):
            median, p50, p95, worst = lat.cells()
            target = ""
            if r.chunks == largest and not r.stress and label != "baseline get_scores+top5":
                target = (
                    f"p50 <= {targets['query_p50']:g}, p95 <= {targets['query_p95']:g}"
                    + ("  MET" if lat.p(50) * 1000 <= targets["query_p50"] else "  MISSED")
                    + ("/MET" if lat.p(95) * 1000 <= targets["query_p95"] else "/MISSED")
                )
            name = r.name + (" (stress: tiny vocabulary)" if r.stress else "")
            rows.append((name, label, len(lat.pooled), median, p50, p95, worst, target))
    print(table(["chunks", "what", "samples", "median", "p50", "p95", "max", "target"], rows))
    print()

    recall_report(results, figures, largest)

    def note_rows(title: str, latency: Callable[[SizeResult], Latency], note: str) -> None:
        print(title)
        rows: list[Sequence[object]] = []
        for r in results:
            lat = latency(r)
            if not lat.passes:
                continue
            target = ""
            if r.chunks == largest:
                met = "MET" if lat.p(50) * 1000 <= TARGETS["add_p50"] else "MISSED"
                target = f"p50 <= {TARGETS['add_p50']:g} ms  {met}{note}"
            rows.append((r.name, len(lat.pooled), *lat.cells(), target))
        print(
            table(["chunks", "samples", "median ms", "p50 ms", "p95 ms", "max ms", "target"], rows)
        )
        print()

    note_rows(
        "add one note as the issue defines it: tokenize + index + commit"
        " (tokenize, then SearchIndex.add_prepared of the note)",
        lambda r: r.index_note,
        "",
    )
    note_rows(
        "add one note end to end: MemoryCore.append_daily"
        " (file append + fsync as well, overlapped with the index write)",
        lambda r: r.append,
        " (with the file write)",
    )

    quality_report(results, largest)

    print("workspace")
    rows = [
        *reindex_rows(figures),
        (
            f"bulk add_prepared ({figures.bulk_chunks:,} chunks, {figures.bulk_scopes} scopes)",
            f"{figures.bulk_s:.1f} s: {figures.bulk_chunks / figures.bulk_s:,.0f} chunks/s",
            "includes generating the text",
        ),
        (
            f"staleness check before a search ({figures.stale_files} files, no change)",
            f"median {ms(statistics.median(figures.stale_check))} ms",
            "paid by a search at most every sync_min_interval (2 s)",
        ),
        (
            "MemoryCore.open on the full workspace",
            f"median {statistics.median(figures.reopen):.2f} s",
            "",
        ),
        (
            f"database after the bench scopes ({sum(r.chunks for r in results if not r.stress):,})",
            f"{figures.db_after_bench / 2**20:,.1f} MiB",
            "",
        ),
        (
            f"database with everything ({figures.total_chunks:,} chunks)",
            f"{figures.db_after_all / 2**20:,.1f} MiB",
            f"{figures.db_after_all / figures.total_chunks:,.0f} bytes/chunk",
        ),
    ]
    print(table(["what", "figure", "note"], rows))


def reindex_rows(figures: WorkspaceFigures) -> list[tuple[str, str, str]]:
    """The full reindex's rows: its rate against the target, and this process's CPU."""
    reindex_s = statistics.median(s for s, _ in figures.reindex)
    reindex_chunks = figures.reindex[0][1]
    per_s = reindex_chunks / reindex_s
    met = "MET" if per_s >= TARGETS["reindex_chunks_s"] else "MISSED"
    return [
        (
            f"full reindex (MemoryCore.reindex, {reindex_chunks:,} chunks in files)",
            f"median {reindex_s:.2f} s of {len(figures.reindex)}: {per_s:,.0f} chunks/s",
            f"target >= {TARGETS['reindex_chunks_s']:,} chunks/s  {met}; load"
            f" {', '.join(f'{x:.1f}' for x in figures.reindex_load)} (CPU-bound: every core)",
        ),
        (
            "  of which this process's CPU (writer thread and event loop)",
            f"median {statistics.median(figures.reindex_cpu):.2f} s:"
            f" {reindex_chunks / statistics.median(figures.reindex_cpu):,.0f} chunks per CPU s",
            "not the tokenizing workers' (processes of their own)",
        ),
    ]


def reindex_report(figures: WorkspaceFigures) -> None:
    """`--only reindex`: the workspace table's reindex rows alone."""
    print("workspace")
    print(table(["what", "figure", "note"], reindex_rows(figures)))
