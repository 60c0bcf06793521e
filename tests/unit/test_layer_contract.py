"""The layer order is written once, in pyproject.toml's import-linter contracts: these
check that it holds and that it leaves no module of the core out."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = (
    "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
)


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [contract] = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def core_modules() -> list[str]:
    modules = []
    for path in sorted((ROOT / "memory_core").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_every_module_of_the_core_is_in_a_layer() -> None:
    listed = [name for layer in layers() for name in layer]
    outside = [
        module
        for module in core_modules()
        if module != "memory_core"
        and not any(module == name or module.startswith(name + ".") for name in listed)
    ]
    assert outside == []


def test_the_layers_are_disjoint() -> None:
    listed = [name for layer in layers() for name in layer]
    nested = [(a, b) for a in listed for b in listed if a != b and b.startswith(a + ".")]
    assert nested == [] and len(listed) == len(set(listed))


def test_the_contracts_hold() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
