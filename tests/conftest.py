"""Shared fixtures: a temporary workspace, its config, a fixed clock and an open core."""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_core import services
from memory_core.base.clock import ManualClock, ManualMonotonic
from memory_core.config import Config, load_config
from memory_core.embedding import model_cache
from memory_core.engine import MemoryCore
from tests.postgres import ACTIVE_STORAGE_ENV, PostgresServer

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
"""The instant every `clock` fixture starts at."""


class ExternalConnection(RuntimeError):
    """A test tried to reach a host that is not this machine."""


def _loopback_only(connect: Callable[[socket.socket, Any], Any]) -> Callable[..., Any]:
    def guarded(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            if host != "localhost" and not ipaddress.ip_address(host.split("%")[0]).is_loopback:
                raise ExternalConnection(f"tests stay on loopback; refused {host}")
        return connect(self, address)

    return guarded


RAM_DISK = Path("/dev/shm")
RAM_DISK_ROOM = 2 << 30
"""Free bytes the RAM disk must have for the run's temporary files to go there."""


def _ram_disk() -> Path | None:
    """The machine's RAM-backed directory, when it is writable and has room."""
    try:
        stat = os.statvfs(RAM_DISK)
    except OSError:
        return None
    if not os.access(RAM_DISK, os.W_OK) or stat.f_bavail * stat.f_frsize < RAM_DISK_ROOM:
        return None
    return RAM_DISK


def pytest_configure(config: pytest.Config) -> None:
    """No test reaches the network: a connection to anything but loopback fails at once
    (a Unix socket, as the PostgreSQL server's, is local by nature).

    The run's temporary directories (every workspace, the test PostgreSQL servers) go to
    the RAM disk when there is one with room, unless `--basetemp` or
    `PYTEST_DEBUG_TEMPROOT` says where: a fresh workspace's SQLite files cost ~100 ms of
    fsyncs to open and close on a disk, ~15 ms there, in most of the suite's tests. What a
    test checks never depends on a write reaching the platter (a killed process loses
    nothing the kernel has); the disk-full tests mount a file system of their own."""
    socket.socket.connect = _loopback_only(socket.socket.connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = _loopback_only(socket.socket.connect_ex)  # type: ignore[method-assign]
    chosen = config.option.basetemp is not None or "PYTEST_DEBUG_TEMPROOT" in os.environ
    if not chosen and (root := _ram_disk()) is not None:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(root)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores. Many tests spend a share of their time
    waiting on a child process, a server or a file lock, and the extra worker fills those
    waits: the suite took 9 min 16 s with two workers on a 2-core machine, 8 min 22 s
    with three."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` run first, each file's order kept otherwise. xdist's
    work-stealing schedule hands each worker a block of the list and lets an idle one
    take the tail of another's: a long test met late ends the run alone, one started
    first is overlapped by everything else. (A stable sort: every worker collects the
    same order, as xdist requires.)"""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session", autouse=True)
def _model_cache_of_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The local model's cache (memory_core/embedding/model_cache.py) of a test that loads
    the model goes to this run's temporary directory, shared by its workers (bundles are
    published by rename), never to the user's cache directory."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model_cache, "default_root", lambda: root / "model-cache")
        yield


@pytest.fixture(autouse=True)
def _no_proxy_for_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake servers listen on localhost; a proxy from the environment must not intercept."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(autouse=True)
def _words_alone_unless_dense(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A core ranks by words alone unless its test is marked `dense`: as for a user
    without the `vector` extra. Dense tests opt in and load the local model."""
    if request.node.get_closest_marker("dense") is None:
        monkeypatch.setattr(services, "build_embedder", lambda settings: None)


@pytest.fixture
def workspace(tmp_path: Path, storage_env: Mapping[str, str]) -> Path:
    """A fresh workspace directory, on the backend of the test (see
    `pytest_generate_tests`)."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


BACKENDS = ("sqlite", "postgres")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test of the storage itself (marked `storage`: the index, history, journal,
    isolation, the database's failures) runs once per backend; every other test that
    stores something (front ends, the chat engine, the tools) runs on SQLite alone, since
    what it checks does not depend on the database behind the core. `sqlite_only` (it
    tests SQLite itself: its files, its locks, its disk errors) and `postgres_only` (it
    steps transactions that only a server runs side by side) narrow a storage test."""
    if "storage_backend" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker
        backends = (
            BACKENDS[1:]
            if marked("postgres_only")
            else BACKENDS
            if marked("storage") and not marked("sqlite_only")
            else BACKENDS[:1]
        )
        metafunc.parametrize("storage_backend", backends, indirect=True)


@pytest.fixture
def storage_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def storage_env(
    storage_backend: str, request: pytest.FixtureRequest
) -> Iterator[Mapping[str, str]]:
    """The environment that selects the test's backend: nothing for SQLite, a schema of
    its own on the shared test server for PostgreSQL."""
    if storage_backend == "sqlite":
        yield {}
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    with server.schema() as dsn:
        env = {"CHATMEM_STORAGE_BACKEND": "postgres", "CHATMEM_POSTGRES_DSN": dsn}
        ACTIVE_STORAGE_ENV.update(env)
        try:
            yield env
        finally:
            ACTIVE_STORAGE_ENV.clear()


@pytest.fixture
def config(workspace: Path, storage_env: Mapping[str, str]) -> Config:
    return load_config(None, env=storage_env, workspace=workspace)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def monotonic() -> ManualMonotonic:
    """The monotonic clock of a test's cores: caches, backoffs and cool-downs are over
    when the test `advance`s it, never by waiting. A `core` uses it only in a test that
    asks for it; other cores keep the real one."""
    return ManualMonotonic()


@pytest.fixture
async def core(
    config: Config, clock: ManualClock, request: pytest.FixtureRequest
) -> AsyncIterator[MemoryCore]:
    ticking = (
        request.getfixturevalue("monotonic")
        if "monotonic" in request.fixturenames
        else time.monotonic
    )
    async with MemoryCore.open(config, clock=clock, monotonic=ticking) as opened:
        yield opened
