"""Embedders: texts to unit vectors for recall by meaning (the optional `vector` extra).

`build_embedder(settings)` picks one from the `[embedding]` settings: a local model
shipped in a package (local.py), any OpenAI-compatible server (remote.py), or None for
BM25 alone. memory_core/storage/vectors/backfill.py makes and stores their vectors,
memory_core/storage/vectors/index.py searches them.
Nothing here imports numpy or a model until an embedder is used.
"""

from memory_core.embedding.base import Embedder, EmbeddingError
from memory_core.embedding.factory import build_embedder
from memory_core.embedding.local import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, local_model_available

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "Embedder",
    "EmbeddingError",
    "build_embedder",
    "local_model_available",
]
