"""The current screen as plain text (for docs and debugging; snapshots use SVG)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.app import App


def screen_text(app: App[Any]) -> str:
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    lines = console.export_text(styles=False).splitlines()
    return "\n".join(line.rstrip() for line in lines).rstrip() + "\n"
