"""Where a scope's files live, and the one place that decides what a scope may read.

Layout (docs/formats.md, "Files"): the main scope keeps `MEMORY.md` and `memory/` at the
workspace root; every other scope keeps the same roles under `memory/scopes/<slug>/`, with
`LONG_TERM.md` in place of `MEMORY.md`.

A scope whose key is too long for a directory name gets a hashed name, which cannot be
decoded: its key lives in the directory's `.scope` file, and a second copy in
`.chatmem/scope-keys/<slug>`. Both are written atomically, and each repairs the other
when it is empty or wrong (at every `ensure_scope`, and when scopes are listed), so a
torn or emptied `.scope` no longer hides the scope and its memories.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from dataclasses import dataclass
from datetime import date
from pathlib import Path, PurePosixPath

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text, write_error
from memory_core.base.errors import ChatmemError, FileRefused, PathRefused, ScopeError
from memory_core.base.scope import (
    MAIN,
    ScopeKey,
    is_hashed_slug,
    is_valid_slug,
    key_from_slug,
    scope_slug,
)

log = logging.getLogger(__name__)

STATE_DIR = ".chatmem"
SCOPE_KEY_FILE = ".scope"
SCOPE_KEYS_DIR = "scope-keys"
IDENTITY_FILE = "workspace-id"
_UNLISTED: set[str] = set()
STATE_FILES = (
    *(
        f"{name}{suffix}"
        for name in ("index.sqlite3", "journal.sqlite3")
        for suffix in ("", "-wal", "-shm", "-journal")
    ),
    IDENTITY_FILE,
)
"""Files of `.chatmem/` that SQLite and the workspace open directly."""
STATE_DIRS = ("locks", "owners", "parsed", "forgotten", SCOPE_KEYS_DIR, "spool", "graphs")
"""Folders of `.chatmem/` whose files the product makes and reads."""
MAIN_LONG_TERM = "MEMORY.md"
SCOPED_LONG_TERM = "LONG_TERM.md"


@dataclass(frozen=True, slots=True)
class Workspace:
    root: Path

    @classmethod
    def at(cls, root: Path | str) -> Workspace:
        return cls(Path(root).expanduser().absolute())

    # --- shared state -----------------------------------------------------------------
    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def db_path(self) -> Path:
        return self.state_dir / "index.sqlite3"

    @property
    def identity_path(self) -> Path:
        return self.state_dir / IDENTITY_FILE

    def identity(self) -> str:
        """The workspace's own id, made at first need (blocking: a small file).

        A shared PostgreSQL database records the id of the workspace it serves, so a
        workspace that is pointed at another's database is refused instead of reading and
        writing the other's memories. Two processes making it at once agree: the first
        link wins and the other reads it."""
        path = self.identity_path
        with contextlib.suppress(FileNotFoundError):
            return _read_identity(self.root, path)
        draft = path.with_name(f".{IDENTITY_FILE}.{uuid.uuid4().hex}")
        atomic_write_text(draft, uuid.uuid4().hex + "\n", root=self.root)  # a MemoryFileError line
        try:
            os.link(safe_files.inside(self.root, draft), safe_files.inside(self.root, path))
        except FileExistsError:
            pass
        except OSError as exc:
            raise write_error("workspace id not recorded", path, exc) from exc
        finally:
            with contextlib.suppress(OSError):
                draft.unlink()
        return _read_identity(self.root, path)

    def replace_file(self, path: Path, text: str) -> None:
        """Write a file of the workspace atomically, through its boundary (`safe_files`:
        never through a link out): for front ends, which write no file otherwise."""
        atomic_write_text(path, text, root=self.root)

    def check_state(self) -> None:
        """Refuse a workspace whose own state leads outside it (blocking: a few stats):
        `.chatmem/`, its databases (which SQLite opens itself) and its folders must be
        in the workspace and be what they say (no FIFO for a database), so no index,
        journal or lock file is ever made or written outside."""
        for name in STATE_FILES:
            safe_files.check_file(self.root, self.state_dir / name)
        for name in STATE_DIRS:
            safe_files.inside(self.root, self.state_dir / name)

    @property
    def locks_dir(self) -> Path:
        return self.state_dir / "locks"

    @property
    def scopes_dir(self) -> Path:
        return self.root / "memory" / "scopes"

    @property
    def scope_keys_dir(self) -> Path:
        """Second copies of the keys of hashed scope directories."""
        return self.state_dir / SCOPE_KEYS_DIR

    # --- per scope --------------------------------------------------------------------
    def memory_dir(self, scope: ScopeKey) -> Path:
        """Directory of the scope's daily notes, archives and summaries."""
        if scope.is_main:
            return self.root / "memory"
        return self.scopes_dir / scope_slug(scope)

    def long_term_path(self, scope: ScopeKey) -> Path:
        if scope.is_main:
            return self.root / MAIN_LONG_TERM
        return self.memory_dir(scope) / SCOPED_LONG_TERM

    def backup_path(self, scope: ScopeKey) -> Path:
        path = self.long_term_path(scope)
        return path.with_name(path.name + ".bak")

    def daily_path(self, scope: ScopeKey, day: date) -> Path:
        return self.memory_dir(scope) / f"{day.isoformat()}.md"

    def summary_dir(self, scope: ScopeKey) -> Path:
        return self.memory_dir(scope) / "summary"

    def parse_cache_path(self, scope: ScopeKey) -> Path:
        """Where the parse of the scope's long-term file is kept (`longterm/parse_cache.py`
        adds the suffixes): under `.chatmem/`, which nothing that serves a scope reads."""
        return self.state_dir / "parsed" / scope_slug(scope)

    def lock_name(self, scope: ScopeKey, what: str) -> str:
        return f"{scope_slug(scope)}.{what}"

    def relative(self, path: Path) -> str:
        """Workspace-relative POSIX path, the form shown to people and to the model."""
        return path.relative_to(self.root).as_posix()

    def ensure_scope(self, scope: ScopeKey) -> None:
        """Create the scope's directory and record its key (hashed slugs cannot be decoded:
        their key files are checked and repaired on every call, a read of two tiny files)."""
        directory = self.memory_dir(scope)
        safe_files.make_dirs(self.root, directory)
        if scope.is_main:
            return
        key_file = directory / SCOPE_KEY_FILE
        if is_hashed_slug(directory.name):
            _keep_key(self.root, key_file, scope)
            _keep_key(self.root, self.scope_keys_dir / directory.name, scope)
        elif not key_file.exists():
            atomic_write_text(key_file, scope.value, root=self.root)

    def scopes(self) -> list[ScopeKey]:
        """Every scope with a directory, main first, others sorted by key."""
        found: list[ScopeKey] = []
        # A refused scopes folder lists no scope but main (warned once).
        children = [Path(e.path) for e in safe_files.entries(self.root, self.scopes_dir)]
        for child in children:
            key = self._scope_of_dir(child)
            if key is not None:
                found.append(key)
        return [MAIN, *sorted(found, key=lambda k: k.value)]

    def has_scope(self, scope: ScopeKey) -> bool:
        """Whether `scopes()` lists `scope`, asked of its one directory: a command on
        one scope does not list the others."""
        return scope.is_main or self._scope_of_dir(self.memory_dir(scope)) == scope

    def scope_of_dir(self, directory: Path) -> ScopeKey | None:
        """The scope `directory` (a child of `scopes_dir`) holds, as `scopes()` decides."""
        return self._scope_of_dir(directory)

    def _scope_of_dir(self, directory: Path) -> ScopeKey | None:
        slug = directory.name
        if not directory.is_dir() or directory.is_symlink() or not is_valid_slug(slug):
            return None
        if not is_hashed_slug(slug):
            # A stray directory may decode to invalid UTF-8, NUL, or a non-canonical
            # spelling of another scope (`~61` for `a`): none of those is a scope.
            try:
                key = key_from_slug(slug)
            except ScopeError:
                return None
            if scope_slug(key) != slug or key.is_main:
                return None
            try:  # a copy of another scope's folder (its key file names that scope)
                safe_files.inside(self.root, directory / SCOPE_KEY_FILE)
            except FileRefused as exc:
                safe_files.warn_once(exc)
                return None
            return key
        key_file = directory / SCOPE_KEY_FILE
        copy = self.scope_keys_dir / slug
        recorded = _read_key(self.root, key_file, slug)
        if recorded is None:
            # Empty, torn or wrong: the second copy tells, and puts it right.
            recorded = _read_key(self.root, copy, slug)
            if recorded is None:
                if slug not in _UNLISTED:  # once per process: listings are polled
                    _UNLISTED.add(slug)
                    log.warning("scope directory %s has no readable key file: not listed", slug)
                return None
            _repair_quietly(self.root, key_file, recorded)
        elif _read_key(self.root, copy, slug) != recorded:
            _repair_quietly(self.root, copy, recorded)  # a workspace from before the copies existed
        return recorded

    # --- reading on behalf of a scope -------------------------------------------------
    def resolve_readable(self, scope: ScopeKey, requested: str) -> Path:
        """Resolve a path a tool asked for, refusing anything outside the scope's files.

        Refused: absolute paths, `..`, NUL, backslashes, non-Markdown files, symlinks that
        lead elsewhere, and for the main scope every other scope's directory.
        """
        text = requested.strip()
        if not text or "\x00" in text or "\\" in text:
            raise PathRefused(f"refused path {requested!r}: not a plain relative path")
        pure = PurePosixPath(text)
        if pure.is_absolute() or text.startswith("~") or any(p == ".." for p in pure.parts):
            raise PathRefused(f"refused path {requested!r}: outside this scope's memory")
        if pure.suffix != ".md":
            raise PathRefused(f"refused path {requested!r}: only Markdown memory files")
        if pure.as_posix() in (MAIN_LONG_TERM, SCOPED_LONG_TERM):
            candidate = self.long_term_path(scope)
        else:
            candidate = self.root / pure
        allowed_root = self.memory_dir(scope)
        # A scope folder that is a link, or a link into another scope's files: refused.
        try:
            real_allowed, real_long_term, real = (
                safe_files.inside(self.root, path)
                for path in (allowed_root, self.long_term_path(scope), candidate)
            )
        except OSError as exc:  # a name too long, a file where a folder is named
            raise PathRefused(f"refused path {requested!r}: {exc.strerror}") from None
        real_root = Path(os.path.realpath(self.root))
        inside = real == real_long_term or real_allowed in real.parents
        if scope.is_main and Path(os.path.realpath(self.scopes_dir)) in (real, *real.parents):
            inside = False
        if not inside or real_root not in real.parents:
            raise PathRefused(f"refused path {requested!r}: outside this scope's memory")
        return real


