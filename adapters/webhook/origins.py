"""Where a webhook front end may post its replies: an allowlist of origins written as
hosts (https, port 443) or as origins (`http://127.0.0.1:8091`), compared as (scheme,
host, port). Pure: the settings check their entries with it, the server parses its list
once at start.
"""

from __future__ import annotations

from collections.abc import Set
from urllib.parse import urlsplit

Origin = tuple[str, str, int]
Origins = Set[Origin]


def webhook_origin(entry: str) -> Origin:
    """A bare host means https on port 443; an entry with a scheme is that one origin.
    Nothing is guessed: a path, query, user or other scheme in an entry is an error rather
    than an allowlist silently wider or narrower than written."""
    text = entry.strip().lower()
    if "://" not in text:
        if not text or any(c in text for c in "/:@?#[] \t"):
            raise ValueError(f"entry {entry!r} is not a host name")
        return ("https", text, 443)
    try:
        parts = urlsplit(text)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"entry {entry!r} has a bad port") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"entry {entry!r} must be http or https")
    if not parts.hostname or parts.username is not None:
        raise ValueError(f"entry {entry!r} needs a host and no user")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"entry {entry!r} must be an origin (no path or query)")
    return (parts.scheme, parts.hostname, port)


def bad_origin_entry(hosts: list[str]) -> str | None:
    """The first entry of an allowlist that is no host or origin, said why (a settings
    field's check)."""
    for entry in hosts:
        try:
            webhook_origin(entry)
        except ValueError as exc:
            return str(exc)
    return None
