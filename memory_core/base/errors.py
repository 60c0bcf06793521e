"""One root error with a subclass per area, so front ends can print one clear line for
anything the user can fix and keep tracebacks for real bugs."""

import logging

log = logging.getLogger(__name__)


def install_hint(extra: str) -> str:
    """How to add an optional extra. Always from the checkout: on the package registry the
    name `chatmem` belongs to an unrelated project, which an install by that name would
    fetch instead."""
    return f"python -m pip install -e '.[{extra}]' in the checkout"


class ChatmemError(Exception):
    """Root of every error a user can cause or fix (bad input, bad config, bad files)."""


class ConfigError(ChatmemError):
    """A setting is missing, unknown or of the wrong type; the message names key and file."""


class ScopeError(ChatmemError):
    """A scope key or inbound context cannot be turned into a scope."""


class MemoryFileError(ChatmemError):
    """A memory file (MEMORY.md, a daily note, a file of the workspace) cannot be read or
    written, or a capture was not saved: the memory itself failed, and no fallback
    covers it. Not the database's `StorageError`, which callers outside the backends
    catch to go on from the files."""


class FileRefused(MemoryFileError):
    """A workspace path the product will not open (`base/safe_files.py`): a link that
    leads outside the workspace, a FIFO, device or socket, or a file over its size bound."""


class EntryNotFound(ChatmemError):
    """No entry with that id exists in the scope."""


class WorkspaceMissing(ChatmemError):
    """The workspace asked for does not exist, and the caller did not ask to create it: a
    mistyped path must not silently become a new, empty workspace."""


class PathRefused(ChatmemError):
    """A path asked for lies outside what the caller's scope may read."""


class StorageError(ChatmemError):
    """The database under the memory failed (either backend): the family every caller
    outside the backends catches, so none of them names a driver's exceptions.

    Each backend translates its driver's errors into this family where its statements
    run (`storage/db.py` for SQLite, `storage/pg/database.py` for PostgreSQL), so a
    failure reads the same whichever is configured. Code that survives a failed database
    write (the file is the memory) catches `StorageError`; the subclasses say what kind of
    failure, for the callers that act on it. One line, never a connection string.
    """


class IndexUnavailable(StorageError):
    """The database cannot be opened, or is not open (the core runs on its files alone:
    `MemoryCore.degraded_reason` says why); callers fall back to the files."""


class DatabaseBusy(StorageError):
    """Another connection kept the database locked through every retry (about a minute
    on SQLite; a deadlock or a row lock held past the lock timeout on PostgreSQL).
    `IndexGuard` knows it is no damage and never degrades on it."""


class DatabaseUnwritable(StorageError):
    """The database could not write: a full disk, a read-only file system or database, a
    file size limit (which SQLite reports as a disk I/O error). The person's to fix."""


class DatabaseUnreachable(StorageError):
    """The PostgreSQL server could not be reached (refused, restarting, network down, no
    connection free in time): the files still answer, captures wait in the journal."""


class DatabaseConflict(StorageError):
    """A write met a row another writer stored first (a unique key): the caller may read
    what is there and decide, as it would for its own earlier write."""


class DatabaseForeign(StorageError):
    """The PostgreSQL database belongs to another workspace (or holds another's data and
    this workspace asked to move into it): refused, so no workspace reads or writes
    another's memories."""


class DatabaseCorrupt(StorageError):
    """The SQLite file is damaged or is no database at all ("file is not a database",
    "database disk image is malformed"): the index degrades to the files, and `chatmem
    reindex` moves the file aside and rebuilds it."""


class DatabaseFailure(StorageError):
    """Any other failed statement (a missing table, a broken constraint besides a unique
    key, an error the server or driver reported)."""


class ToolRefused(ChatmemError):
    """A memory tool call that was wrong (bad arguments, a path outside the scope) or whose
    storage failed; the message is the one line a model or an agent reads."""


class LLMError(ChatmemError):
    """The language model could not be reached or answered unusably."""


class InboundRejected(ChatmemError):
    """A platform's update is malformed or unsafe to act on (a DingTalk callback with a
    wrong field or a foreign sessionWebhook): refused at the edge, nothing stored."""


class InputRefused(ChatmemError, ValueError):
    """Text or a value from a caller that cannot be kept as given (a lone surrogate, which
    UTF-8 cannot hold; a label that is not one of its choices): refused whole, nothing
    stored. Also a `ValueError`, the error Python gives for a bad value."""


def refusal(name: str, exc: BaseException) -> str | None:
    """The one line a caller (a model, an MCP client) reads for a failed tool call: what
    was wrong with the call, or that the storage under it failed. None for an exception
    that is a bug: that one is raised, not explained away. Logged here, so every front
    end logs failures alike."""
    if isinstance(exc, StorageError):
        log.warning("tool %s failed in the database: %s", name, exc)
        return _one_line(f"memory storage failed (database): {exc}")
    if isinstance(exc, (ChatmemError, ValueError, TypeError)):
        log.info("tool %s refused: %s", name, exc)
        return _one_line(str(exc))
    if isinstance(exc, OSError):
        log.warning("tool %s failed on the disk: %s", name, exc)
        reason = exc.strerror or str(exc) or type(exc).__name__
        return _one_line(f"memory storage failed (disk): {reason}")
    return None


def _one_line(text: str) -> str:
    """What the model reads: the first line, short (a path or SQL in a message may be
    long, and the model needs the gist)."""
    line = text.strip().splitlines()[0] if text.strip() else "failed"
    return line if len(line) <= 300 else line[:299] + "…"
