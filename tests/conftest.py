"""Shared fixtures: one real Firestore emulator and one real Pub/Sub emulator per test session,
started here on first use, stopped at the end; runonce's clock; and the two stores a test marked
`both_stores` runs on.

A test marked `both_stores` that asks for `store_kind` (through the fixtures that serve a job) runs
twice: on the Firestore emulator, and on the in-memory store, that second run being in the fast
tier (marked `fast`). `make test-fast` runs the fast tier alone with RUNONCE_FAST_TIER set, and
then any test that starts an emulator fails, naming itself: it is not fast.

`installed_runonce`, for any test: the python of a fresh venv where runonce is the wheel built from
functions/, not the source tree (see tests/package/wheel.py: how to run a host with it).
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta

import pytest

import runonce
from emulator.firestore import EmulatorUnavailable, FirestoreEmulator
from emulator.pubsub import PubSubEmulator
from tests.package.wheel import installed_runonce as installed_runonce
from tests.package.wheel import runonce_wheel as runonce_wheel

PROJECT = "runonce-local"
STORES = ("firestore", pytest.param("memory", marks=pytest.mark.fast))
FAST_TIER_VARIABLE = "RUNONCE_FAST_TIER"
SCHEDULED = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
"""The scheduled time of the runs the tests deliver."""


class ManualClock:
    """A clock the test moves forward; installed process-wide with runonce.set_clock."""

    def __init__(self, start: datetime):
        self.current = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.current

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.current += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    """runonce's clock for one test, starting at the scheduled time plus five seconds, as a real
    delivery would be."""
    manual = ManualClock(SCHEDULED + timedelta(seconds=5))
    runonce.set_clock(manual)
    yield manual
    runonce.set_clock(None)


def pytest_generate_tests(metafunc):
    """A test marked `both_stores` runs once per store (see the module docstring)."""
    if "store_kind" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_stores"):
        metafunc.parametrize("store_kind", STORES)


@pytest.fixture
def store_kind() -> str:
    """The store a test's job is served on: the Firestore emulator unless it is marked `both_stores`."""
    return "firestore"


def _serving(emulator, what: str, variables):
    """Start `emulator`, point the environment at it (`variables(emulator)`) until the session ends,
    then stop it and put the environment back; fail the tests that need it if it cannot start, or
    if this is the fast tier."""
    if os.environ.get(FAST_TIER_VARIABLE):
        pytest.fail(
            f"the fast tier starts no emulator, and this test needs the {what} emulator: it is not fast"
        )
    try:
        emulator.start()
    except EmulatorUnavailable as exc:
        pytest.fail(f"cannot run the {what} tests: {exc}", pytrace=False)
    wanted = variables(emulator)
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    yield emulator
    emulator.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def firestore_emulator():
    """A running Firestore emulator; FIRESTORE_EMULATOR_HOST and GOOGLE_CLOUD_PROJECT point at it."""
    yield from _serving(
        FirestoreEmulator(),
        "Firestore",
        lambda emulator: {"FIRESTORE_EMULATOR_HOST": emulator.host, "GOOGLE_CLOUD_PROJECT": PROJECT},
    )


@pytest.fixture(scope="session")
def pubsub_emulator():
    """A running Pub/Sub emulator; PUBSUB_EMULATOR_HOST points at it for the whole session."""
    yield from _serving(PubSubEmulator(), "Pub/Sub", lambda emulator: {"PUBSUB_EMULATOR_HOST": emulator.host})


@pytest.fixture
def firestore_client(firestore_emulator):
    """A Firestore client on the emulator."""
    from google.cloud import firestore

    return firestore.Client(project=PROJECT)


def clear_of_the_next_tick(schedule: str, time_zone: str, margin: timedelta) -> None:
    """Wait, if the schedule's next tick is less than `margin` away, until it has passed. A forced
    delivery carries the job's next scheduled time, and the library tells it from a scheduled one
    by its being ahead of the clock (docs/library.md, forced runs): a test on the real clock that
    sends one in the last moments before a tick sees an ordinary scheduled delivery instead, once
    per tick of an hourly schedule (a fresh-clone CI at 08:00 UTC did). Such a test starts clear
    of that edge."""
    import time

    from runonce.scheduler.expected import next_time

    edge = next_time(schedule, time_zone, datetime.now(UTC)) - datetime.now(UTC)
    if edge < margin:
        time.sleep(edge.total_seconds() + 1)
