"""The house rules a newcomer reads in docs/architecture.md, checked on every file.

A written rule with exceptions in parentheses misleads whoever trusts it, so each rule
here reads the whole tree and names every file that breaks it. Other rule tests live
beside this one in `test_rule_<topic>.py`.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("memory_core", "adapters", "tui")
"""What ships: the core and its front ends."""
CODE = (*PRODUCT, "testkit", "tests", "bench", "scripts")
"""Every folder of Python the repository holds."""
MAX_LINES = 600


def python_files(*folders: str) -> Iterator[tuple[str, Path]]:
    """(repository-relative name, path) of every .py file under `folders`."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if "__snapshots__" not in path.parts:
                yield name, path


def test_no_python_file_is_over_600_lines() -> None:
    """A module does one job: past 600 lines it does several, and is split by job."""
    over = {
        name: lines
        for name, path in python_files(*CODE)
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert over == {}


def top_level_classes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)]


def test_no_class_name_is_defined_twice() -> None:
    """One name per idea: a class name says which class it is without its module.

    Module-level functions may share a name (`erasure.files.scope_files` and
    `recall.index.files.scope_files`): a function is called through its module's import
    and does one small thing; a class is a type a reader meets in signatures everywhere."""
    where: defaultdict[str, list[str]] = defaultdict(list)
    for name, path in python_files(*PRODUCT):
        for cls in top_level_classes(path):
            where[cls].append(name)
    assert {cls: files for cls, files in where.items() if len(files) > 1} == {}


def imported_modules(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


LOADERS = {"spec_from_file_location", "run_path", "import_module", "SourceFileLoader"}


def test_tests_load_no_bench_code() -> None:
    """The benches measure; a test that loads one breaks when a bench is reworded. What a
    test needs of a bench lives in testkit/ or in the test."""
    loading = []
    for name, path in python_files("tests"):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if any(module.split(".")[0] == "bench" for module in imported_modules(tree)):
            loading.append(name)
        calls = {
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
        }
        if calls & LOADERS and re.search(r"""["']bench["']|bench/""", text):
            loading.append(name)
    assert loading == []


REST_LITERAL = re.compile(r"(?<!`)``(?!`)")
"""reST's inline literal; a Markdown fence (three backticks) is not one."""
REST_ROLE = re.compile(r":(class|func|meth|attr|mod|data|exc|obj):`")


def prose(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring (module, class, function, attribute) and comment."""
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def test_one_docstring_markup_single_backticks() -> None:
    """Docstrings and comments quote code in single backticks, as Markdown does; reST's
    double backticks and roles (a role name between colons) are a second markup."""
    found = [
        f"{name}:{line}"
        for name, path in python_files(*CODE)
        for line, text in prose(path.read_text(encoding="utf-8"))
        if REST_LITERAL.search(text) or REST_ROLE.search(text)
    ]
    assert found == []


RESET = re.compile(r"^_?(reset|clear|forget)(_\w+)?$|for_tests?$")
"""A name that says "start over": what a test wants before a cold start."""


def resets(path: Path) -> Iterator[str]:
    """Top-level functions and methods of `path` named like a reset."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and RESET.search(node.name):
            yield node.name


def test_product_modules_hold_no_test_only_resets() -> None:
    """A reset only tests call is code the product ships and never runs; tests start from
    fresh objects or clear what they made themselves (tests/support.py)."""
    users = "\n".join(
        path.read_text(encoding="utf-8")
        for name, path in python_files(*PRODUCT, "bench", "scripts")
    )
    unused = []
    for name, path in python_files(*PRODUCT):
        for reset in resets(path):
            named = len(re.findall(rf"\b{reset}\b", users))
            defined = len(re.findall(rf"\bdef {reset}\b", users))
            if named <= defined:
                unused.append(f"{name}: {reset}")
    assert unused == []


def test_the_tui_app_is_imported_by_no_other_tui_module() -> None:
    """The app wires the TUI's parts; a part that imports the app (for its type or to call
    it) closes a circle. The parts receive what they need: a small Protocol (tui/host.py).
    The package's `__init__` re-exports the app for its users outside the TUI."""
    importing = [
        name
        for name, path in python_files("tui")
        if name not in {"tui/app.py", "tui/__init__.py"}
        and any(
            module == "tui.app" or module.startswith("tui.app.")
            for module in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        )
    ]
    assert importing == []


def test_every_module_says_what_it_owns() -> None:
    """A newcomer opens a module and reads, first, what it owns and why it exists: every
    module of the product and the test kit starts with a docstring of a sentence or more."""
    bare = [
        name
        for folder in ("memory_core", "adapters", "tui", "testkit")
        for name, path in python_files(folder)
        if len((ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").split()) < 8
    ]
    assert bare == [], f"a module docstring of a sentence or more is missing: {bare}"
