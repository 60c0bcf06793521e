"""`config.example.toml`, generated from the settings classes: every section's summary and
every key's documentation, environment variable and default (tests keep the file equal).
Pure rendering, apart from the loader (config/__init__.py) it only reads.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from memory_core.config import Config
from memory_core.config.fields import Section, fields


def render_example(schema: type[Config] = Config) -> str:
    """config.example.toml, generated from the settings classes (tests keep the file equal):
    `schema` is the whole file's layout (the CLI's is adapters/settings.py's `AppConfig`)."""
    lines = [
        "# chatmem configuration. Copy to chatmem.toml (or pass --config FILE).",
        "# Every key is optional; the values shown are the defaults.",
        "# Secrets belong in the environment, not in this file.",
        "",
    ]
    _example_section(schema(), "", lines)
    return "\n".join(lines).rstrip("\n") + "\n"


def _example_section(value: Section, name: str, lines: list[str]) -> None:
    nested: list[tuple[str, Section]] = []
    if name:
        lines.append(f"[{name}]")
        lines += [f"# {line}" for line in _summary_lines(value.__doc__)]
    for info in fields(value):
        key = info.name
        current = getattr(value, key)
        if isinstance(current, Section):
            nested.append((f"{name}.{key}" if name else key, current))
            continue
        env = info.env
        lines.append(f"# {info.doc}" + (f" Env: {env}." if env else ""))
        lines.append(f"{key} = {_toml_value(current)}")
    lines.append("")
    for sub_name, sub_value in nested:
        _example_section(sub_value, sub_name, lines)


def _summary_lines(doc: str | None) -> list[str]:
    """A section's docstring up to its first blank line, every line of it: a comment cut
    after its first line would stop mid-sentence."""
    if not doc:
        return []
    return inspect.cleandoc(doc).split("\n\n")[0].splitlines()


def _toml_value(value: Any) -> str:
    """JSON spells our scalars and lists as TOML does; tables are written inline."""
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    return json.dumps(value)
