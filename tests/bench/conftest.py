"""Fixtures for the benches' tests: one install of this checkout shared by the session.

Installing the checkout as a user does (its own venv, `pip install`, not editable) takes
about a minute, so every test that needs one shares it; under xdist the workers share
the cache directory too, and `installed`'s file lock has the others wait for the first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.installs import Install, installed


@pytest.fixture(scope="session")
def install_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is a child of the run's: share the run's.
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / "bench-installs"


@pytest.fixture(scope="session")
def project_install(install_cache: Path) -> Install:
    """This checkout installed in its own venv with the vector extra (what vector_bench's
    smoke run needs; one install serves every test)."""
    return installed(".", install_cache, ["vector"])
