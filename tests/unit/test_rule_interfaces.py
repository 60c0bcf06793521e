"""Rule: interfaces import no implementation.

A protocol module says what a layer needs of a part; were it to import an implementation,
every user of the interface would load (and depend on) that implementation too. An
interface module (any `interfaces.py`, and the protocol modules named below) imports only
the standard library, `memory_core.base`, other interface modules, and value modules:
modules of plain values that themselves import nothing of memory_core but `base`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_MODULES = ("memory_core/base/sql.py", "memory_core/embedding/base.py")
"""Modules of protocols not named `interfaces.py`."""
VALUE_MODULES = ("memory_core/storage/sessions.py",)
"""Sessions and messages as values: what a history backend stores and returns."""


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def interface_modules() -> list[Path]:
    found = sorted((ROOT / "memory_core").rglob("interfaces.py"))
    return found + [ROOT / p for p in PROTOCOL_MODULES]


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every memory_core import of `path`, TYPE_CHECKING ones too."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "memory_core"]


def in_base(name: str) -> bool:
    return name == "memory_core.base" or name.startswith("memory_core.base.")


def test_interfaces_import_no_implementation() -> None:
    interfaces = interface_modules()
    allowed = {module_name(p) for p in interfaces} | {module_name(ROOT / p) for p in VALUE_MODULES}
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in interfaces
        for line, name in imported(path)
        if not in_base(name) and name not in allowed
    ]
    assert not wrong, "an interface imports an implementation: " + "; ".join(wrong)


def test_value_modules_import_only_base() -> None:
    wrong = [
        f"{p}:{line} imports {name}"
        for p in VALUE_MODULES
        for line, name in imported(ROOT / p)
        if not in_base(name)
    ]
    assert not wrong, "a value module imports more than base: " + "; ".join(wrong)


def test_the_rule_sees_the_storage_interfaces() -> None:
    assert ROOT / "memory_core/storage/interfaces.py" in interface_modules()
    assert all((ROOT / p).is_file() for p in (*PROTOCOL_MODULES, *VALUE_MODULES))
