"""`base/safe_files.py`: the workspace boundary's rules, and the source rule that every
module opens workspace files through it (docs/formats.md, "Files")."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

from memory_core.base import safe_files
from memory_core.base.atomic import atomic_write_text, backup_then_write
from memory_core.base.errors import FileRefused, MemoryFileError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text("outside text\n", encoding="utf-8")
    return folder


def test_a_link_out_is_refused_for_reading_and_writing(ws: Path, outside: Path) -> None:
    (ws / "memory" / "note.md").symlink_to(outside / "secret.md")
    with pytest.raises(FileRefused, match=r"refused memory/note.md: a link leads outside"):
        safe_files.read_bytes(ws, ws / "memory" / "note.md", 1000)
    with pytest.raises(FileRefused):
        atomic_write_text(ws / "memory" / "note.md", "new", root=ws)
    assert (outside / "secret.md").read_text(encoding="utf-8") == "outside text\n"
    assert isinstance(FileRefused("x"), MemoryFileError)  # one line and exit 2 on the CLI


def test_a_link_in_a_parent_folder_is_refused(ws: Path, outside: Path) -> None:
    (ws / "memory" / "scopes").symlink_to(outside)
    with pytest.raises(FileRefused, match=r"memory/scopes/secret\.md"):
        safe_files.read_text(ws, ws / "memory" / "scopes" / "secret.md", 1000)
    with pytest.raises(FileRefused):
        safe_files.make_dirs(ws, ws / "memory" / "scopes" / "bob")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]


def test_a_dangling_link_creates_nothing_outside(ws: Path, outside: Path) -> None:
    (ws / "memory" / "2026-03-01.md").symlink_to(outside / "made.md")
    with pytest.raises(FileRefused):
        safe_files.open_fd(ws, ws / "memory" / "2026-03-01.md", os.O_RDWR | os.O_CREAT)
    assert not (outside / "made.md").exists()


def test_a_link_inside_to_inside_is_read_and_written_through(ws: Path) -> None:
    (ws / "kept").mkdir()
    (ws / "kept" / "MEMORY.md").write_text("old\n", encoding="utf-8")
    (ws / "MEMORY.md").symlink_to(Path("kept") / "MEMORY.md")
    assert safe_files.read_text(ws, ws / "MEMORY.md", 1000) == "old\n"
    backup_then_write(ws / "MEMORY.md", b"new\n", ws / "MEMORY.md.bak", root=ws)
    assert (ws / "MEMORY.md").is_symlink()
    assert (ws / "kept" / "MEMORY.md").read_text(encoding="utf-8") == "new\n"
    assert (ws / "MEMORY.md.bak").read_text(encoding="utf-8") == "old\n"


def test_scope_owner_names_whose_files_a_path_is() -> None:
    owner = safe_files.scope_owner
    assert owner(["memory", "scopes", "peer_bob", "LONG_TERM.md"]) == "peer_bob"
    assert owner(["memory", "scopes", "peer_bob"]) == "peer_bob"
    assert owner(["memory", "2026-03-01.md"]) == owner(["MEMORY.md"]) == ""
    assert owner(["memory", "scopes"]) is None
    assert owner([".chatmem", "parsed", "peer_bob"]) is None


def test_a_link_between_scopes_or_into_main_is_refused(ws: Path) -> None:
    """Links inside that cross from one scope's files into another's (or main's) are
    refused both ways; a scope's link to a place no scope owns keeps working."""
    scopes = ws / "memory" / "scopes"
    (scopes / "peer_ann").mkdir(parents=True)
    (scopes / "peer_ann" / "LONG_TERM.md").write_text("ann\n", encoding="utf-8")
    (ws / "memory" / "2026-03-01.md").write_text("main\n", encoding="utf-8")
    (scopes / "peer_bob").mkdir()
    (scopes / "peer_bob" / "2026-03-01.md").symlink_to(Path("../../2026-03-01.md"))
    (ws / "memory" / "2026-03-02.md").symlink_to(Path("scopes/peer_ann/LONG_TERM.md"))
    for path in (scopes / "peer_bob" / "2026-03-01.md", ws / "memory" / "2026-03-02.md"):
        with pytest.raises(FileRefused, match="a scope's files must be its own"):
            safe_files.read_text(ws, path, 1000)
    (scopes / "peer_cy").symlink_to("peer_ann")
    with pytest.raises(FileRefused, match="scope folder peer_cy is a link"):
        safe_files.make_dirs(ws, scopes / "peer_cy" / "summary")
    (ws / "notes").mkdir()
    (ws / "notes" / "bob.md").write_text("bob\n", encoding="utf-8")
    (scopes / "peer_bob" / "LONG_TERM.md").symlink_to(Path("../../../notes/bob.md"))
    assert safe_files.read_text(ws, scopes / "peer_bob" / "LONG_TERM.md", 1000) == "bob\n"


def test_a_copy_of_another_scopes_folder_is_refused(ws: Path) -> None:
    bob = ws / "memory" / "scopes" / "peer_bob"
    bob.mkdir(parents=True)
    (bob / ".scope").write_text("peer:ann", encoding="utf-8")
    with pytest.raises(FileRefused, match="key file names another scope"):
        safe_files.read_text(ws, bob / ".scope", 1000)
    (bob / ".scope").write_text("peer:bob", encoding="utf-8")
    assert safe_files.read_text(ws, bob / ".scope", 1000) == "peer:bob"


def test_a_fifo_is_refused_without_waiting(ws: Path) -> None:
    path = ws / "memory" / "2026-03-01.md"
    os.mkfifo(path)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            safe_files.read_bytes(ws, path, 1000)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=30)  # a guard: a hang fails, an answer returns at once
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], FileRefused)
    assert "a FIFO (named pipe), not a memory file" in str(outcome[0])
    with pytest.raises(FileRefused, match="FIFO"):
        safe_files.open_fd(ws, path, os.O_RDWR | os.O_APPEND | os.O_CREAT)


