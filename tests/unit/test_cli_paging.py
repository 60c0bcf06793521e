"""`chatmem scopes` and `chatmem stats` a page at a time (`--limit`, `--offset`): a
workspace of many per-peer scopes is not read whole to show a few."""

from __future__ import annotations

from pathlib import Path

import pytest

import memory_core.longterm.long_term as long_term
import memory_core.scope_listing.listing as listing
from memory_core.base.scope import ScopeKey
from memory_core.base.workspace import Workspace
from tests.unit.cli_support import (
    Run,
    _clean_env,  # noqa: F401  (a fixture)
    cli_fixture,  # noqa: F401  (a fixture)
    one_line_error,
    ws_fixture,  # noqa: F401  (a fixture)
)
from tests.unit.test_scopes_from_summaries import settle

PEERS = [f"peer:{n}" for n in range(1, 6)]


def test_scopes_and_stats_page_through_the_listing(
    cli: Run, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for peer in PEERS:
        cli.capture(f"{peer} likes tea", "--scope", peer)
    settle(ws / "MEMORY.md", ws / "memory")  # past the racy window
    every = [row["scope"] for row in cli.json("scopes")]
    assert every == ["main", *PEERS]

    read: list[str] = []
    real = listing._summary

    async def summary_spy(memories: long_term.LongTermMemory, scope: ScopeKey) -> str:
        read.append(scope.value)
        return await real(memories, scope)

    monkeypatch.setattr(listing, "_summary", summary_spy)
    cli.capture("likes green tea too", "--scope", PEERS[1])
    rows = cli.json("scopes", "--limit", "2", "--offset", "1")
    assert [row["scope"] for row in rows] == PEERS[:2]
    assert [row["active"] for row in rows] == [1, 2]
    # Only the page's scope whose file changed since the full listing was read again.
    assert read == PEERS[1:2]
    stats = cli.json("stats", "--limit", "2", "--offset", "4")
    assert [row["scope"] for row in stats["scopes"]] == PEERS[3:5]
    assert cli.json("scopes", "--offset", "6") == []
    code, out, _ = cli("scopes", "--limit", "1")
    assert code == 0 and out.split()[0] == "main"


def test_a_negative_page_is_refused_in_one_line(cli: Run) -> None:
    assert "must be 0 or more" in one_line_error(*cli("scopes", "--limit", "-1"))
    assert "not a whole number" in one_line_error(*cli("stats", "--offset", "x"))


def test_a_command_on_one_scope_lists_no_other(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """`status`, `search` and `capture` on one scope ask about that scope alone; the
    listing of every scope is made only to name them when the scope is unknown."""
    for peer in PEERS:
        cli.capture(f"{peer} likes tea", "--scope", peer)

    def no_listing(self: Workspace) -> list[ScopeKey]:
        raise AssertionError("the workspace's scopes were listed")

    listing = Workspace.scopes
    monkeypatch.setattr(Workspace, "scopes", no_listing)
    assert cli.json("status", "--scope", PEERS[2])["scope"] == PEERS[2]
    assert cli.json("search", "tea", "--scope", PEERS[2])
    assert cli.capture("likes green tea", "--scope", PEERS[2])
    assert "(new scope)" in cli("capture", "a first memory", "--scope", "peer:new")[1]
    monkeypatch.setattr(Workspace, "scopes", listing)
    error = one_line_error(*cli("status", "--scope", "peer:nobody"))
    assert "no memories in scope peer:nobody (known: main, peer:1" in error
