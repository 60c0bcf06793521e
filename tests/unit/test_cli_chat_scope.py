"""`chatmem --scope peer:Zed chat` used to ignore --scope silently (the turns landed in
main): chat makes its scope from `--as`/`--group`, so a --scope other than main is
refused with one line before anything is made (issue 34, item 4, follow-up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli as run


@pytest.mark.parametrize("before", [True, False], ids=["before-chat", "after-chat"])
def test_chat_refuses_a_scope_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], before: bool
) -> None:
    ws = tmp_path / "ws"
    scope = ["--scope", "peer:Zed"]
    argv = [*scope, "chat"] if before else ["chat", *scope]

    code, out, err = run(capsys, *argv, "--workspace", str(ws))

    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1, err
    assert "does not take --scope" in err and "--as NAME or --group CHAT_ID" in err
    assert not ws.exists()  # refused before the workspace was made
