"""The rule "every part is built in memory_core/services.py", held by a scan of the code.

A part is what `Services` holds or what one part is handed by another (services.py's
docstring); what a part makes for itself and hands to no other part (the runtime's chat
engine and archiver, the finder's recall cache) is that part's own and not listed here.
The parts built on first use are built there too (`LateParts`, `LazyVectors`) and are
listed, with the reason, in one place: services.py's docstring.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from memory_core import services
from memory_core.config import load_config
from memory_core.engine import MemoryCore
from memory_core.lifecycle import Lifecycle
from tests.postgres import with_storage

CORE = Path(__file__).resolve().parents[2] / "memory_core"
SERVICES = CORE / "services.py"

PARTS = frozenset(
    {
        # what a core holds for its life (services.core_parts)
        "LockRegistry",
        "LLMClient",
        "backend_for",
        # the memory service and what it is built from (services.build_memory_service)
        "MemoryService",
        "LongTermStore",
        "ForgottenFile",
        "ForgottenKeeper",
        "AfterWrites",
        "Staging",
        "SettledStore",
        "LongTermMemory",
        "DailyNotes",
        "Finder",
        "EventLog",
        "Snapshots",
        # over the database (services.open_services)
        "IndexGuard",
        "SearchIndex",
        "Activations",
        "Deliveries",
        "ScheduleState",
        "Services",
        # built on first use, by services.LateParts and services._search_index
        "LateParts",
        "Consolidator",
        "Runtime",
        "LazyVectors",
    }
)
"""The constructors of the parts: called only in services.py."""

BACKEND_BUILDS = frozenset({"open", "audit_log", "history", "journal", "owners", "vector_index"})
"""The backend object's methods that open the database or build a part that differs by
backend (the audit log, the history, the journal, the owners' locks, the vector index):
called only in services.py."""

FIRST_USE = ("LateParts", "LazyVectors", "tokenizer's dictionary")
"""What is built on first use: each named, with its reason, in services.py's docstring."""


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _backend_build(node: ast.Attribute) -> str | None:
    """`open` for `backend.open` or `self._backend.open`, called or handed on (as in
    `partial(backend.vector_index, ...)`)."""
    if node.attr not in BACKEND_BUILDS:
        return None
    receiver = node.value
    name = ""
    if isinstance(receiver, ast.Name):
        name = receiver.id
    elif isinstance(receiver, ast.Attribute):
        name = receiver.attr
    return node.attr if name.endswith("backend") else None


def _builds(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each call of a part's constructor and each use of a backend method that builds
    one: (line, name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            part = _called_name(node)
            if part in PARTS:
                yield node.lineno, part
        elif isinstance(node, ast.Attribute) and (method := _backend_build(node)):
            yield node.lineno, method


def builds_outside_services(root: Path) -> Iterator[str]:
    """Each build of a part outside `root`/services.py: `path:line name`."""
    for path in sorted(root.rglob("*.py")):
        if path.name == "services.py" and path.parent == root:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in _builds(tree):
            yield f"{path.relative_to(root.parent)}:{line} {name}"


def test_parts_are_built_only_in_services() -> None:
    """Before this rule the memory service was wired in memory_service.py, the core's
    locks, model client and backend in engine.py, and the runtime built a second
    consolidation of its own: each was such a call outside services.py."""
    assert list(builds_outside_services(CORE)) == []


def test_the_scan_sees_every_part_services_builds() -> None:
    """The list is not stale: services.py calls every constructor the rule names (a
    renamed part would otherwise leave the rule checking nothing)."""
    tree = ast.parse(SERVICES.read_text(encoding="utf-8"))
    built = {name for _, name in _builds(tree)}
    assert PARTS - built == set()
    assert BACKEND_BUILDS - built == set()


def test_first_use_parts_are_listed_with_their_reason_in_one_place() -> None:
    doc = services.__doc__ or ""
    listed = doc[doc.index("Built on first use") :]
    for name in FIRST_USE:
        assert name in listed, name
    assert MemoryCore.__mro__[1] is Lifecycle  # the core's open and close: lifecycle.py


async def test_the_runtime_runs_the_workspace_consolidation(tmp_path: Path) -> None:
    """One consolidation per workspace: the conversation runtime's quiet-period job runs
    the very consolidation `core.consolidation` is (it used to build its own)."""
    config = load_config(None, env=with_storage(), workspace=tmp_path / "ws")
    async with MemoryCore.open(config) as core:
        assert core.conversation.consolidation is core.consolidation
