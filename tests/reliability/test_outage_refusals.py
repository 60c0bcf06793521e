"""Commands that need PostgreSQL (backup, export, import, erase) while a server the
workspace reached before is down: one line, exit 2, nothing written. Before, the core
opened degraded first, so the refusal came after four warning lines (and `export` had
already printed its header)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.cli import main
from tests.postgres import PostgresServer
from tests.support import clean_cli_env

pytestmark = pytest.mark.timeout(180)


def test_commands_that_need_the_database_refuse_in_one_line_while_it_is_down(
    own_postgres: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clean_cli_env(tmp_path, monkeypatch)
    monkeypatch.setenv("CHATMEM_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("CHATMEM_POSTGRES_DSN", own_postgres.uri)
    ws = tmp_path / "ws"

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main([*argv, "--workspace", str(ws)])
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    assert run("init")[0] == 0
    assert run("capture", "keeps bees", "--scope", "peer:bob")[0] == 0
    mem0 = tmp_path / "mem0.json"
    mem0.write_text('[{"user_id": "eve", "memory": "likes jazz", "created_at": "2025-01-01"}]')
    own_postgres.pause()
    try:
        for argv in (
            ("backup", str(tmp_path / "bk")),
            ("export",),
            ("import", str(mem0)),
            ("erase", "--scope", "peer:bob", "--dry-run"),
        ):
            code, out, err = run(*argv)
            assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
            assert f"`chatmem {argv[0]}` needs PostgreSQL" in err and "unreachable" in err
        assert not (tmp_path / "bk").exists()
    finally:
        own_postgres.resume()
    assert run("export")[0] == 0
