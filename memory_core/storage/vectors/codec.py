"""How a vector is stored: little-endian float16, half the bytes of the float32 the
models give and the matrices search.

A 512-d vector is 1 KB stored instead of 2 KB. A float32 row was over half a 4 KB SQLite
page, so each took a page to itself, twice (the chunk's row and the cache entry): 8.3 KB
a vector on disk. Stored once as float16, three share a page: 1.55 KB a vector with its
chunk's row and the indexes (bench/vector_bench.py). What float16 loses does not show in
a ranking: each component keeps 11 significant bits, and on the labelled set and 100 000
chat-like vectors the top 10 were the same as float32's for every query, the largest
cosine moving by 5e-5. Everything in the process stays float32: the models' output, the
matrices, the products.

numpy is imported by the functions that need it, with a pure-Python fallback for
`to_stored`: the schema migration (migrations.py, `m010`) converts stored vectors in
every process that opens an old database, including one installed without the vector
extra.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

STORED_BYTES = 2
"""Bytes per component as stored."""
MEMORY_BYTES = 4
"""Bytes per component in the process (float32)."""


def to_stored(vec: bytes) -> bytes:
    """A float32 vector's bytes (native order, as `ndarray.tobytes()` gives them) as
    stored: little-endian float16, rounded to nearest."""
    try:
        import numpy as np
    except ImportError:  # the migration without the vector extra
        count = len(vec) // MEMORY_BYTES
        return struct.pack(f"<{count}e", *struct.unpack(f"={count}f", vec))
    return np.frombuffer(vec, dtype=np.float32).astype("<f2").tobytes()


def to_memory(stored: bytes) -> bytes:
    """A stored vector's bytes as float32 (native order), of unit length again."""
    return many_to_memory([stored])[0]


def many_to_memory(stored: Sequence[bytes]) -> list[bytes]:
    """Stored vectors as float32 bytes, in one conversion per size (a page of a load).

    Every vector is stored of unit length (an `Embedder` gives L2-normalised rows);
    rounding moves its length by up to about 1e-4, so it is scaled back: a cosine stays
    within [-1, 1] and a text's own vector scores 1."""
    if not stored:
        return []
    import numpy as np

    size = len(stored[0])
    if any(len(vec) != size for vec in stored):
        return [many_to_memory([vec])[0] for vec in stored]
    rows = np.frombuffer(b"".join(stored), dtype="<f2").astype(np.float32)
    rows = rows.reshape(len(stored), -1)
    normalise(rows)
    data, width = rows.tobytes(), rows.shape[1] * MEMORY_BYTES
    return [data[i : i + width] for i in range(0, len(data), width)]


def normalise(rows: npt.NDArray[np.float32]) -> None:
    """Scale each row of a float32 array decoded from float16 back to unit length, in
    place (see `many_to_memory`)."""
    import numpy as np

    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))[:, None]
    np.divide(rows, norms, out=rows, where=norms > 0)


def dim_of(stored: bytes) -> int:
    """Components of a stored vector."""
    return len(stored) // STORED_BYTES
