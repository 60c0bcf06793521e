"""What a person meets in their first hour with `chatmem`: a config saved in another
encoding, a pipe closed early, Ctrl-C, a read-only workspace, a mistyped or hostile
scope key. Each is one clear line (or, for a closed pipe, silence), never a traceback."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import load_app_config as load_config
from memory_core.base.errors import ConfigError, ScopeError
from memory_core.base.scope import InboundContext, ScopeKey, printable_key, resolve_scope
from memory_core.base.workspace import Workspace
from memory_core.config import env_bindings
from tests.support import run_cli as run
from tests.unit.cli_support import _clean_env  # noqa: F401  (autouse: no config or env leaks in)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A workspace with one memory in main and one in peer:42."""
    root = tmp_path / "W"
    for argv in (("init",), ("capture", "alice likes green tea"), ("capture", "bob rides")):
        scope = ("--scope", "peer:42") if argv[-1] == "bob rides" else ()
        code, _, err = run(capsys, *argv, *scope, "--workspace", str(root))
        assert code == 0, err
    return root


def subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in dict(env_bindings())}
    return env | {"PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])}


# --- a reader that goes away ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [("status",), ("search", "tea"), ("scopes",), ("stats",), ("--help",)],
    ids=lambda argv: argv[0],
)
def test_a_closed_pipe_ends_the_command_quietly(ws: Path, argv: tuple[str, ...]) -> None:
    """`chatmem status | head -1`: the reader is gone before the output is written (the
    pipe's read end is closed before the command starts, so every write fails): exit 0
    and nothing on stderr, the same as when the reader left after the last write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "adapters.cli", *argv, "--workspace", str(ws)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert [line for line in done.stderr.splitlines() if "using workspace" not in line] == []
    assert done.returncode == 0


def test_a_reader_that_takes_one_line_ends_the_command_with_0(ws: Path) -> None:
    """`head -1` itself: the reader takes the first line and closes its end while the
    command may still be writing; whichever comes first, the exit is 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "status", "--workspace", str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert first.strip()
    assert b"Traceback" not in err
    assert process.returncode == 0


