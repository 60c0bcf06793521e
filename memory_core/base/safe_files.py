"""The workspace is a boundary: the only ways the product opens, lists, makes and replaces
files and folders under a workspace root (docs/formats.md, "Files").

A path is refused when it resolves outside the root (a symlink anywhere along it that
leads out, a hard-to-see one in a parent folder included); a link inside that points
inside keeps working. A FIFO, device or socket is refused without being waited on (it
is never opened for reading, and every open is non-blocking and checked by `fstat`), and
every read is bounded, so `/dev/zero` or a huge file is one clear line, not a hang or a
`MemoryError`. The checks run again on the opened descriptor, so a link swapped in
between the check and the open is refused too.

Every refusal is a `FileRefused` (a `MemoryFileError`): front ends print one line, the index
scan skips the file with one warning, and other scopes go on being served.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

from memory_core.base.errors import FileRefused
from memory_core.base.scope import ScopeKey, is_hashed_slug, is_valid_slug, scope_slug

log = logging.getLogger(__name__)

KIB = 1 << 10
MIB = 1 << 20

LONG_TERM_BYTES = 512 * MIB
"""MEMORY.md / LONG_TERM.md: ~50 MB is a real workspace; ten times that is not a file
anyone keeps by hand, and still fits in memory."""
NOTE_BYTES = 256 * MIB
"""Daily notes, archives, summaries, event logs, spool segments."""
SNAPSHOT_BYTES = 64 * MIB
"""SNAPSHOT.md and the state files beside it."""
SMALL_BYTES = 64 * KIB
"""Key files, the workspace id, markers: a few bytes each."""

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_OPEN_FLAGS = _NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@functools.lru_cache(maxsize=64)
def _real_root(root: str) -> str:
    """The workspace root with its own links resolved (a root may itself be a link)."""
    return os.path.realpath(root)


def shown(root: Path, path: Path | str) -> str:
    """`path` as people read it: workspace-relative when it is under the root."""
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _within(real_root: str, real: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _resolve(root: Path, path: Path | str) -> tuple[str, os.stat_result | None]:
    """The real path of `path` and the `lstat` of what is there (None: nothing yet),
    refused unless it stays under the workspace's real root.

    Below the root one `lstat` per part, instead of `realpath`'s one per part from `/`
    (a daily append and a long-term load pay this on every call); a part that is a link
    is resolved whole and must land inside again."""
    real_root = _real_root(str(root))
    text = os.path.abspath(path)
    for base in (os.path.abspath(root), real_root):
        if _within(base, text):
            rest = text[len(base) :]
            break
    else:  # named from elsewhere: inside only if it resolves there
        text = os.path.realpath(text)
        if not _within(real_root, text):
            raise FileRefused(f"refused {path}: outside the workspace ({text})")
        rest = text[len(real_root) :]
    current = real_root
    st: os.stat_result | None = None
    parts = [part for part in rest.split(os.sep) if part]
    linked = False
    for index, part in enumerate(parts):
        step = os.path.join(current, part)
        try:
            st = os.lstat(step)
        except (FileNotFoundError, NotADirectoryError):
            # Nothing there yet: what would be made is made under `current`.
            current, st = os.path.normpath(os.path.join(step, *parts[index + 1 :])), None
            break
        if stat.S_ISLNK(st.st_mode):
            if index == 2 and parts[:2] == list(SCOPES_FOLDER):
                raise FileRefused(
                    f"refused {shown(root, path)}: the scope folder {part} is a link, "
                    "and a scope's folder must be its own"
                )
            linked = True
            step = os.path.realpath(step)
            try:
                st = os.lstat(step)
            except (FileNotFoundError, NotADirectoryError):
                st = None
        current = step
        if not _within(real_root, current):
            break
    if not _within(real_root, current):
        raise FileRefused(
            f"refused {shown(root, path)}: a link leads outside the workspace ({current})"
        )
    named = scope_owner(parts)
    if linked:
        _refuse_other_scope(root, path, real_root, named, current)
    if named:
        _refuse_foreign_key_file(root, path, real_root, named)
    return current, st


SCOPES_FOLDER = ("memory", "scopes")
"""Where the scopes other than main keep their folders (base/workspace.py)."""


def scope_owner(parts: list[str]) -> str | None:
    """Pure: whose files a workspace-relative path names: a scope folder's name, `""`
    for the main scope (`MEMORY.md`, `memory/`), None for the rest (`.chatmem/`)."""
    if parts[:2] == list(SCOPES_FOLDER):
        return parts[2] if len(parts) > 2 else None
    if parts[:1] in (["memory"], ["MEMORY.md"]):
        return ""
    return None


def _real_owner(real_root: str, real: str) -> str | None:
    """Whose files a real path is, the scope folders and main's files looked up by their
    own real paths (a link inside to inside may have moved any of them)."""
    scopes = os.path.realpath(os.path.join(real_root, *SCOPES_FOLDER))
    if _within(scopes, real) and real != scopes:
        return real[len(scopes) :].lstrip(os.sep).split(os.sep)[0]
    memory = os.path.realpath(os.path.join(real_root, "memory"))
    main_file = os.path.realpath(os.path.join(real_root, "MEMORY.md"))
    if real == main_file or _within(memory, real):
        return ""
    return None


def _refuse_other_scope(
    root: Path, path: Path | str, real_root: str, named: str | None, real: str
) -> None:
    """A link inside the workspace must not cross from one scope's files into another's
    (Bob's note linked to Ann's would write Bob's words into Ann's memory, and read
    hers back to him)."""
    owner = _real_owner(real_root, real)
    if owner is not None and owner != named:
        whose = "the main scope's files" if owner == "" else f"scope folder {owner}"
        raise FileRefused(
            f"refused {shown(root, path)}: a link leads into {whose}, "
            "and a scope's files must be its own"
        )


_KEY_FILE = ".scope"
_KEYS_SEEN: set[tuple[str, int, int, int, int]] = set()
"""Key files found to name their folder's scope, by stamp (a refusal is read again)."""


