"""The layout's rules, checked on the source: the core imports no front end, has no
import circle, nothing below the facade imports it, front ends import only the public
API, and nothing reaches into a library's private API or the core's insides."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import memory_core
from memory_core import PUBLIC_API

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("textual", "telegram", "dingtalk_stream", "adapters", "tui")

PROBE = """
import importlib, pkgutil, sys
import memory_core
for info in pkgutil.walk_packages(memory_core.__path__, "memory_core."):
    importlib.import_module(info.name)
bad = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
print("\\n".join(bad))
"""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def core_modules() -> dict[str, Path]:
    return {module_name(p): p for p in (ROOT / "memory_core").rglob("*.py")}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Modules `path` imports anywhere in its text (lazy and TYPE_CHECKING imports too):
    `from a.b import c` counts as a.b, and as a.b.c when that is a module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if f"{node.module}.{alias.name}" in known
            )
    return found


def test_memory_core_imports_no_front_end() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(forbidden=set(FORBIDDEN))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "", f"memory_core imported front-end modules: {out.stdout}"


def test_memory_core_has_no_import_circle() -> None:
    modules = core_modules()
    known = set(modules)
    graph = {
        name: {m for m in imports_of(path, known) if m in known and m != name}
        for name, path in modules.items()
    }
    done: set[str] = set()
    circles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            circles.append([*trail[trail.index(name) :], name])
            return
        if name in done:
            return
        for dependency in sorted(graph[name]):
            visit(dependency, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)


def test_nothing_below_the_facade_imports_it() -> None:
    modules = core_modules()
    known = set(modules)
    importers = sorted(
        name
        for name, path in modules.items()
        if name != "memory_core.engine" and "memory_core.engine" in imports_of(path, known)
    )
    assert importers == []


def test_front_ends_import_only_the_public_api() -> None:
    assert set(core_modules()) >= PUBLIC_API
    known = set(core_modules()) | {"memory_core"}
    offenders: list[str] = []
    for folder in ("adapters", "tui", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for imported in sorted(imports_of(path, known)):
                if imported.split(".")[0] != "memory_core" or imported == "memory_core":
                    continue
                if imported not in PUBLIC_API:
                    offenders.append(f"{path.relative_to(ROOT)}: {imported}")
    assert offenders == []


def lines_matching(pattern: re.Pattern[str], folders: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]


def test_front_ends_reach_no_part_of_the_core() -> None:
    """`MemoryCore` hands out its parts (memories, notes, finder, audit, …), never a store,
    the database, its locks or its private members: front ends use the parts."""
    inside = re.compile(r"\bcore\.(store|index|db|database|locks|_\w+|memory|runtime)\b")
    assert lines_matching(inside, ("adapters", "tui", "scripts")) == []


def test_no_private_api_of_a_library() -> None:
    """aiosqlite's `_conn`/`_execute` (or any library's) are not part of the product."""
    private = re.compile(r"\._(conn|execute)\b")
    assert lines_matching(private, ("memory_core", "adapters", "tui")) == []


def test_the_public_api_list_lives_in_the_package() -> None:
    assert memory_core.PUBLIC_API is PUBLIC_API
