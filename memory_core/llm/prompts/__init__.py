"""The model prompts of extraction and consolidation, as Markdown files in the package:
a person can read and tune them without reading code."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load_prompt(name: str) -> str:
    """The text of `llm/prompts/NAME.md`; `{placeholders}` are filled by `str.format`."""
    return (
        resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").rstrip("\n")
    )
