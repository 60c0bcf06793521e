"""The source trees a comparing bench measures, each reached only through its own CLI.

A tree is an `installs.Install` (a revision in its own venv, non-editable, as a user
installs it), or, for a smoke test that must not spend a minute installing, the checkout
run by this interpreter with PYTHONPATH pointing at it (`from_env`). Benches take the
`chatmem` argv, the `python` and the environment from here and nothing else, so any
revision old or new is driven the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from installs import Install, add_install_arguments, installs_for

REPO = Path(__file__).resolve().parent.parent
DEFAULT_COMPARE = ("2a70d81", "b42d7a9")
"""Two revisions ago (before the speed work) and main when issue 38 began."""
DROPPED_PREFIXES = ("CHATMEM_", "OPENAI_")
"""A person's settings in the environment would change what is measured."""


@dataclass(frozen=True)
class Tree:
    label: str
    python: Path
    chatmem: tuple[str, ...]
    """The argv that runs this tree's `chatmem`."""
    env: dict[str, str]
    key: str
    """Names this tree's code in caches (a commit, or a digest of the checkout's core)."""
    source: Path


def _clean(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(DROPPED_PREFIXES)}


def from_install(install: Install) -> Tree:
    key = install.commit[:12] if install.commit != "worktree" else source_key(install.source)
    return Tree(
        label=install.label,
        python=install.python,
        chatmem=(str(install.chatmem),),
        env=_clean(install.env()),
        key=key,
        source=install.source,
    )


def from_env(repo: Path = REPO, cache: Path | None = None) -> Tree:
    """The checkout run by this interpreter (its packages), PYTHONPATH first: quick, but
    not as a user installs it; for smoke tests and a first look."""
    env = _clean(dict(os.environ))
    env["PYTHONPATH"] = str(repo)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is not None:
        env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    return Tree(
        label=". (this env)",
        python=Path(sys.executable),
        chatmem=(sys.executable, "-m", "adapters.cli"),
        env=env,
        key=source_key(repo),
        source=repo,
    )


def source_key(tree: Path) -> str:
    """A digest of a tree's core and CLI code: a copy indexed by an older state of the
    code is not reused."""
    digest = hashlib.blake2b(digest_size=8)
    for folder in ("memory_core", "adapters"):
        for path in sorted((tree / folder).rglob("*.py")):
            digest.update(str(path.relative_to(tree)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    """installs.py's --compare/--install-cache, plus how to run the checkout."""
    add_install_arguments(parser)
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help=f"measure the checkout only (default: beside {' and '.join(DEFAULT_COMPARE)})",
    )
    parser.add_argument(
        "--no-checkout",
        action="store_true",
        help="measure only the --compare revisions (e.g. two branches), not this checkout",
    )
    parser.add_argument(
        "--checkout-from-env",
        action="store_true",
        help="run the checkout with this interpreter and PYTHONPATH instead of installing "
        "it (quick; for smoke tests)",
    )


def with_default_compare(argv: Sequence[str]) -> list[str]:
    """`argv` with `--compare` of each DEFAULT_COMPARE added when it names none (and no
    `--no-compare`): spelled out, so a `--record`ed section names what it compared with."""
    given = any(a == "--compare" or a.startswith("--compare=") for a in argv)
    if given or "--no-compare" in argv or "-h" in argv or "--help" in argv:
        return list(argv)
    return [*argv, *(part for rev in DEFAULT_COMPARE for part in ("--compare", rev))]


def trees_for(
    args: argparse.Namespace, extras: Sequence[str] = (), cache: Path | None = None
) -> list[Tree]:
    """The compared revisions (oldest as given first), then the checkout."""
    if args.no_checkout and not args.compare:
        raise SystemExit("--no-checkout needs --compare REV: there is nothing to measure")
    compare = [] if args.no_compare else (list(args.compare) or list(DEFAULT_COMPARE))
    checkout = not args.no_checkout
    revs = compare + (["."] if checkout and not args.checkout_from_env else [])
    trees = [from_install(i) for i in installs_for(revs, args.install_cache, extras)]
    if checkout and args.checkout_from_env:
        trees.append(from_env(REPO, cache))
    return trees
