"""The benches' child scripts, which each installed revision's python runs: given a tree
that lacks what they drive, they say so in their JSON line ("unmeasurable", or what the
tree has) instead of crashing, so the bench prints "not measurable at REV: why".

Each child runs as a bench runs it in an install (PYTHONSAFEPATH: neither bench/ nor the
current directory on sys.path), here with a stand-in `memory_core` on PYTHONPATH that has
only what an older revision would, and without site-packages (`-S`): the test
environment's editable install would otherwise supply the modules the stand-in lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _tree(base: Path, files: dict[str, str]) -> Path:
    """A stand-in source tree: `memory_core` with only `files` (path -> source)."""
    tree = base / "tree"
    for name, source in {"memory_core/__init__.py": "", **files}.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(source, encoding="utf-8")
    return tree


def _child(script: str, tree: Path, *args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATMEM_")}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONSAFEPATH"] = "1"
    done = subprocess.run(
        [sys.executable, "-S", str(BENCH / script), *args],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_portable_memory_child_says_a_core_without_export_is_unmeasurable(
    tmp_path: Path,
) -> None:
    tree = _tree(tmp_path, {"memory_core/engine.py": "class MemoryCore:\n    pass\n"})
    out = _child("portable_memory_child.py", tree, "export", str(tmp_path / "ws"), "x.jsonl")
    assert out == {
        "unmeasurable": "its core has no export_file or import_from (no export or import yet)"
    }
    assert not (tmp_path / "ws").exists()


def test_embedder_load_child_tells_an_embedder_without_a_model_cache(tmp_path: Path) -> None:
    local = (
        'LOCAL_MODELS = {"usem3": None, "e5-small": None}\n'
        "class LocalEmbedder:\n"
        '    def __init__(self, model: str = "") -> None:\n'
        "        self.model = model\n"
        'def local_model_available(model: str = "") -> bool:\n'
        '    return model == "usem3"\n'
    )
    tree = _tree(tmp_path, {"memory_core/embedding/local.py": local})
    assert _child("embedder_load_child.py", tree, "info") == {
        "models": ["usem3"],
        "cache": False,
    }


def test_embedder_load_child_says_a_tree_without_a_local_embedder_is_unmeasurable(
    tmp_path: Path,
) -> None:
    out = _child("embedder_load_child.py", _tree(tmp_path, {}), "info")
    assert str(out["unmeasurable"]).startswith("no local embedder")


FAKE_CONFIG = """
class _Part:
    def model_copy(self, update):
        return self

class _Config(_Part):
    embedding = _Part()

def load_config(path, *, env=None, workspace=None):
    return _Config()
"""

FAKE_ENGINE = """
import contextlib

class _Index:
    vectors = object()  # a vector index with none of the probe's calls

class _Guard:
    index = _Index()

class MemoryCore:
    _guard = _Guard()  # the flat layout's name

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, config):
        yield cls()
"""


def test_the_pg_probe_says_what_an_older_vector_index_lacks(tmp_path: Path) -> None:
    tree = _tree(
        tmp_path,
        {
            "memory_core/config.py": FAKE_CONFIG,
            "memory_core/engine.py": FAKE_ENGINE,
            "memory_core/scope.py": "class ScopeKey(str):\n    pass\n",
        },
    )
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"env": {}, "workspace": str(tmp_path), "scopes": {}}))
    assert _child("pg_hybrid_probe.py", tree, str(spec)) == {
        "unmeasurable": "its vector index has no load, wait_graph, embed_query, search,"
        " settle or drain"
    }
