"""The pure parts of the MCP server: tokens to scopes, the bearer header, --http."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.mcp_server import ScopedApps, parse_listen, token_scopes
from memory_core.base.errors import ChatmemError
from memory_core.base.scope import ScopeKey

ALICE = ScopeKey("telegram:peer:42")
BOB = ScopeKey("telegram:peer:43")
ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"


def test_tokens_map_to_scopes_and_the_own_token_to_the_own_scope() -> None:
    scopes = token_scopes(ALICE_TOKEN, {BOB_TOKEN: " telegram : peer : 43 "}, ALICE)
    assert scopes == {ALICE_TOKEN: ALICE, BOB_TOKEN: BOB}
    assert token_scopes("", {}, ALICE) == {}


def test_the_bearer_header_picks_the_app_of_its_token() -> None:
    apps: dict[str, Any] = {ALICE_TOKEN: "alice-app", BOB_TOKEN: "bob-app"}
    front = ScopedApps(apps)
    assert front.app_for(f"Bearer {ALICE_TOKEN}") == "alice-app"
    assert front.app_for(f"bearer  {BOB_TOKEN} ") == "bob-app"
    for header in ("", "Bearer", "Bearer ", f"Basic {ALICE_TOKEN}", f"Bearer {ALICE_TOKEN}x"):
        assert front.app_for(header) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        (":8765", ("127.0.0.1", 8765)),
        ("8765", ("127.0.0.1", 8765)),
        ("[::1]:9000", ("::1", 9000)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_listen_addresses(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["host:", "host:port", "127.0.0.1:70000", ""])
def test_bad_listen_addresses_are_refused(value: str) -> None:
    with pytest.raises(ChatmemError, match="HOST:PORT"):
        parse_listen(value)


def test_the_mcp_bounds_are_the_chat_tools_bounds() -> None:
    from adapters import mcp_server
    from memory_core.conversation import tools

    assert mcp_server.MAX_RESULTS == tools.MAX_RESULTS
    assert mcp_server.MAX_LINES == tools.MAX_LINES
