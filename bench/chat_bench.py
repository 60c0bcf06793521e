"""Engine overhead of one chat turn, excluding the model.

A fake OpenAI-compatible server on 127.0.0.1 answers at once; the time spent inside
`LLMClient.chat` (HTTP round trip and the openai client's parsing) is measured separately
and subtracted, so the figure is what chatmem itself adds to a turn: storing and indexing
messages, prompt memories, recall over the scope's index, history window, tool plumbing.

    python bench/chat_bench.py [--quick]
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
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corpus import memory_entries, sentences

from memory_core.base.atomic import atomic_write_text
from memory_core.base.scope import ScopeKey
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.llm.client import ChatReply, LLMClient
from memory_core.longterm.memory_md_renderer import render_memory
from testkit.openai_server import FakeOpenAI

TURNS = 200
TARGET_P50_MS = 15.0


class TimedLLM(LLMClient):
    """Counts the wall time spent in the model so it can be subtracted."""

    spent = 0.0

    async def chat(self, *args: Any, **kwargs: Any) -> ChatReply:
        started = time.perf_counter()
        try:
            return await super().chat(*args, **kwargs)
        finally:
            TimedLLM.spent += time.perf_counter() - started


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(memories: int, turns: int, texts: list[str]) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="chatmem-chat-bench-"))
    try:
        async with FakeOpenAI(record=False, default_text="好的，记下了。OK.") as fake:
            env = {
                "CHATMEM_MODEL": "gpt-fake",
                "OPENAI_BASE_URL": fake.base_url,
                "OPENAI_API_KEY": "sk-bench",
            }
            config = load_config(None, env=env, workspace=root)
            scope = ScopeKey("peer:bench")
            now = datetime.now(UTC).replace(microsecond=0)
            entries = memory_entries(memories, now=now)
            core_for_paths = MemoryCore(config)
            path = core_for_paths.workspace.long_term_path(scope)
            core_for_paths.workspace.ensure_scope(scope)
            atomic_write_text(path, render_memory(entries, now=now), root=root)
            llm = TimedLLM(config.llm)
            async with MemoryCore.open(config, llm=llm) as core:
                await core.memories.prompt_memories(scope)  # first parse of the big file
                for text in texts[:10]:  # warm-up: index, caches, connections
                    await core.conversation.turn(scope, text)
                overheads: list[float] = []
                totals: list[float] = []
                for text in texts[10 : 10 + turns]:
                    TimedLLM.spent = 0.0
                    started = time.perf_counter()
                    await core.conversation.turn(scope, text)
                    total = time.perf_counter() - started
                    totals.append(total * 1000)
                    overheads.append((total - TimedLLM.spent) * 1000)
                size_kb = path.stat().st_size / 1024
        return {
            "memories": memories,
            "p50": statistics.median(overheads),
            "p95": percentile(overheads, 0.95),
            "total_p50": statistics.median(totals),
            "file_kb": size_kb,
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer turns, smaller store")
    parser.add_argument("--tiny", action="store_true", help="a smoke run: 5 turns, 100 memories")
    args = parser.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    turns = 5 if args.tiny else 40 if args.quick else TURNS
    sizes = [100] if args.tiny else [1_000, 10_000] if args.quick else [1_000, 100_000]
    texts = sentences(turns + 20, seed=7)
    rows = [asyncio.run(run(n, turns, texts)) for n in sizes]
    print(f"chat turn overhead excluding the model ({turns} turns, fake server answering at once)")
    print(
        f"{'memories':>9} {'MEMORY.md':>10} {'p50 ms':>8} {'p95 ms':>8} {'turn p50 ms':>12}  target"
    )
    for row in rows:
        target = f"p50 <= {TARGET_P50_MS:g} ms" if row["memories"] >= 100_000 else ""
        print(
            f"{int(row['memories']):>9} {row['file_kb']:>8.0f}KB {row['p50']:>8.2f} "
            f"{row['p95']:>8.2f} {row['total_p50']:>12.2f}  {target}"
        )


if __name__ == "__main__":
    from results import recorded_main

    with recorded_main("chat_bench"):
        main()
