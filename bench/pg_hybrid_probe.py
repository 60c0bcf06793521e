"""One tree's hybrid recall on a prepared PostgreSQL workspace, timed in a process of its own.

Run by bench/pg_scale_bench.py (`--hybrid`), once per source tree and round, with
`PYTHONPATH` set to the tree whose code is timed: it imports only that tree's
`memory_core` and the standard library (never bench/corpus.py, which puts this checkout
first on the path), so the "before" and "after" trees run against the same database in
the same run. Reads a JSON spec (the config's environment, the workspace, each scope's
query texts) from the file named by its one argument and prints one JSON line of figures.

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
import json
import sys
import time
from pathlib import Path
from typing import Any


async def probe(spec: dict[str, Any]) -> dict[str, Any]:
    from memory_core.base.scope import ScopeKey
    from memory_core.config import load_config
    from memory_core.engine import MemoryCore

    config = load_config(None, env=spec["env"], workspace=Path(spec["workspace"]))
    embedding = config.embedding.model_copy(update={"provider": "local"})
    config = config.model_copy(update={"embedding": embedding})
    started = time.perf_counter()
    out: dict[str, Any] = {"scopes": {}}
    async with MemoryCore.open(config) as core:
        out["open_s"] = time.perf_counter() - started
        index = core.guard.index
        assert index is not None
        vectors = index.vectors  # type: ignore[attr-defined]
        out["vectors"] = type(vectors).__name__
        for name, texts in spec["scopes"].items():
            scope = ScopeKey(name)
            sid = await index.scope_id(scope, create=False)  # type: ignore[attr-defined]
            assert sid is not None, name
            begin = time.perf_counter()
            rows = await vectors.load(sid)
            graph = await vectors.wait_graph(sid)
            # The first look at a scope surveys it for chunks without a vector (the
            # backfill, seconds of Python at 100 000 chunks): over before timing.
            await vectors.settle(sid, 3600)
            ready = time.perf_counter() - begin
            warm = spec["warm_up"]
            for text in texts[:warm]:
                await core.finder.recall(scope, text)
            gc.collect()
            recall = []
            for text in texts[warm:]:
                t0 = time.perf_counter()
                await core.finder.recall(scope, text)
                recall.append(time.perf_counter() - t0)
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
                "recall": recall,
                "dense": dense,
            }
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(asyncio.run(probe(spec))), flush=True)


if __name__ == "__main__":
    main()
