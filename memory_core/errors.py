"""One root error with a subclass per area, so front ends can print one clear line for
anything the user can fix and keep tracebacks for real bugs."""

import logging
import sqlite3

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


class StoreError(ChatmemError):
    """A memory file cannot be read or written."""


class EntryNotFound(ChatmemError):
    """No entry with that id exists in the scope."""


class WorkspaceMissing(ChatmemError):
    """The workspace asked for does not exist, and the caller did not ask to create it: a
    mistyped path must not silently become a new, empty workspace."""


class PathRefused(ChatmemError):
    """A path asked for lies outside what the caller's scope may read."""


class IndexUnavailable(ChatmemError):
    """The SQLite index cannot be opened or is corrupt; callers fall back to files."""


class DatabaseBusy(ChatmemError, sqlite3.OperationalError):
    """Another connection kept the database locked through every retry (about a minute).

    Also an `OperationalError`, so code that survives a failed database write (the file
    is the memory) survives this one the same way; `IndexGuard` knows it is no damage and
    never degrades on it.
    """


class DatabaseUnwritable(ChatmemError, sqlite3.OperationalError):
    """SQLite could not write its files: a full disk, a read-only file system, a file size
    limit (which SQLite reports as a disk I/O error). One line instead of a traceback;
    also an `OperationalError`, so code that survives a failed database write (the file
    is the memory) survives this one the same way.
    """


class DatabaseFailure(ChatmemError, sqlite3.DatabaseError):
    """A PostgreSQL statement failed (any error the server or driver reported).

    The project's database error family is sqlite3's (`sqlite3.DatabaseError` and its
    subclasses): code that survives a failed index write catches that, whichever backend
    is configured. One line, never the connection string.
    """


class DatabaseUnreachable(DatabaseFailure, sqlite3.OperationalError):
    """The PostgreSQL server could not be reached (refused, restarting, network down, no
    connection free in time): the files still answer, captures wait in the journal."""


class DatabaseConflict(DatabaseFailure, sqlite3.IntegrityError):
    """A PostgreSQL write met a row another writer stored first (a unique key): an
    `IntegrityError`, as SQLite's own, so callers handle both the same way."""


class DatabaseForeign(DatabaseFailure):
    """The PostgreSQL database belongs to another workspace (or holds another's data and
    this workspace asked to move into it): refused, so no workspace reads or writes
    another's memories."""


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
    if isinstance(exc, (ChatmemError, ValueError, TypeError)):
        log.info("tool %s refused: %s", name, exc)
        return _one_line(str(exc))
    if isinstance(exc, sqlite3.Error):
        log.warning("tool %s failed in the database: %s", name, exc)
        return _one_line(f"memory storage failed (database): {exc}")
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