def test_a_device_inside_is_refused(ws: Path) -> None:
    (ws / "memory" / "zero.md").symlink_to("/dev/zero")
    with pytest.raises(FileRefused, match="outside"):
        safe_files.read_bytes(ws, ws / "memory" / "zero.md", 1000)
    # The workspace itself under /dev: the link stays inside, the file is a device.
    with pytest.raises(FileRefused, match="a device"):
        safe_files.read_bytes(Path("/dev"), Path("/dev/zero"), 1000)


def test_reads_are_bounded_with_a_clear_line(ws: Path) -> None:
    path = ws / "MEMORY.md"
    path.write_bytes(b"x" * 5000)
    with pytest.raises(FileRefused, match=r"MEMORY.md: 5000 bytes, over the 4096 byte bound"):
        safe_files.read_bytes(ws, path, 4096)
    assert len(safe_files.read_bytes(ws, path, 5000)) == 5000
    head, size = safe_files.read_head(ws, path, 10)
    assert (head, size) == (b"x" * 10, 5000)


def test_a_workspace_reached_through_a_link_is_inside_itself(tmp_path: Path) -> None:
    """The root may itself be a link (a home on another disk): paths named through it,
    through its real path, or linked absolutely to its real path are all inside."""
    real = tmp_path / "disk" / "ws"
    (real / "memory").mkdir(parents=True)
    root = tmp_path / "ws"
    root.symlink_to(real)
    atomic_write_text(root / "memory" / "a.md", "a\n", root=root)
    assert safe_files.read_text(root, real / "memory" / "a.md", 100) == "a\n"
    (real / "memory" / "b.md").symlink_to(real / "memory" / "a.md")
    assert safe_files.read_text(root, root / "memory" / "b.md", 100) == "a\n"
    with pytest.raises(FileRefused, match="outside the workspace"):
        safe_files.read_text(root, tmp_path / "disk" / "other.md", 100)


def test_a_missing_file_is_missing_not_refused(ws: Path) -> None:
    with pytest.raises(FileNotFoundError):
        safe_files.read_bytes(ws, ws / "memory" / "none.md", 1000)
    assert safe_files.check_file(ws, ws / "memory" / "none.md").name == "none.md"


# --- the rule: workspace files are opened through safe_files ------------------------------

RAW_ATTRS = {"read_text", "read_bytes", "write_text", "write_bytes", "touch", "iterdir", "glob",
             "rglob", "mkdir"}  # fmt: skip
RAW_OS = {"open", "scandir", "listdir", "walk", "makedirs", "mkfifo"}

