"""One tree's hybrid recall on a prepared PostgreSQL workspace, timed in a process of its own.

Run by bench/pg_scale_bench.py (`--hybrid`), once per tree and round, by the python of
the tree whose code is timed (its own venv, bench/trees.py): it imports only that tree's
`memory_core` and the standard library (never bench/corpus.py), so every revision runs
against the same database in the same run. Kept stable across revisions: the core's
parts are looked up where each revision keeps them (`guard` / `_guard`, `finder.recall`
/ the core's `recall`, `settle` / `drain`), and a revision without one of them prints
`{"unmeasurable": why}` instead of figures. Reads a JSON spec (the config's environment,
the workspace, each scope's query texts) from the file named by its one argument and
prints one JSON line of figures.

Per scope: how long from the core's open until its vectors answer at their steady state
(`load` + `wait_graph`: a matrix, a graph, or nothing to wait for; then `settle`,
the backfill's first survey of the scope, which finds nothing to embed), then
`core.finder.recall` of each query text (each text once, so neither the recall cache
nor the query-vector cache answers; the first `warm_up` untimed), then the dense search
alone (`vectors.search`, k = `dense_k`) of the same texts, embedded beforehand.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

NEEDED = ("load", "wait_graph", "embed_query", "search")
"""What the probe calls on the vector index, in every revision since 2a70d81."""


def _recall(core: Any) -> Any:
    finder = getattr(core, "finder", None)
    return finder.recall if finder is not None else core.recall


async def _settle(vectors: Any, sid: int) -> None:
    """The first survey of the scope over: `settle` (the revisions that have it), else
    every scheduled backfill drained."""
    settle = getattr(vectors, "settle", None)
    if settle is not None:
        await settle(sid, 3600)
    else:
        await vectors.drain()


def _scope_key() -> Any:
    """ScopeKey where the revision keeps it (the folder layout, then the flat one)."""
    for module in ("memory_core.base.scope", "memory_core.scope"):
        try:
            return importlib.import_module(module).ScopeKey
        except ModuleNotFoundError:
            continue
    raise ImportError("no ScopeKey in memory_core.base.scope or memory_core.scope")


async def probe(spec: dict[str, Any]) -> dict[str, Any]:
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore

    config: Any = load_config(None, env=spec["env"], workspace=Path(spec["workspace"]))
    embedding = config.embedding.model_copy(update={"provider": "local"})
    config = config.model_copy(update={"embedding": embedding})
    scope_key = _scope_key()
    started = time.perf_counter()
    out: dict[str, Any] = {"scopes": {}}
    async with MemoryCore.open(config) as core:
        out["open_s"] = time.perf_counter() - started
        index = (getattr(core, "guard", None) or getattr(core, "_guard")).index  # noqa: B009
        vectors = getattr(index, "vectors", None)
        if vectors is None:
            return {"unmeasurable": "the core opened without a vector index"}
        missing = [name for name in NEEDED if not hasattr(vectors, name)]
        if not hasattr(vectors, "settle") and not hasattr(vectors, "drain"):
            missing.append("settle or drain")
        if missing:
            return {"unmeasurable": f"its vector index has no {', '.join(missing)}"}
        recall = _recall(core)
        out["vectors"] = type(vectors).__name__
        for name, texts in spec["scopes"].items():
            scope = scope_key(name)
            sid = await index.scope_id(scope, create=False)  # type: ignore[attr-defined]
            assert sid is not None, name
            begin = time.perf_counter()
            rows = await vectors.load(sid)
            graph = await vectors.wait_graph(sid)
            # The first look at a scope surveys it for chunks without a vector (the
            # backfill, seconds of Python at 100 000 chunks): over before timing.
            await _settle(vectors, sid)
            ready = time.perf_counter() - begin
            warm = spec["warm_up"]
            for text in texts[:warm]:
                await recall(scope, text)
            gc.collect()
            recalls = []
            for text in texts[warm:]:
                t0 = time.perf_counter()
                await recall(scope, text)
                recalls.append(time.perf_counter() - t0)
            embedded = [await vectors.embed_query(text) for text in texts]
            dense = []
            for number, query in enumerate(embedded):
                t0 = time.perf_counter()
                await vectors.search(sid, query, spec["dense_k"])
                if number >= warm:
                    dense.append(time.perf_counter() - t0)
            out["scopes"][name] = {
                "rows": rows,
                "graph": graph,
                "ready_s": ready,
                "recall": recalls,
                "dense": dense,
            }
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(asyncio.run(probe(spec))), flush=True)


if __name__ == "__main__":
    main()
