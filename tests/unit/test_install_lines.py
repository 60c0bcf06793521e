"""Every `pip install` the project shows a person installs this checkout, never `chatmem`
from the package registry: that name there belongs to an unrelated project."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from memory_core.base.errors import install_hint

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("adapters", "memory_core", "tui", "bench", "scripts")
PIP_INSTALL = re.compile(r"pip3? install\b(?P<rest>[^\n`)]*)")
OPTIONS_WITH_A_VALUE = {"-r", "--requirement", "-c", "--constraint", "-d", "--target", "-t"}


def shown_texts() -> dict[str, str]:
    """The docs, README, the example config, CI and the code (whose messages tell a person
    what to install), with Python's implicit string concatenations joined so a message
    split over lines reads as one."""
    files = [REPO / "README.md", REPO / "config.example.toml", REPO / ".ci" / "run"]
    files += sorted((REPO / "docs").rglob("*.md"))
    for folder in CODE_DIRS:
        files += sorted((REPO / folder).rglob("*.py"))
    texts = {}
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            text = re.sub(r"""["']\s*\n\s*f?["']""", "", text)
        texts[str(path.relative_to(REPO))] = text
    return texts


def installed_targets(rest: str) -> list[str]:
    """What one `pip install …` line installs: its arguments that are not options (and not
    an option's value), up to the end of the shell command."""
    rest = re.split(r"&&|;|\|\||#", rest)[0]
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    targets, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in OPTIONS_WITH_A_VALUE:
            skip = True
        elif word.startswith("-"):
            continue
        else:
            targets.append(word.strip("'\""))
    return targets


def from_the_registry(target: str) -> bool:
    """`chatmem`, `chatmem[vector]`, `chatmem>=0.1`: a registry name, not a path."""
    name = re.split(r"[\[<>=!~; ]", target, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name.lower()) == "chatmem"


def install_lines() -> list[tuple[str, str]]:
    return [
        (where, match.group(0))
        for where, text in shown_texts().items()
        for match in PIP_INSTALL.finditer(text)
    ]


def test_the_scan_finds_the_install_lines_of_docs_and_code() -> None:
    found = {where for where, _ in install_lines()}
    assert {"README.md", "docs/operations.md", "config.example.toml", ".ci/run"} <= found
    assert "memory_core/base/errors.py" in found


@pytest.mark.parametrize(
    "line", ["pip install 'chatmem[dingtalk]'", "pip install -U chatmem", "pip install Chatmem"]
)
def test_a_registry_install_of_chatmem_is_recognised(line: str) -> None:
    match = PIP_INSTALL.search(line)
    assert match and any(from_the_registry(t) for t in installed_targets(match["rest"]))


def test_no_install_line_fetches_chatmem_from_the_registry() -> None:
    wrong = [
        f"{where}: {line}"
        for where, line in install_lines()
        if any(from_the_registry(target) for target in installed_targets(line))
    ]
    assert wrong == []


def test_missing_extras_are_installed_from_the_checkout() -> None:
    line = install_hint("postgres")
    assert line.startswith("python -m pip install -e '.[postgres]'")
