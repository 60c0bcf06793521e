"""One root error with a subclass per area, so front ends can print one clear line for
anything the user can fix and keep tracebacks for real bugs."""


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


class PathRefused(ChatmemError):
    """A path asked for lies outside what the caller's scope may read."""


class IndexUnavailable(ChatmemError):
    """The SQLite index cannot be opened or is corrupt; callers fall back to files."""


class LLMError(ChatmemError):
    """The language model could not be reached or answered unusably."""
