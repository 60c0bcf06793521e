"""Textual TUI over a chatmem workspace: `make_app(core)` builds it."""

from tui.app import ChatmemApp, make_app

__all__ = ["ChatmemApp", "make_app"]
