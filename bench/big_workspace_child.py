"""One measurement of big_workspace_bench in a fresh process of the tree under test.

Run by that tree's own interpreter (its venv: `installs.py`), so it must be stable across
revisions: it imports only what every revision since the flat layout has (`MemoryCore`
from `memory_core.engine`, `load_config` from `memory_core.config`), finds `MAIN` where
the revision keeps it, and passes plain strings: `SearchRequest` and the `memories` /
`finder` parts are newer than 2a70d81, whose core has `capture` and `search` itself.
Prints one JSON line: each phase's wall time and (`... cpu`) the process's CPU time.

    <tree's python> bench/big_workspace_child.py '{"workspace": ..., "config": ...,
        "action": "prepare|capture|search|later", "query": ...}'
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import time
from typing import Any

CAPTURE_TEXT = "the big workspace bench captured this line at {n}"


def main_scope() -> Any:
    for name in ("memory_core.base.scope", "memory_core.scope"):
        try:
            return importlib.import_module(name).MAIN
        except ImportError:
            continue
    raise SystemExit("this tree has no memory_core MAIN scope the child knows")


async def capture(core: Any, scope: Any, text: str) -> None:
    memories = getattr(core, "memories", None)
    if memories is not None:
        await memories.capture(scope, text)
    else:
        await core.capture(scope, text)


async def search(core: Any, scope: Any, query: str) -> None:
    finder = getattr(core, "finder", None)
    if finder is not None:
        await finder.search(scope, query)  # a plain query: limit 10, as SearchRequest's
    else:
        await core.search(scope, query, limit=10)


def child(spec: dict[str, Any]) -> dict[str, float]:
    """Each phase timed twice: wall time, and the process's CPU time (`... cpu`), which
    another process's load changes far less."""
    started = time.perf_counter()
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore

    main = main_scope()
    imported = time.perf_counter()
    config = load_config(spec["config"], env={}, workspace=spec["workspace"])
    out: dict[str, float] = {"import": imported - started}
    marks: list[tuple[float, float]] = []

    def mark(name: str | None = None) -> None:
        now = (time.perf_counter(), time.process_time())
        if name is not None:
            out[name] = now[0] - marks[-1][0]
            out[f"{name} cpu"] = now[1] - marks[-1][1]
        marks.append(now)

    async def run() -> None:
        action = spec["action"]
        mark()
        async with MemoryCore.open(config, create=action == "prepare") as core:
            mark("open")
            if action in ("capture", "prepare"):
                await capture(core, main, CAPTURE_TEXT.format(n=time.time_ns()))
                mark("capture")
            elif action in ("search", "later"):
                if action == "later":
                    # A running bot: the open's sync is older than the stale interval.
                    await asyncio.sleep(config.recall.sync_min_interval_seconds + 0.2)
                    mark()
                await search(core, main, spec["query"])
                mark("search")
            mark()
        mark("close")

    asyncio.run(run())
    out["process"] = time.perf_counter() - started
    return out


if __name__ == "__main__":
    print(json.dumps(child(json.loads(sys.argv[1]))))
