"""The child side of bench/embedder_bench.py's part 0: one fresh process of one tree's
installed code (its venv's python runs this file) loads a local model and embeds twice.

Kept stable across revisions: it imports only the standard library, numpy and
`memory_core.embedding.local`'s `LocalEmbedder`, `LOCAL_MODELS` and
`local_model_available`, which 2a70d81 has too (its `LocalEmbedder` takes no `cache`:
`info` says so, and the parent passes "-" for it). Prints one JSON line.

    <tree's python> bench/embedder_load_child.py info
    <tree's python> bench/embedder_load_child.py load MODEL CACHE   # CACHE "-": no argument
"""

from __future__ import annotations

import json
import resource
import sys
import time


def info() -> dict[str, object]:
    """The models this tree has installed and whether its embedder takes a model cache."""
    import inspect

    try:
        from memory_core.embedding.local import (
            LOCAL_MODELS,
            LocalEmbedder,
            local_model_available,
        )
    except ImportError as error:
        return {"unmeasurable": f"no local embedder ({error})"}
    return {
        "models": sorted(m for m in LOCAL_MODELS if local_model_available(m)),
        "cache": "cache" in inspect.signature(LocalEmbedder).parameters,
    }


def load(model: str, cache: str) -> dict[str, float]:
    started = time.perf_counter()
    import numpy  # noqa: F401

    from memory_core.embedding.local import LocalEmbedder

    imported = time.perf_counter()
    cpu = time.process_time()
    embedder = LocalEmbedder(model) if cache == "-" else LocalEmbedder(model, cache=cache)
    embedder.embed_sync(["我上次说的那家餐厅叫什么？"])
    loaded = time.perf_counter()
    load_cpu = time.process_time() - cpu
    embedder.embed_sync(["what did I say about my trip to Japan with my sister?"])
    second = time.perf_counter()
    return {
        "imports": imported - started,
        "load": loaded - imported,
        "load_cpu": load_cpu,
        "second": second - loaded,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["info"]:
        print(json.dumps(info()), flush=True)
    elif argv[:1] == ["load"] and len(argv) == 3:
        print(json.dumps(load(argv[1], argv[2])), flush=True)
    else:
        raise SystemExit("usage: embedder_load_child.py info | load MODEL CACHE")


if __name__ == "__main__":
    main(sys.argv[1:])
