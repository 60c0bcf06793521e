"""A rebuild's tokenizing workers run this process's code: the fork server they start
from preloads it (`rebuild.PRELOAD`) only where it would import this very checkout
(Python 3.11's fork server imports its preloads without this process's `sys.path`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core.recall.index import rebuild

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
sys.path.insert(0, {root!r})


def where(_=None):
    import memory_core
    return memory_core.__file__


if __name__ == "__main__":
    from concurrent.futures import ProcessPoolExecutor
    from memory_core.recall.index import rebuild
    print(rebuild.preload_is_this_code())
    with ProcessPoolExecutor(1, mp_context=rebuild.worker_start()) as pool:
        print(pool.submit(where).result())
"""


def test_the_checkout_found_from_its_directory_is_preloaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert rebuild.preload_is_this_code()


def test_the_checkout_on_pythonpath_is_preloaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", str(ROOT)]))
    assert rebuild.preload_is_this_code()


def test_a_checkout_put_first_by_a_script_is_not_preloaded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert not rebuild.preload_is_this_code()


def test_workers_of_a_script_that_put_this_checkout_first_run_it(tmp_path: Path) -> None:
    """Run from elsewhere, with the checkout put first by the script itself (as the
    benches do): the workers import this checkout, not whatever the interpreter's own
    path finds (an installed or editable `memory_core`)."""
    script = tmp_path / "where.py"
    script.write_text(SCRIPT.format(root=str(ROOT)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    preloaded, worker_file = done.stdout.split()
    assert preloaded == "False"
    assert Path(worker_file).resolve() == ROOT / "memory_core" / "__init__.py"