def _read_identity(root: Path, path: Path) -> str:
    try:
        text = safe_files.read_text(root, path, safe_files.SMALL_BYTES, "replace").strip()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ChatmemError(f"cannot read the workspace id in {path}: {exc.strerror}") from exc
    if not text or not text.isalnum():
        raise ChatmemError(f"{path} does not hold a workspace id (32 hex digits)")
    return text


def _read_key(root: Path, path: Path, slug: str) -> ScopeKey | None:
    """The key recorded at `path` if it is one and names the directory `slug` (a key
    file that is a link out, a FIFO or too big is no key: the repair replaces it)."""
    try:
        key = ScopeKey(safe_files.read_text(root, path, safe_files.SMALL_BYTES))
    except (OSError, UnicodeDecodeError, ScopeError, FileRefused):
        return None
    return key if scope_slug(key) == slug else None


def _keep_key(root: Path, path: Path, scope: ScopeKey) -> None:
    """Make `path` hold exactly `scope`'s key (written atomically: never torn)."""
    try:
        current: bytes | None = safe_files.read_bytes(root, path, safe_files.SMALL_BYTES)
    except (OSError, FileRefused):
        current = None
    if current == scope.value.encode("utf-8"):
        return
    if current is not None:
        log.warning("%s did not hold the scope's key; repaired", path)
    atomic_write_text(path, scope.value, root=root)


def _repair_quietly(root: Path, path: Path, key: ScopeKey) -> None:
    """A repair made while listing: a failure leaves the listing right, and is logged."""
    try:
        atomic_write_text(path, key.value, root=root)
    except (OSError, ChatmemError) as exc:
        log.warning("could not repair %s: %s", path, exc)
    else:
        log.warning("repaired %s (scope %s)", path, key)