ALLOWED: dict[str, set[str]] = {
    # Folders of `.chatmem/` checked by `Workspace.check_state` when a core starts; the
    # files in them are made by mkstemp + rename (never through a link) or read through
    # safe_files.
    "memory_core/base/locks.py": {"mkdir", "os.open"},  # O_NOFOLLOW | O_NONBLOCK
    "memory_core/longterm/parse_cache.py": {"mkdir", "read_bytes"},  # + its own modules' code
    "memory_core/storage/backends.py": {"mkdir", "iterdir"},  # names of `.chatmem/`
    "memory_core/storage/db.py": {"mkdir"},
    "memory_core/storage/journal.py": {"mkdir"},
    "memory_core/storage/spool.py": {"glob", "mkdir"},
    "memory_core/storage/vectors/graph_files.py": {"mkdir", "shutil.rmtree"},
    # Opened after safe_files resolved the path inside: a folder to fsync, stale temp
    # files of the real parent, a listing of a folder checked just before.
    "memory_core/base/atomic.py": {"os.open"},
    "memory_core/longterm/store.py": {"glob"},
    "memory_core/recall/index/files.py": {"os.scandir"},
    # A scope's folder checked inside and listed without following links to folders
    # (files that are links are skipped), then set aside by a rename in the workspace.
    "memory_core/scope_merge/files.py": {"rglob", "shutil.move"},
    # Not workspace files: the config file, package data, the model cache, /dev/null.
    "memory_core/config/__init__.py": {"open"},
    "memory_core/base/text.py": {"read_text"},
    "memory_core/base/compounds.py": {"read_text"},
    "memory_core/llm/prompts/__init__.py": {"read_text"},
    "memory_core/embedding/model_cache.py": {"iterdir", "mkdir", "open", "read_text",
                                             "shutil.rmtree"},
    # `chatmem backup`: the workspace walked without following links (links skipped) into
    # DEST, a folder outside it that the backup makes, checks empty and removes on failure;
    # the manifest is DEST's. `chatmem restore`: a backup checked against its checksums
    # laid into an empty workspace (a used one is moved aside whole, never merged).
    "memory_core/backup/files.py": {"mkdir", "os.walk"},
    "memory_core/backup/manifest.py": {"read_text"},
    "memory_core/backup/put_back.py": {"glob", "iterdir", "mkdir", "os.listdir", "touch"},
    "memory_core/backup/take.py": {"iterdir", "shutil.rmtree"},
    "memory_core/storage/pg/dump.py": {"mkdir"},
    # `chatmem doctor`: names and free space only, never contents.
    "memory_core/ops/checks.py": {"glob", "shutil.disk_usage"},
    "adapters/cli/__init__.py": {"os.open"},
    "adapters/cli/tui.py": {"shutil.rmtree"},  # the demo's own temporary folder
    "adapters/cli/commands.py": {"touch"},  # LongTermMemory.touch, not Path.touch
    # Names and stats only, never contents: the demo's "is this folder empty", the
    # TUI's file list and change watch.
    "adapters/demo.py": {"rglob"},
    "tui/overview.py": {"iterdir"},
    "tui/watch.py": {"os.scandir"},
}  # fmt: skip


def raw_file_calls(path: Path) -> set[str]:
    """The file-opening calls of a module that do not go through safe_files."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.add("open")
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner == "safe_files":
                continue
            if owner == "shutil" or (owner == "os" and func.attr in RAW_OS):
                found.add(f"{owner}.{func.attr}")
            elif func.attr in RAW_ATTRS:
                found.add(func.attr)
    return found


def test_workspace_files_are_opened_only_through_safe_files() -> None:
    """A new raw open/read/write/list/mkdir outside safe_files fails here: route it through
    `base/safe_files.py`, or add it to ALLOWED with the reason it touches no workspace
    file, or one already checked."""
    unexpected: dict[str, set[str]] = {}
    for top in ("memory_core", "adapters", "tui"):
        for path in sorted((REPO / top).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name == "memory_core/base/safe_files.py":
                continue
            extra = raw_file_calls(path) - ALLOWED.get(name, set())
            if extra:
                unexpected[name] = extra
    assert unexpected == {}


def swap_after_checks(monkeypatch: pytest.MonkeyPatch, memory: Path, times: int) -> None:
    """Another process's atomic rename lands between the check and the open, `times` times."""
    checked = safe_files._checked
    swaps: list[int] = []

    def swapping(root: Path, path: Path | str) -> tuple[str, os.stat_result | None]:
        found = checked(root, path)
        if len(swaps) < times:
            swaps.append(1)
            new = memory.with_name(memory.name + ".tmp")
            new.write_text("new\n", encoding="utf-8")
            os.replace(new, memory)
        return found

    monkeypatch.setattr(safe_files, "_checked", swapping)


def test_a_file_replaced_between_check_and_open_is_read_as_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's atomic rename of the same file is no attack: opened again."""
    memory = tmp_path / "MEMORY.md"
    memory.write_text("old\n", encoding="utf-8")
    swap_after_checks(monkeypatch, memory, times=1)
    assert safe_files.read_text(tmp_path, memory, 100) == "new\n"


def test_a_file_swapped_at_every_open_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = tmp_path / "MEMORY.md"
    memory.write_text("old\n", encoding="utf-8")
    swap_after_checks(monkeypatch, memory, times=safe_files.SWAP_RETRIES)
    with pytest.raises(FileRefused, match="changed while being opened"):
        safe_files.read_text(tmp_path, memory, 100)
