"""Scope resolution (dmScope modes, groups) and the scope <-> directory slug mapping."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.base.errors import ScopeError
from memory_core.base.scope import (
    MAIN,
    SLUG_MAX,
    DmScope,
    InboundContext,
    ScopeKey,
    is_hashed_slug,
    is_valid_slug,
    key_from_slug,
    resolve_scope,
    scope_slug,
)
from memory_core.base.workspace import SCOPE_KEY_FILE, Workspace

DM = InboundContext(
    channel="telegram", account_id="bot1", peer_id="42", chat_type="direct", chat_id="42"
)
GROUP = InboundContext(
    channel="telegram",
    account_id="bot1",
    peer_id="42",
    chat_type="group",
    chat_id="-100123",
    thread_id="7",
)


# --- resolve_scope -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (DmScope.MAIN, "main"),
        (DmScope.PER_PEER, "peer:42"),
        (DmScope.PER_CHANNEL_PEER, "telegram:peer:42"),
        (DmScope.PER_ACCOUNT_CHANNEL_PEER, "telegram:bot1:peer:42"),
        ("per-peer", "peer:42"),
    ],
)
def test_direct_chats_follow_dm_scope(mode: DmScope | str, expected: str) -> None:
    assert resolve_scope(DM, mode) == ScopeKey(expected)


def test_default_mode_is_main() -> None:
    assert resolve_scope(DM) is MAIN
    assert resolve_scope(DM).is_main


@pytest.mark.parametrize("mode", list(DmScope))
def test_groups_are_per_chat_in_every_mode(mode: DmScope) -> None:
    assert resolve_scope(GROUP, mode) == ScopeKey("group:telegram:-100123")
    assert resolve_scope(GROUP, mode, topic_scope=True) == ScopeKey(
        "group:telegram:-100123:topic:7"
    )


def test_topic_scope_without_thread_is_the_group() -> None:
    no_thread = InboundContext("dingtalk", "a", "u1", "group", "cid9")
    assert resolve_scope(no_thread, topic_scope=True) == ScopeKey("group:dingtalk:cid9")


def test_peers_are_separated() -> None:
    other = InboundContext("telegram", "bot1", "43", "direct", "43")
    for mode in (DmScope.PER_PEER, DmScope.PER_CHANNEL_PEER, DmScope.PER_ACCOUNT_CHANNEL_PEER):
        assert resolve_scope(DM, mode) != resolve_scope(other, mode)
    assert resolve_scope(DM, DmScope.MAIN) == resolve_scope(other, DmScope.MAIN)


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError):
        resolve_scope(DM, "per-planet")


def test_bad_keys_raise_scope_error() -> None:
    with pytest.raises(ScopeError):
        ScopeKey("")
    with pytest.raises(ScopeError):
        ScopeKey("peer:\x00")
    with pytest.raises(ScopeError):
        resolve_scope(InboundContext("telegram", "b", "4\x002", "direct", "1"), "per-peer")
    # A lone surrogate (e.g. decoded from a JSON "\ud800" escape) has no UTF-8 form.
    with pytest.raises(ScopeError):
        ScopeKey("group:dingtalk:\ud800")


# --- slugs -------------------------------------------------------------------------------

CRAFTED = [
    "main",
    "../../etc",
    "a/b",
    "a\\b",
    ".",
    "..",
    "~",
    "~~",
    "~~0123456789abcdef0123456789abcdef",
    "-",
    "_",
    ":",
    "a:b",
    "a_b",
    "peer:42",
    "group:telegram:-100123:topic:7",
    "x" * 300,
    "X" * 300,
    ":" * 300,
    "中" * 300,
    "é" * 61,
    "用户:peer:李雷",
    "emoji🎉",
    "quote'\"`",
    'a" OR b*',
    "NEAR(a b)",
    "con",
    "nul",
    "UPPER",
    "upper",
    " spaced key ",
    "tab\tnew\nline",
    "\u202eRTL",
]

keys = st.text(
    alphabet=st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), min_size=1
) | st.sampled_from(CRAFTED)


def assert_safe(slug: str, scopes_dir: Path) -> None:
    assert slug
    assert "/" not in slug
    assert "\\" not in slug
    assert "\x00" not in slug
    assert slug not in (".", "..")
    assert len(slug) <= SLUG_MAX
    assert slug == slug.lower()
    assert is_valid_slug(slug)
    resolved = (scopes_dir / slug).resolve()
    assert resolved.parent == scopes_dir.resolve()


@pytest.mark.parametrize("key", CRAFTED)
def test_crafted_keys_are_safe_and_reversible(key: str, tmp_path: Path) -> None:
    slug = scope_slug(ScopeKey(key))
    assert_safe(slug, tmp_path)
    if is_hashed_slug(slug):
        assert len(key.encode()) > 30  # only long keys are hashed
        with pytest.raises(ScopeError):
            key_from_slug(slug)
    else:
        assert key_from_slug(slug) == ScopeKey(key)


def test_plain_slug_examples() -> None:
    assert scope_slug(ScopeKey("peer:42")) == "peer_42"
    assert scope_slug(ScopeKey("a_b")) == "a~5fb"
    assert scope_slug(ScopeKey("..")) == "~2e~2e"
    assert scope_slug(ScopeKey("A")) == "~41"
    assert is_hashed_slug(scope_slug(ScopeKey("x" * 300)))


@settings(max_examples=500, deadline=None)
@given(keys)
def test_slug_is_safe_and_round_trips(key: str) -> None:
    slug = scope_slug(ScopeKey(key))
    assert_safe(slug, Workspace.at("/srv/ws").scopes_dir)
    if not is_hashed_slug(slug):
        assert key_from_slug(slug) == ScopeKey(key)


@settings(max_examples=200, deadline=None)
@given(st.lists(keys, min_size=2, max_size=20, unique=True))
def test_slugs_are_injective_even_case_insensitively(distinct: list[str]) -> None:
    slugs = [scope_slug(ScopeKey(k)) for k in distinct]
    assert len(set(slugs)) == len(slugs)
    assert len({s.casefold() for s in slugs}) == len(slugs)


@given(st.text(alphabet="abcXYZ:", min_size=1, max_size=200))
def test_upper_and_lower_case_keys_differ(key: str) -> None:
    upper, lower = key.upper(), key.lower()
    if upper == lower:
        return
    a, b = scope_slug(ScopeKey(upper)), scope_slug(ScopeKey(lower))
    assert a != b
    assert a.lower() != b.lower()


def test_hashed_and_plain_slugs_never_collide() -> None:
    long_key = ScopeKey("peer:" + "9" * 200)
    hashed = scope_slug(long_key)
    assert is_hashed_slug(hashed)
    # The plain encoding of "~~..." escapes every tilde, so it cannot look hashed.
    assert not is_hashed_slug(scope_slug(ScopeKey(hashed)))
    assert scope_slug(ScopeKey(hashed)) != hashed


@pytest.mark.parametrize(
    "slug", ["", ".", "..", "a/b", "A", "~", "~4", "~zz", "a~~b", "x" * (SLUG_MAX + 1)]
)
def test_invalid_slugs_are_rejected(slug: str) -> None:
    assert not is_valid_slug(slug)
    with pytest.raises(ScopeError):
        key_from_slug(slug)


# --- workspace directories ---------------------------------------------------------------


def test_workspace_lists_created_scopes(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    assert ws.scopes() == [MAIN]
    created = [
        ScopeKey("peer:42"),
        ScopeKey("group:telegram:-100123"),
        ScopeKey("peer:" + "長" * 100),  # hashed slug, found through its key file
        ScopeKey("../../etc"),
    ]
    for key in created:
        ws.ensure_scope(key)
    ws.ensure_scope(MAIN)
    hashed_dir = ws.memory_dir(created[2])
    assert is_hashed_slug(hashed_dir.name)
    assert (hashed_dir / SCOPE_KEY_FILE).read_text(encoding="utf-8") == created[2].value
    assert ws.scopes() == [MAIN, *sorted(created, key=lambda k: k.value)]
    for key in created:
        assert ws.memory_dir(key).parent == ws.scopes_dir
        assert ws.long_term_path(key).name == "LONG_TERM.md"
    assert ws.long_term_path(MAIN) == tmp_path / "MEMORY.md"
    assert not (tmp_path.parent / "etc").exists()


def test_workspace_ignores_stray_directories(tmp_path: Path) -> None:
    ws = Workspace.at(tmp_path)
    ws.ensure_scope(ScopeKey("peer:1"))
    for name in ("Not-A-Slug", "~ff", "~00", "~61", "main", "x~~" + "0" * 32):
        (ws.scopes_dir / name).mkdir()
    (ws.scopes_dir / "peer_2").write_text("a file, not a scope", encoding="utf-8")
    # A hashed directory whose key file names another scope is not trusted.
    forged = ws.scopes_dir / scope_slug(ScopeKey("peer:" + "7" * 200))
    forged.mkdir()
    (forged / SCOPE_KEY_FILE).write_text("peer:1", encoding="utf-8")
    garbled = ws.scopes_dir / scope_slug(ScopeKey("peer:" + "8" * 200))
    garbled.mkdir()
    (garbled / SCOPE_KEY_FILE).write_bytes(b"\xff\xfe not utf-8")
    assert ws.scopes() == [MAIN, ScopeKey("peer:1")]
