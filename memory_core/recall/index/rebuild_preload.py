"""Imported by the fork server a rebuild's tokenizing workers start from, never by the
product itself: the workers' code and the tokenizer's dictionary, loaded once in the
fork server, so each worker forks from it ready instead of importing them (~0.2 s of
CPU) and loading the dictionary (~0.15 s) on its own, once per worker per rebuild.

Importing this module is its whole job: the dictionary's load is its side effect. A
load that fails here is left to the worker, which meets the error and reports it as a
worker of a fork server without this module would (the fork server ignores only an
`ImportError` of its preloads: anything else would end it, and every worker with it)."""

from __future__ import annotations

import contextlib

import memory_core.recall.index.rebuild  # noqa: F401  (the workers' entry point)
from memory_core.base import text

with contextlib.suppress(Exception):  # the worker loads it again and reports it
    text.warm_up()
