"""What `validate` tells a person to run for look-alike scopes, run as told (issue 34,
item 4, follow-up).

- A group of three spellings gets one `scopes --merge FROM INTO` per other spelling
  (`--merge` takes exactly two keys); before, one command with three keys.
- A workspace with only old spellings (NFD and full-width, no NFC scope) is told to
  merge into the NFC key every path uses, and `--merge` makes that scope; before, the
  NFD key was the target and `--scope peer:Zoë` could not reach the data afterwards.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import unicodedata

import pytest

from memory_core.base.scope import ScopeKey
from memory_core.config import Config
from memory_core.engine import MemoryCore
from tests.support import run_cli as run

ANN = ScopeKey("peer:Ann")
ANN_WIDE = ScopeKey("peer:Ａｎｎ")
ANN_ZWSP = ScopeKey("peer:An\u200bn")
ZOE = "peer:Zoë"
ZOE_NFD = ScopeKey(unicodedata.normalize("NFD", ZOE))
ZOE_WIDE = ScopeKey("peer:Ｚｏ" + "ë")


def seed(config: Config, facts: dict[ScopeKey, str]) -> None:
    async def make() -> None:
        async with MemoryCore.open(config, create=True) as core:
            for scope, fact in facts.items():
                await core.memories.capture(scope, fact)
            await core.memories.flush()

    asyncio.run(make())


def suggested(out: str) -> list[list[str]]:
    """The `chatmem scopes --merge` commands `validate` printed, split as a shell would."""
    return [
        shlex.split(line.strip())
        for line in out.splitlines()
        if line.strip().startswith("chatmem scopes --merge")
    ]


def test_a_group_of_three_gets_one_merge_command_per_other_spelling(
    config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(config.workspace_path)
    seed(config, {ANN: "likes tea", ANN_WIDE: "likes cake", ANN_ZWSP: "likes rain"})

    code, out, _ = run(capsys, "validate", "--workspace", ws)

    assert code == 1
    commands = suggested(out)
    assert [c[3:] for c in commands] == [
        ["peer:An\\u200bn", "peer:Ann"],
        ["peer:Ａｎｎ", "peer:Ann"],
    ]
    for command in commands:  # each runs as printed
        code, _, err = run(capsys, *command[1:], "--workspace", ws)
        assert code == 0, err
    code, out, err = run(capsys, "search", "likes", "--scope", "peer:Ann", "--workspace", ws)
    assert code == 0 and all(w in out for w in ("tea", "cake", "rain")), (out, err)
    assert run(capsys, "validate", "--workspace", ws)[0] == 0


def test_only_old_spellings_are_merged_into_the_key_every_path_uses(
    config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(config.workspace_path)
    seed(config, {ZOE_NFD: "plays the oboe", ZOE_WIDE: "rides a red bike"})

    code, out, _ = run(capsys, "validate", "--workspace", ws)

    assert code == 1
    commands = suggested(out)
    assert [c[3:] for c in commands] == [[ZOE_NFD.value, ZOE], [ZOE_WIDE.value, ZOE]]
    # The first as printed; the second with INTO typed in its old spelling (normalised).
    code, out, err = run(capsys, *commands[0][1:], "--workspace", ws)
    assert code == 0, err
    assert f"into {ZOE}:" in out
    code, out, err = run(
        capsys, "scopes", "--merge", ZOE_WIDE.value, ZOE_NFD.value, "--workspace", ws
    )
    assert code == 0, err
    assert f"into {ZOE}:" in out

    code, out, err = run(capsys, "status", "--scope", ZOE, "--workspace", ws)
    assert code == 0, err
    assert "plays the oboe" in out and "rides a red bike" in out
    assert run(capsys, "validate", "--workspace", ws)[0] == 0
    code, out, _ = run(capsys, "scopes", "--json", "--workspace", ws)
    assert [row["scope"] for row in json.loads(out)] == ["main", ZOE]


def test_merge_makes_no_scope_but_the_normalised_form_of_from(
    config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(config.workspace_path)
    seed(config, {ZOE_NFD: "plays the oboe"})

    code, out, err = run(capsys, "scopes", "--merge", ZOE_NFD.value, "peer:Zed", "--workspace", ws)

    assert (code, out) == (2, "")
    assert "no scope 'peer:Zed'" in err and len(err.splitlines()) == 1
