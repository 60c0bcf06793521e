"""House rule: a long list of values is written once, as a value object's fields, not
copied into every signature that passes it on.

The search options were written out four times (finder, index, the index's interface,
the files' fallback), `add_message`'s twelve parameters four times, and `build_entry`
took every field of an entry. Each is now a value object (`SearchRequest`, `NewMessage`,
`EntryFields`); this test reads every function of the code and fails when one takes
most of such a list again as separate parameters.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

from memory_core.base.entries import MemoryEntry
from memory_core.recall.request import SearchRequest
from memory_core.storage.sessions import NewMessage

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memory_core", "adapters", "tui", "testkit", "bench", "scripts")

LISTS: dict[str, tuple[frozenset[str], int]] = {
    "SearchRequest": (frozenset(f.name for f in fields(SearchRequest)) - {"query"}, 3),
    "NewMessage": (frozenset(f.name for f in fields(NewMessage)) | {"now"}, 6),
    "EntryFields": (frozenset(MemoryEntry.__slots__), 8),
}
"""Each list's names, and how many of them one function may take separately (a
function using a few, `rank(..., limit, min_score)`, is not a copy of the list)."""


def functions() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = node.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def test_no_function_takes_a_value_objects_fields_one_by_one() -> None:
    copies = []
    for where, node in functions():
        names = parameters(node)
        for value, (fields_, most) in LISTS.items():
            taken = names & fields_
            if len(taken) >= most:
                copies.append(f"{where}: {len(taken)} fields of {value} {sorted(taken)}")
    assert copies == [], "pass the value object instead:\n" + "\n".join(copies)


def test_the_rule_sees_the_old_signatures() -> None:
    """The four old spellings, as they were, are each caught."""
    old = """
async def search(self, scope, query, *, limit=10, kinds=None, since=None, until=None,
                 min_score=0.0, exclude_paths=(), today=None): ...
async def add_message(self, scope, session_id, role, content, now, *, speaker="",
                      speaker_id=None, meta=None, indexed=False, used_entry_ids=(),
                      archived=None): ...
def build_entry(id, content, category, score, created_at, last_activated, scored_at,
                hits, source_session, confidence, expires_at, pinned, archived,
                sessions): ...
"""
    caught = set()
    for node in ast.walk(ast.parse(old)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for value, (fields_, most) in LISTS.items():
                if len(parameters(node) & fields_) >= most:
                    caught.add((node.name, value))
    assert caught == {
        ("search", "SearchRequest"),
        ("add_message", "NewMessage"),
        ("build_entry", "EntryFields"),
    }
