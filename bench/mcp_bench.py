"""memory_search over MCP: what an agent waits for, stdio protocol included.

Run `python bench/mcp_bench.py [--quick] [--backend sqlite|postgres] [--dsn DSN]`. Not a
test: it prints figures.

One temporary workspace holds `peer:bench`, 100 000 chunks (`--quick`: 10 000) of
bench/corpus.py sentences written as daily-note files and indexed. Then the real command,
`chatmem mcp --workspace W --scope peer:bench`, runs as a subprocess and the official
SDK's client (`mcp.Client` over stdio) calls `memory_search` with the queries of
recall_bench (each made from one of the scope's sentences), after a warm-up. The same
queries through `core.finder.search` in this process give the figure without the
protocol, so the table shows what MCP itself adds (JSON-RPC framing, pipes, schema
validation, the result's JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import machine_load, percentile, queries, sentences, table
from recall_bench import Corpus, bench_storage, write_daily_files

from memory_core.base.scope import MAIN, ScopeKey
from memory_core.base.workspace import Workspace
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.recall.request import SearchRequest

SEED = 20261124
SCOPE = ScopeKey("peer:bench")
QUERIES = 200
PASSES = 3
WARM_UP = 20
MAX_RESULTS = 5


def log(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def timings(
    call: Callable[[str], Awaitable[object]], texts: Sequence[str]
) -> list[list[float]]:
    """Per pass, the seconds of each query."""
    for text in texts[:WARM_UP]:
        await call(text)
    passes = []
    for _ in range(PASSES):
        samples = []
        for text in texts:
            start = time.perf_counter()
            await call(text)
            samples.append(time.perf_counter() - start)
        passes.append(samples)
    return passes


def row(name: str, passes: list[list[float]]) -> list[str]:
    pooled = [s for p in passes for s in p]
    median = statistics.median(statistics.median(p) for p in passes)
    return [
        name,
        f"{median * 1000:.2f}",
        f"{percentile(pooled, 50) * 1000:.2f}",
        f"{percentile(pooled, 95) * 1000:.2f}",
        f"{max(pooled) * 1000:.1f}",
    ]


async def run(root: Path, size: int, storage: dict[str, str]) -> list[list[str]]:
    from mcp import Client, StdioServerParameters

    workspace = root / "ws"
    config = load_config(None, env=storage, workspace=workspace)
    corpus = Corpus(f"{size:,}", SCOPE, sentences(size, SEED))
    texts = queries(corpus.texts, QUERIES, SEED)
    async with MemoryCore.open(config, create=True) as core:
        await core.memories.touch(MAIN)  # a workspace `chatmem mcp` accepts, as `chatmem init`
        files = write_daily_files(Workspace.at(workspace), corpus, SEED)
        log(f"indexing {size:,} chunks from {files} files")
        stats = await core.reindex()
        log(f"{stats.chunks_added:,} chunks indexed; timing MemoryCore.search in process")

        async def in_process(text: str) -> object:
            return await core.finder.search(SCOPE, SearchRequest(text, limit=MAX_RESULTS))

        direct = await timings(in_process, texts)

    quiet = root / "chatmem.toml"
    quiet.write_text('log_level = "WARNING"\n', encoding="utf-8")
    command = shutil.which("chatmem") or str(Path(sys.executable).with_name("chatmem"))
    params = StdioServerParameters(
        command=command,
        args=["mcp", "--config", str(quiet), "--workspace", str(workspace), "--scope", SCOPE.value],
        env={**os.environ, **storage},
    )
    log("timing memory_search over stdio (chatmem mcp, the SDK's client)")
    async with Client(params) as client:

        async def over_mcp(text: str) -> object:
            result = await client.call_tool(
                "memory_search", {"query": text, "max_results": MAX_RESULTS}
            )
            if result.is_error:
                raise RuntimeError(f"memory_search failed: {result.content}")
            return result

        stdio = await timings(over_mcp, texts)
    return [
        row("MemoryCore.search (in process)", direct),
        row("memory_search over MCP stdio", stdio),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 000 chunks instead of 100 000")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--dsn", default="", help="an empty PostgreSQL database to use")
    parser.add_argument(
        "--tiny", action="store_true", help="a smoke run: 300 chunks, 20 queries, one pass"
    )
    args = parser.parse_args()
    if args.tiny:
        global QUERIES, PASSES, WARM_UP
        QUERIES, PASSES, WARM_UP = 20, 1, 2
    size = 300 if args.tiny else 10_000 if args.quick else 100_000
    with tempfile.TemporaryDirectory(prefix="chatmem-mcp-bench-") as tmp:
        root = Path(tmp)
        with bench_storage(args.backend, args.dsn, root) as (storage, server):
            print(f"memory_search at {size:,} chunks in one scope, {server}")
            print(
                f"{QUERIES} queries x {PASSES} passes after {WARM_UP} warm-up, "
                f"max_results={MAX_RESULTS}; {machine_load()}"
            )
            rows = asyncio.run(run(root, size, storage))
    print(table(["path", "median ms", "p50 ms", "p95 ms", "max ms"], rows))


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("mcp_bench"):
        main()