# --- Ctrl-C ------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal and SIGINT")
def test_ctrl_c_during_reindex_says_what_it_left(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole foreground process group (the command and its workers)
    once the progress bar shows the rebuild under way."""
    import pty

    root = tmp_path / "W"
    env = subprocess_env()
    subprocess.run(
        [sys.executable, "-m", "adapters.cli", "init", "--workspace", str(root)],
        env=env, capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    notes = root / "memory"
    first = dt.date(2020, 1, 1)
    for number in range(640):  # ten groups of files: the rebuild outlasts the signal
        day = first + dt.timedelta(days=number)
        lines = "".join(f"- 10:{i:02d}:00 note {number} {i} about tea\n" for i in range(20))
        (notes / f"{day}.md").write_text(f"# {day}\n\n{lines}", encoding="utf-8")
    terminal, stderr_end = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", AS_IN_A_TERMINAL, "reindex", "--workspace", str(root)],
        stdout=subprocess.PIPE,
        stderr=stderr_end,
        env=env,
        start_new_session=True,
    )
    os.close(stderr_end)
    seen = _read_until(terminal, b" files")
    os.killpg(process.pid, signal.SIGINT)
    process.communicate(timeout=120)
    seen += _read_until(terminal, b"")
    os.close(terminal)
    text = seen.decode("utf-8", "replace")
    assert process.returncode == 130, text
    assert "Traceback" not in text
    last = text.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("chatmem: interrupted: the index is only partly rebuilt")


AS_IN_A_TERMINAL = (
    "import runpy, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "sys.argv[0] = 'chatmem'\n"
    "runpy.run_module('adapters.cli', run_name='__main__', alter_sys=True)\n"
)
"""`python -m adapters.cli` as a terminal's foreground command runs it: with Ctrl-C's
default handler. A process started in the background of a shell without job control
(as a CI script may start the suite) inherits SIGINT ignored, and so would the command;
a person's Ctrl-C never meets that."""


def _read_until(terminal: int, wanted: bytes) -> bytes:
    """What the terminal shows until `wanted` appears (b"": until the writer is gone)."""
    seen = b""
    while not wanted or wanted not in seen:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the writer closed its end
            break
        if not chunk:
            break
        seen += chunk
    return seen


# --- a read-only workspace -----------------------------------------------------------------


def test_a_read_only_workspace_refuses_writes_at_once_and_serves_reads(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the kernel says of the workspace decides (a read-only mount, files of another
    user): here `access` answers as for a read-only mount. The real mount is in
    tests/reliability/test_disk_full.py."""
    real_access = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        if mode & os.W_OK and Path(path).is_relative_to(ws):
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    memory = (ws / "MEMORY.md").read_bytes()
    for argv in (
        ("capture", "likes coffee"),
        ("append", "a note"),
        ("chat",),
        ("reindex",),
        ("forget", "0000"),
        ("consolidate",),
    ):
        code, _, err = run(capsys, *argv, "--workspace", str(ws))
        assert code == 2, (argv, err)
        assert err.startswith(f"chatmem: error: workspace {ws} is read-only and `{argv[0]}`")
        assert len(err.splitlines()) == 1
    assert (ws / "MEMORY.md").read_bytes() == memory
    for argv in (("status",), ("search", "tea"), ("scopes",), ("consolidate", "--dry-run")):
        code, _, err = run(capsys, *argv, "--workspace", str(ws))
        assert code == 0, (argv, err)
        assert err == ""
    assert "alice likes green tea" in run(capsys, "status", "--workspace", str(ws))[1]


# --- scope keys --------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [("status",), ("search", "tea"), ("entities",), ("tui",)])
def test_a_read_of_an_unknown_scope_names_the_known_ones(
    ws: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, *argv, "--scope", "mian", "--workspace", str(ws))
    assert (code, out) == (2, "")
    assert err == (
        "chatmem: error: no memories in scope mian (known: main, peer:42; "
        "`chatmem scopes` lists them)\n"
    )


def test_a_known_scope_and_commands_over_every_scope_are_not_refused(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "status", "--scope", "peer:42", "--workspace", str(ws))
    assert code == 0, err
    assert "bob rides" in out
    for argv in (("scopes",), ("stats",), ("validate",)):
        code, _, err = run(capsys, *argv, "--scope", "mian", "--workspace", str(ws))
        assert code == 0, (argv, err)


ODD_KEYS = ["peer:\x1b[31mred", "peer:\u202eevil", "peer:a\nb", "peer:a\tb", "peer:\u2066x"]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_keys_with_control_or_direction_characters_are_refused_everywhere(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    for argv in (("capture", "x"), ("status",)):
        code, out, err = run(capsys, *argv, "--scope", key, "--workspace", str(ws))
        assert (code, out) == (2, "")
        assert err.startswith("chatmem: error: a scope key cannot contain control or text")
        assert len(err.splitlines()) == 1
        assert err.isascii() and "\x1b" not in err
    config = tmp_path / "chatmem.toml"
    config.write_text(  # JSON's escapes are TOML's
        f'[mcp.clients]\n"a-long-client-token-0123456789" = {json.dumps(key)}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="control or text-direction"):
        load_config(config, env={})
    peer = key.removeprefix("peer:")
    with pytest.raises(ScopeError, match="control or text-direction"):
        resolve_scope(InboundContext("telegram", "b", peer, "direct", "1"), "per-peer")
    with pytest.raises(ScopeError, match="control or text-direction"):
        resolve_scope(InboundContext("dingtalk", "b", "1", "group", peer), "main")


def test_plain_unicode_keys_are_kept() -> None:
    for key in ("peer:李雷", "group:telegram:-100", "peer:emoji🎉", "peer:مرحبا"):
        assert ScopeKey.parse(key).value == key
    # A direct chat under dm_scope main never puts the peer id in the key.
    assert resolve_scope(InboundContext("telegram", "b", "\u202e", "direct", "1")).is_main


def test_an_odd_key_from_an_older_workspace_is_listed_escaped(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = ScopeKey("peer:\u202eevil\x1b[2J")
    Workspace.at(ws).ensure_scope(old)
    code, out, err = run(capsys, "scopes", "--workspace", str(ws))
    assert code == 0, err
    assert "peer:\\u202eevil\\x1b[2J" in out
    assert "\u202e" not in out and "\x1b" not in out
    assert printable_key(old) == "peer:\\u202eevil\\x1b[2J"


def test_the_tui_scope_list_shows_an_odd_key_escaped() -> None:
    from tui.overview import ScopeCounts
    from tui.widgets.scopes import scope_cell

    old = ScopeKey("peer:\u202e\x1bx")
    cell = scope_cell(ScopeCounts(old, 1, 0, 0, 0, 0, 0), old).plain
    assert "peer:\\u202e\\x1bx" in cell
    assert cell.isprintable()


def test_counts_of_one_are_singular(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "search", "alice", "--workspace", str(ws))
    assert code == 0, err
    assert out.startswith("1 hit in scope main")
    assert run(capsys, "append", "a note", "--scope", "peer:42", "--workspace", str(ws))[0] == 0
    code, out, err = run(capsys, "status", "--scope", "peer:42", "--workspace", str(ws))
    assert out.splitlines()[0].endswith("1 active, 0 archived, 1 daily file")


# --- reindex after hand-added notes ------------------------------------------------------


def test_reindex_reads_each_hand_added_note_once(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daily notes written by hand were read, chunked and written twice by `reindex`:
    by the open's sync and again by the rebuild (the time it reported was half the
    time it took). Every file the index covers is prepared once."""
    import memory_core.recall.index.file_sync as file_sync_module
    import memory_core.recall.index.rebuild as rebuild_module
    import memory_core.recall.index.search_index as search_index_module

    notes = ws / "memory"
    added = [f"2026-01-{day:02d}.md" for day in range(1, 6)]
    for name in added:
        (notes / name).write_text(f"# {name[:10]}\n\n- 10:00:00 tea note {name}\n", "utf-8")
    prepared: list[str] = []

    def counting(real: Any) -> Any:
        def prepare(workspace: Workspace, path: Path, *rest: Any) -> Any:
            prepared.append(path.name)
            return real(workspace, path, *rest)

        return prepare

    for module in (rebuild_module, search_index_module, file_sync_module):
        monkeypatch.setattr(module, "prepare_file", counting(module.prepare_file))
    code, out, err = run(capsys, "reindex", "--workspace", str(ws), "--json")
    assert code == 0, err
    files = json.loads(out)["files"]
    assert sorted(name for name in prepared if name in added) == added
    assert len(prepared) == files  # every file once, none twice


# --- purge with nothing to erase ---------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("purge", "--all"), "nothing to erase: scope main has no forgotten entries\n"),
        (
            ("purge", "--older-than", "3"),
            "nothing to erase: scope main has no forgotten entries forgotten more than "
            "3 days ago\n",
        ),
        (("purge", "--all", "--yes"), "nothing to erase: scope main has no forgotten entries\n"),
    ],
)
def test_purge_with_nothing_to_erase_says_so_and_asks_nothing(
    ws: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str
) -> None:
    code, out, err = run(capsys, *argv, "--workspace", str(ws))
    assert (code, out) == (0, said), err
    assert "--yes" not in out


