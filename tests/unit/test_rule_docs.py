"""The docs' rules: architecture.md stays a short reference that names only what exists,
no file cites a document that is not in the repository, and README leads to the
contributing notes and the decision records. A newcomer trusts what the docs say."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
MAX_LINES = 400

CODE_DIRS = ("memory_core", "adapters", "tui", "testkit", "bench", "scripts", "tests")

# Paths that the other parts of issue 37 are creating while this test is written; each is
# allowed to be missing until they are merged. Empty this list once they are.
PLANNED = frozenset(
    {
        "storage/dialects.py",  # dialect
        "tests/unit/test_rule_dialect.py",  # dialect
    }
)

# "seed 001", a section sign, or the folder of data and notes beside the repository.
OUTSIDE_REFERENCE = re.compile(r"(?i)\bseeds? ?0\d\d\b|§|\.\./shared/|\bshared/(?:datasets|style)")

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`([^`\n]+)`")


def test_architecture_is_a_short_reference() -> None:
    lines = ARCHITECTURE.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, (
        f"docs/architecture.md has {lines} lines (at most {MAX_LINES}): move details to a "
        "topic page, measurements to docs/decisions/ or bench/RESULTS.md"
    )


def outside_references(root: Path) -> list[str]:
    """`path:line: text` for every line of the docs and the code under `root` that cites
    a document outside the repository."""
    files = [*sorted((root / "docs").rglob("*.md")), root / "README.md", root / "CONTRIBUTING.md"]
    for folder in CODE_DIRS:
        files += sorted((root / folder).rglob("*.py"))
    found = []
    for path in files:
        if not path.is_file() or path == Path(__file__).resolve():
            continue  # this file spells the patterns out
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE_REFERENCE.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_reference_to_documents_outside_the_repository() -> None:
    found = outside_references(REPO)
    assert not found, "say what is needed instead of citing it:\n" + "\n".join(found)


def test_the_reference_check_finds_a_seed_citation(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "memory_core").mkdir()
    (tmp_path / "docs" / "a.md").write_text("Decay as in seed 001 §1.7.\n", encoding="utf-8")
    (tmp_path / "memory_core" / "m.py").write_text(
        'RNG = random.Random(7)  # a fixed seed\n"""Data from ../shared/datasets/x."""\n',
        encoding="utf-8",
    )
    assert outside_references(tmp_path) == [
        "docs/a.md:1: Decay as in seed 001 §1.7.",
        'memory_core/m.py:2: """Data from ../shared/datasets/x."""',
    ]


def named_paths(markdown: str) -> set[str]:
    """The repository paths a page writes in backticks, outside fenced blocks: anything
    with a folder separator or a file suffix, less URLs, workspace files, commands and
    placeholders."""
    text = FENCE.sub("", markdown)
    paths = set()
    for code in INLINE_CODE.findall(text):
        if " " in code or code.startswith(("/", ".chatmem", "http", "-")) or "{" in code:
            continue
        if "<" in code:  # a placeholder: `steps/<rule>.py`
            continue
        if "/" in code or re.search(r"\.(py|md|toml|txt|json|tcss)$", code):
            paths.add(code)
    return paths


def exists(path: str) -> bool:
    """Written from the repository's root, or from `memory_core/` as the layer tables do;
    a `module.Name` suffix names something inside a module; a `*` is a glob."""
    for base in (REPO, REPO / "memory_core"):
        if "*" in path:
            if any(base.glob(path)):
                return True
            continue
        if (base / path).exists():
            return True
        module, _, _name = path.rpartition(".")
        if module and "/" in module and (base / f"{module}.py").exists():
            return True
    return False


def test_every_path_architecture_names_exists() -> None:
    missing = sorted(
        path
        for path in named_paths(ARCHITECTURE.read_text(encoding="utf-8"))
        if path not in PLANNED and not exists(path)
    )
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_named_paths_reads_backticks_outside_fences() -> None:
    page = "See `storage/db.py`, `chatmem search`, `/metrics`.\n```\n`x/y.py`\n```\n"
    assert named_paths(page) == {"storage/db.py"}
    assert exists("storage/db.py") and exists("base/patterns.LazyPattern")
    assert not exists("storage/no_such_module.py")


def test_readme_leads_to_contributing_and_decisions() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(CONTRIBUTING.md)" in readme
    assert "(docs/decisions/)" in readme
    assert (REPO / "CONTRIBUTING.md").is_file()
    records = sorted((REPO / "docs" / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert records, "docs/decisions/ holds no record"
    for record in records:
        text = record.read_text(encoding="utf-8")
        for part in ("Date: ", "## Context", "## Decision", "## Figures"):
            assert part in text, f"{record.name} lacks {part!r}"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def broken_links(page: Path) -> list[str]:
    """The relative Markdown links of `page` that lead to no file or folder."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [
        target
        for target in LINK.findall(text)
        if "://" not in target
        and not target.startswith("mailto:")
        and not (page.parent / target).exists()
    ]


def test_links_between_the_docs_lead_somewhere() -> None:
    pages = [
        *sorted((REPO / "docs").rglob("*.md")),
        REPO / "README.md",
        REPO / "CONTRIBUTING.md",
        REPO / "bench" / "RESULTS.md",
    ]
    broken = {str(p.relative_to(REPO)): links for p in pages if (links := broken_links(p))}
    assert not broken, f"links to nothing: {broken}"


def test_broken_links_finds_a_link_to_nothing(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("x\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](there.md) [b](gone.md#part) [c](https://example.org/x)\n```\n[d](no.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["gone.md"]
