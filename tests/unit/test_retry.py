"""The one retry helper: doubling waits, and a rest on the injected monotonic clock."""

from __future__ import annotations

import logging
from itertools import islice

import pytest

from memory_core.base.clock import ManualMonotonic
from memory_core.base.errors import DatabaseUnreachable, MemoryFileError
from memory_core.base.retry import Backoff, CoolDown, OutageNotice, unreachable


def test_waits_double_up_to_the_most() -> None:
    assert list(islice(Backoff(0.5, 3.0).waits(), 6)) == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert Backoff(1.0, 30.0).after(20.0) == 30.0


def test_a_cool_down_rests_its_seconds_then_lets_one_probe_through() -> None:
    clock = ManualMonotonic()
    rest = CoolDown(5.0, clock)
    assert not rest.resting()
    rest.start()
    clock.advance(4.9)
    assert rest.resting()
    clock.advance(0.1)
    assert not rest.resting()
    rest.start()  # the probe failed: rest again
    assert rest.resting()
    rest.clear()
    assert not rest.resting()


def test_an_outage_is_said_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    notice = OutageNotice(logging.getLogger("test.outage"), "the work")
    notice.worked()
    for _ in range(5):
        assert notice.failed(DatabaseUnreachable("the database is unreachable"))
    assert notice.down
    notice.worked()
    notice.worked()
    assert notice.failed(DatabaseUnreachable("again"))
    said = [(r.levelname, r.getMessage().split(" (")[0]) for r in caplog.records]
    assert said == [
        ("WARNING", "the work paused while the database is unreachable"),
        ("INFO", "the work resumed: the database answers again"),
        ("WARNING", "the work paused while the database is unreachable"),
    ]
    assert not [r for r in caplog.records if r.exc_info]


def test_only_the_database_being_away_is_an_outage() -> None:
    notice = OutageNotice(logging.getLogger("test.outage"), "the work")
    assert not notice.failed(ValueError("a bug"))
    assert not notice.down
    away = DatabaseUnreachable("gone")
    wrapped = MemoryFileError("not saved")
    wrapped.__cause__ = away
    assert unreachable(wrapped) is away
    assert notice.failed(wrapped)
