"""Revisions installed as a user installs them, one virtualenv each (testkit/installs.py),
for the benches that compare them; and its command line, to make installs ahead of a
long bench or to look inside one:

    python bench/installs.py REV... [--extras vector,postgres] [--install-cache DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # testkit/ is dev-only: found beside bench/, not installed

from testkit.installs import (  # noqa: E402
    CACHE_VARIABLE,
    DEFAULT_CACHE,
    MARKER,
    WORKTREE,
    Install,
    InstallError,
    add_install_arguments,
    default_cache,
    installed,
    installs_for,
    resolve,
    tree_digest,
    tree_files,
)

__all__ = [
    "CACHE_VARIABLE",
    "DEFAULT_CACHE",
    "MARKER",
    "WORKTREE",
    "Install",
    "InstallError",
    "add_install_arguments",
    "default_cache",
    "installed",
    "installs_for",
    "resolve",
    "tree_digest",
    "tree_files",
]


def main(argv: Sequence[str] | None = None) -> int:
    """`python bench/installs.py REV... [--extras vector,postgres]`: make the installs and
    print where each one is (handy before a long bench, or to look inside one)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("revs", nargs="+", help='commit-ish, or "." for this checkout')
    parser.add_argument("--extras", default="", help="comma-separated extras to install")
    parser.add_argument("--install-cache", type=Path, default=None, metavar="DIR")
    args = parser.parse_args(argv)
    extras = [e for e in args.extras.split(",") if e]
    try:
        for install in installs_for(args.revs, args.install_cache, extras):
            print(f"{install.label}\t{install.commit}\t{install.root}")
    except InstallError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