def _refuse_foreign_key_file(root: Path, path: Path | str, real_root: str, slug: str) -> None:
    """A scope folder whose key file names another scope (a copy of Ann's folder under
    Bob's name) is not Bob's: refused. Only plain names, which say their key; a hashed
    name's key file is checked and repaired by the workspace (`Workspace.ensure_scope`).
    One `lstat` per open, the file read again only when it changed."""
    if not is_valid_slug(slug) or is_hashed_slug(slug):
        return
    key_path = os.path.join(real_root, *SCOPES_FOLDER, slug, _KEY_FILE)
    try:
        st = os.lstat(key_path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(st.st_mode):
        return  # names no key itself; where a link leads is checked when it is opened
    stamp = (key_path, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    if stamp in _KEYS_SEEN:
        return
    if _names_slug(key_path, slug, st.st_size):
        if len(_KEYS_SEEN) > 4096:
            _KEYS_SEEN.clear()
        _KEYS_SEEN.add(stamp)
    else:
        raise FileRefused(
            f"refused {shown(root, path)}: scope folder {slug}'s key file names another "
            "scope, and a scope's folder must be its own"
        )


def _names_slug(key_path: str, slug: str, size: int) -> bool:
    """Whether the key file names the scope of folder `slug` (unreadable or empty: no
    other scope is named, so it is not refused)."""
    if size > SMALL_BYTES:
        return True
    try:
        fd = os.open(key_path, os.O_RDONLY | _OPEN_FLAGS)
    except OSError:
        return True
    try:
        text = os.read(fd, SMALL_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return True
    finally:
        os.close(fd)
    if not text or "\x00" in text:
        return True
    return scope_slug(ScopeKey(text)) == slug


def inside(root: Path, path: Path | str) -> Path:
    """The real path of `path` (every link resolved), refused unless it stays under the
    workspace's real root. Parts that do not exist yet are fine: they will be made
    inside."""
    return Path(_resolve(root, path)[0])


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse_special(root: Path, path: Path | str, mode: int) -> None:
    kind = _kind(mode)
    if kind is not None:
        raise FileRefused(f"refused {shown(root, path)}: {kind}, not a memory file")


def _checked(root: Path, path: Path | str) -> tuple[str, os.stat_result | None]:
    real, st = _resolve(root, path)
    if st is not None:
        _refuse_special(root, path, st.st_mode)
    return real, st


def check_file(root: Path, path: Path | str) -> Path:
    """`inside`, and refused when it exists and is no regular file (not opened: a FIFO
    is never waited on). Missing files pass: the caller says what missing means."""
    return Path(_checked(root, path)[0])


def file_stat(root: Path, path: Path | str) -> os.stat_result | None:
    """The file's stat (None when missing), refused as `check_file` refuses: what a
    caller compares stamps with, in the one walk the check makes."""
    return _checked(root, path)[1]


SWAP_RETRIES = 3
"""Opens tried again when the file was replaced between its check and its open: another
process's atomic rename of the same file (a MEMORY.md write) is no attack, and the next
check and open see the new file. A swap every time is refused."""


class _Swapped(FileRefused):
    """The file opened is not the one checked."""


def open_fd(root: Path, path: Path | str, flags: int, mode: int = 0o644) -> int:
    """An open descriptor of a regular file inside the workspace (the caller closes it),
    never blocking on a FIFO. `flags` are `os.open`'s; the non-blocking flag is dropped
    again once the file is known to be regular. FileNotFoundError passes through."""
    for _ in range(SWAP_RETRIES - 1):
        try:
            return _open_checked(root, path, flags, mode)
        except _Swapped:
            continue
    return _open_checked(root, path, flags, mode)


def _open_checked(root: Path, path: Path | str, flags: int, mode: int) -> int:
    real, checked = _checked(root, path)
    try:
        fd = os.open(real, flags | _OPEN_FLAGS, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EMLINK):
            # A link swapped in since the check, or a FIFO/socket with no other end.
            raise FileRefused(
                f"refused {shown(root, path)}: a link or special file, not a memory file"
            ) from exc
        raise
    try:
        st = os.fstat(fd)
        _refuse_special(root, path, st.st_mode)
        _same_file(root, path, st, checked)
        if fcntl is not None:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _same_file(
    root: Path, path: Path | str, opened: os.stat_result, checked: os.stat_result | None
) -> None:
    """The file opened is the one checked (a parent folder swapped for a link between
    the check and the open lands on another file, and is caught here). A file the open
    made is looked up again."""
    if checked is None:
        try:
            checked = os.stat(inside(root, path))
        except FileNotFoundError:
            checked = None
    if checked is None or (checked.st_dev, checked.st_ino) != (opened.st_dev, opened.st_ino):
        raise _Swapped(f"refused {shown(root, path)}: it changed while being opened")


def read_bytes(root: Path, path: Path | str, limit: int) -> bytes:
    """The whole file, refused when it is larger than `limit` bytes (named with the bound,
    so a person knows what to split or which link to remove)."""
    fd = open_fd(root, path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise _too_big(root, path, size, limit)
        # One read of the size stat gave (and a byte more, to see it grow): a 40 MB file
        # read in pieces and joined was copied twice.
        first = os.read(fd, size + 1)
        chunks, got = [first], len(first)
        while first and got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew while being read
            raise _too_big(root, path, got, limit)
        return first if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def read_head(root: Path, path: Path | str, size: int) -> tuple[bytes, int]:
    """The first `size` bytes of the file, and its whole size."""
    fd = open_fd(root, path, os.O_RDONLY)
    try:
        total = os.fstat(fd).st_size
        return os.pread(fd, size, 0), total
    finally:
        os.close(fd)


def read_text(root: Path, path: Path | str, limit: int, errors: str = "strict") -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError passes with `errors="strict"`)."""
    return read_bytes(root, path, limit).decode("utf-8", errors)


def _too_big(root: Path, path: Path | str, size: int, limit: int) -> FileRefused:
    return FileRefused(
        f"refused {shown(root, path)}: {size} bytes, over the {limit // MIB or limit} "
        f"{'MiB' if limit >= MIB else 'byte'} bound for this kind of file"
    )


def make_dirs(root: Path, path: Path | str) -> Path:
    """Make a folder (and its parents) inside the workspace; its real path. A folder
    already there costs the one walk (every append and atomic write asks)."""
    found, st = _resolve(root, path)
    real = Path(found)
    if st is not None and stat.S_ISDIR(st.st_mode):
        return real
    real.mkdir(parents=True, exist_ok=True)
    if not real.is_dir() or inside(root, path) != real:
        raise FileRefused(f"refused {shown(root, path)}: not a folder inside the workspace")
    return real


@contextlib.contextmanager
def scan_dir(root: Path, path: Path | str) -> Iterator[Iterator[os.DirEntry[str]]]:
    """`os.scandir` of a folder inside the workspace, its entries named as `path` names
    them (entries that are links are the caller's to skip or to open through here)."""
    inside(root, path)
    with os.scandir(path) as listing:
        yield listing


def entries(root: Path, path: Path | str) -> list[os.DirEntry[str]]:
    """`scan_dir`'s entries as a list; none when the folder is missing, no folder, or
    refused (warned once): what a scan or listing that is polled wants."""
    try:
        with scan_dir(root, path) as listing:
            return list(listing)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except FileRefused as exc:
        warn_once(exc)
        return []


def writable_target(root: Path, path: Path | str) -> Path:
    """Where a replacing write of `path` lands: its real path inside the workspace (a
    link inside to inside is written through), refused when that is a special file."""
    real = check_file(root, path)
    make_dirs(root, real.parent)
    return real


_WARNED: set[str] = set()


def warn_once(exc: FileRefused) -> None:
    """One warning line per refused path and process: scans and listings that meet it
    again (they are polled) say it once."""
    text = str(exc)
    if text not in _WARNED:
        _WARNED.add(text)
        log.warning("%s; skipped", text)