# --- forget takes ids --------------------------------------------------------------------


def test_forget_with_words_says_it_takes_ids_and_names_the_entries(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "capture", "my cat is called Mochi", "--workspace", str(ws))
    assert code == 0, err
    entry_id = out.split("[", 1)[1].split("]", 1)[0]
    code, out, err = run(capsys, "forget", "Mochi", "--workspace", str(ws))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("chatmem: error: no entry 'Mochi'")
    assert "`forget` takes entry ids" in err and "`chatmem search Mochi`" in err
    assert f"entries that mention it: [{entry_id}] my cat is called Mochi" in err
    # Nothing was forgotten; words that no entry holds get the hint alone.
    code, out, err = run(capsys, "pin", "oolong", "--workspace", str(ws))
    assert code == 2 and "`pin` takes entry ids" in err and "mention" not in err
    code, out, _ = run(capsys, "status", "--workspace", str(ws))
    assert "Mochi" in out


# --- a future dry run lists what it counts -----------------------------------------------


def test_a_future_dry_run_lists_every_entry_it_says_decayed(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A count of "8 decayed" came with no entry listed: entries that only decay (not
    archived or forgotten) were counted and never shown."""
    for note in ("likes long walks", "reads before bed", "plays chess on Sundays"):
        code, _, err = run(capsys, "capture", note, "--workspace", str(ws))
        assert code == 0, err
    when = (dt.datetime.now(dt.UTC) + dt.timedelta(days=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for scope in ("main", "peer:42"):
        argv = ("consolidate", "--dry-run", "--now", when, "--scope", scope)
        code, out, err = run(capsys, *argv, "--workspace", str(ws))
        assert code == 0, err
        head, *listed = out.splitlines()
        decayed = int(head.split(": ", 1)[1].split(" decayed")[0].rsplit(" ", 1)[-1])
        ids = {line.split("[", 1)[1].split("]", 1)[0] for line in listed if "[" in line}
        assert decayed >= 1 and len(ids) == decayed, out
        assert all(" -> " in line for line in listed if "[" in line)
