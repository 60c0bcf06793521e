"""Revisions installed as a user installs them, one virtualenv each, for benches to compare
(bench/installs.py re-exports this and is its command line; here so tests load it).

A bench that measures "before" beside "after" must not run the old tree through PYTHONPATH
with this environment's packages: the old code then meets packages it never required (or
misses ones it did, which no extra installs any more). Here a revision is unpacked with
`git archive`, given its own venv, and `pip install`ed from its own pyproject, NOT editable;
"." is the checkout under test, installed the same way from its working-tree files. A
bench then talks to each `Install` only through its `chatmem` or its `python` running a
small stable script, so any older revision can be measured.

Installs are cached under one directory by commit and extras (for "." by a digest of the
files): a marker written last says an install is whole, so one cut short is redone, and a
file lock keeps two benches from building the same one at once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

REPO = Path(__file__).resolve().parent.parent
"""The checkout this file is in: "." installs it."""
DEFAULT_CACHE = Path("/tmp/chatmem-bench-installs")
CACHE_VARIABLE = "CHATMEM_BENCH_INSTALLS"
WORKTREE = "worktree"
MARKER = "installed.json"
# What a copy of the working tree leaves out: not part of what a user installs, and big.
SKIPPED = frozenset({".git", "tests", "test-artifacts", "__pycache__", "build", "dist"})
SKIPPED_SUFFIXES = (".egg-info", "_cache", ".pyc")
# Variables that would make an install's interpreter read another tree's code or settings.
DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "PYTHONSTARTUP")


class InstallError(RuntimeError):
    """A revision that cannot be resolved, unpacked or installed (the message says which)."""


@dataclass(frozen=True)
class Install:
    rev: str  # what was asked for: a commit-ish, or "." for the checkout under test
    commit: str  # the full hash, or "worktree" for the checkout's files
    root: Path  # the venv's directory
    python: Path  # <root>/bin/python
    chatmem: Path  # <root>/bin/chatmem
    source: Path  # the unpacked source it was installed from (read it; do not import it)

    @property
    def label(self) -> str:
        """A short name for tables: the rev as asked, with the commit's first 7 digits."""
        if self.commit == WORKTREE:
            return "." if self.rev == "." else self.rev
        short = self.commit[:7]
        return short if self.rev.startswith(short) else f"{self.rev} ({short})"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (os.environ) as a shell with this venv activated would have it.

        No PYTHONPATH (which would put another tree's code first), nor the current
        directory or a script's own directory on sys.path (PYTHONSAFEPATH: run from a
        checkout, `python -c` would import the checkout's code instead of the install's),
        the venv's bin first on PATH, and bytecode written and read under the install
        (PYTHONPYCACHEPREFIX), so imports cost what they cost a user whose install has its
        .pyc files. A script run by `python` must therefore import only the install."""
        env = dict(os.environ if base is None else base)
        for name in DROPPED:
            env.pop(name, None)
        env["VIRTUAL_ENV"] = str(self.root)
        env["PATH"] = os.pathsep.join([str(self.root / "bin"), env.get("PATH", "")]).rstrip(
            os.pathsep
        )
        env["PYTHONPYCACHEPREFIX"] = str(self.root / "pycache")
        env["PYTHONSAFEPATH"] = "1"
        return env


def default_cache() -> Path:
    return Path(os.environ.get(CACHE_VARIABLE) or DEFAULT_CACHE)


def installed(
    rev: str, cache: Path | None = None, extras: Sequence[str] = (), repo: Path = REPO
) -> Install:
    """`rev` installed (non-editable) in its own venv under `cache`; at once when cached.

    `rev` is a commit-ish of `repo`'s history, or "." for `repo`'s working tree."""
    cache = (cache or default_cache()).resolve()
    wanted = sorted(set(extras))
    if rev == ".":
        commit, key = WORKTREE, f"worktree-{tree_digest(repo)}"
    else:
        commit = resolve(rev, repo)
        key = commit[:12]
    key += "-" + ("+".join(wanted) if wanted else "base")
    where = cache / key
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / f"{key}.lock")):
        done = _read_marker(where, rev)
        if done is not None:
            return done
        if where.exists():
            shutil.rmtree(where)  # a half-made install (no marker): start again
        where.mkdir(parents=True)
        install = _make(rev, commit, where, wanted, repo)
        (where / MARKER).write_text(
            json.dumps({"commit": commit, "extras": wanted}), encoding="utf-8"
        )
        return install


def resolve(rev: str, repo: Path = REPO) -> str:
    """The full hash of `rev` in `repo`, or a one-line InstallError."""
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise InstallError(f"{rev!r} is not a commit of {repo}")
    return done.stdout.strip()


def tree_files(repo: Path) -> list[str]:
    """The working tree's files a user's copy would hold: tracked and untracked, less the
    ignored ones (caches, venvs) and what SKIPPED names; sorted, relative to `repo`."""
    done = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    names = {name.decode() for name in done.stdout.split(b"\0") if name}
    return sorted(name for name in names if _kept(name) and (repo / name).is_file())


def tree_digest(repo: Path) -> str:
    """A digest of the working tree's kept files (names and contents): a changed file is a
    new install, an unchanged tree the cached one."""
    digest = hashlib.sha256()
    for name in tree_files(repo):
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256((repo / name).read_bytes()).digest())
    return digest.hexdigest()[:16]


def _kept(name: str) -> bool:
    parts = Path(name).parts
    return not any(p in SKIPPED or p.endswith(SKIPPED_SUFFIXES) for p in parts)


def _read_marker(where: Path, rev: str) -> Install | None:
    marker = where / MARKER
    if not marker.is_file():
        return None
    data = json.loads(marker.read_text(encoding="utf-8"))
    return _install(rev, str(data["commit"]), where)


def _install(rev: str, commit: str, where: Path) -> Install:
    root = where / "venv"
    return Install(
        rev=rev,
        commit=commit,
        root=root,
        python=root / "bin" / "python",
        chatmem=root / "bin" / "chatmem",
        source=where / "src",
    )


def _make(rev: str, commit: str, where: Path, extras: list[str], repo: Path) -> Install:
    install = _install(rev, commit, where)
    if commit == WORKTREE:
        _copy_tree(repo, install.source)
    else:
        _unpack(commit, install.source, repo)
    # No pip inside the venv (ensurepip costs seconds a venv): this pip installs into it,
    # exactly what the venv's own would install.
    _run(
        [sys.executable, "-m", "venv", "--without-pip", str(install.root)],
        "make the venv",
        install,
    )
    target = str(install.source) + (f"[{','.join(extras)}]" if extras else "")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(install.python),
            "install",
            "--quiet",
            target,
        ],
        f"pip install {target}",
        install,
    )
    if not install.chatmem.exists():
        raise InstallError(f"{install.label}: installed, but it has no bin/chatmem")
    return install


def _unpack(commit: str, source: Path, repo: Path) -> None:
    source.mkdir(parents=True)
    archive = source.parent / "src.tar"
    with archive.open("wb") as out:
        done = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", commit],
            stdout=out,
            stderr=subprocess.PIPE,
        )
    if done.returncode != 0:
        raise InstallError(f"git archive {commit[:12]}: {done.stderr.decode().strip()}")
    with tarfile.open(archive) as tar:
        tar.extractall(source, filter="data")
    archive.unlink()


def _copy_tree(repo: Path, source: Path) -> None:
    for name in tree_files(repo):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, target)


def _run(command: list[str], what: str, install: Install) -> None:
    done = subprocess.run(command, env=install.env(), capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise InstallError(f"{install.label}: could not {what}:\n{tail}")


def add_install_arguments(parser: argparse.ArgumentParser) -> None:
    """--compare REV (repeatable) and --install-cache DIR, as every comparing bench takes."""
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="REV",
        help="also measure this revision, installed in its own venv (repeatable)",
    )
    parser.add_argument(
        "--install-cache",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where installs are kept (default ${CACHE_VARIABLE} or {DEFAULT_CACHE})",
    )


def installs_for(
    revs: Iterable[str], cache: Path | None, extras: Sequence[str] = ()
) -> list[Install]:
    """Each of `revs` installed, one after the other (progress on stderr: a first install
    takes a minute or more)."""
    result = []
    for rev in revs:
        print(f"installing {rev} ...", file=sys.stderr, flush=True)
        result.append(installed(rev, cache, extras))
    return result
