"""bench/installs.py: a revision in its own venv, installed (not editable) from its own
pyproject, cached by commit, and redone when an earlier install was cut short."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from testkit.installs import MARKER, WORKTREE, Install, InstallError, installed, tree_files

pytestmark = pytest.mark.slow

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-chatmem"
version = "0.0.1"

[project.scripts]
chatmem = "tinycm:main"

[tool.setuptools]
py-modules = ["tinycm"]
"""


def _write_module(repo: Path, says: str) -> None:
    (repo / "tinycm.py").write_text(f"def main() -> None:\n    print({says!r})\n")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def tiny_repo(tmp_path: Path) -> Path:
    """A one-module project with a `chatmem` script, committed once (it says "one")."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    _write_module(repo, "one")
    (repo / "tests").mkdir()
    (repo / "tests" / "big.txt").write_text("not part of an install\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return repo


def _says(install: Install) -> str:
    done = subprocess.run(
        [str(install.chatmem)], env=install.env(), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_commit_and_the_working_tree_each_get_their_own_install(
    tiny_repo: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    head = _git(tiny_repo, "rev-parse", "HEAD")
    _write_module(tiny_repo, "two")  # uncommitted: only "." sees it

    old = installed("HEAD", cache, repo=tiny_repo)
    new = installed(".", cache, repo=tiny_repo)

    assert (old.commit, new.commit) == (head, WORKTREE)
    assert (_says(old), _says(new)) == ("one", "two")
    assert old.root != new.root
    assert not (new.source / "tests").exists()  # the copy leaves tests out
    # Not editable: the source changing later does not change what is installed.
    _write_module(tiny_repo, "three")
    assert _says(new) == "two"
    assert _says(installed(".", cache, repo=tiny_repo)) == "three"


def test_a_second_call_reuses_the_install_and_a_cut_short_one_is_redone(
    tiny_repo: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = installed("HEAD", cache, repo=tiny_repo)
    stamp = (first.root.parent / MARKER).stat().st_mtime_ns
    again = installed(_git(tiny_repo, "rev-parse", "HEAD"), cache, repo=tiny_repo)
    assert again.root == first.root
    assert (first.root.parent / MARKER).stat().st_mtime_ns == stamp  # nothing redone

    (first.root.parent / MARKER).unlink()  # as if the install had been killed midway
    leftover = first.root.parent / "leftover"
    leftover.write_text("half-made")
    redone = installed("HEAD", cache, repo=tiny_repo)
    assert not leftover.exists()
    assert (redone.root.parent / MARKER).is_file()
    assert _says(redone) == "one"


def test_an_unknown_revision_is_refused_in_one_line(tiny_repo: Path, tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="'no-such-rev' is not a commit"):
        installed("no-such-rev", tmp_path / "cache", repo=tiny_repo)


def test_env_runs_the_venv_alone(tmp_path: Path) -> None:
    install = Install(
        rev=".",
        commit=WORKTREE,
        root=tmp_path / "venv",
        python=tmp_path / "venv/bin/python",
        chatmem=tmp_path / "venv/bin/chatmem",
        source=tmp_path / "src",
    )
    env = install.env(
        {"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere", "PYTHONDONTWRITEBYTECODE": "1"}
    )
    assert "PYTHONPATH" not in env and "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PATH"] == f"{tmp_path / 'venv/bin'}:/usr/bin"
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "venv/pycache")
    assert env["PYTHONSAFEPATH"] == "1"


def test_the_copy_of_the_working_tree_leaves_out_git_tests_and_caches() -> None:
    files = tree_files(Path(__file__).resolve().parents[2])
    assert "pyproject.toml" in files and "memory_core/__init__.py" in files
    assert not [f for f in files if f.startswith(("tests/", ".git/")) or "__pycache__" in f]


def test_this_checkout_installed_runs_its_chatmem(project_install: Install) -> None:
    """The real project, installed as a user installs it, answers `chatmem --version`
    from its own venv, and its python imports the install's code even when run from this
    checkout (no PYTHONPATH, no current directory on sys.path)."""
    done = subprocess.run(
        [str(project_install.chatmem), "--version"],
        env=project_install.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("chatmem ")
    where = subprocess.run(
        [str(project_install.python), "-c", "import memory_core; print(memory_core.__file__)"],
        env=project_install.env(),
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(project_install.root))
