"""Shared fixtures: one real Firestore emulator and one real Pub/Sub emulator per test session,
started here on first use, stopped at the end."""

from __future__ import annotations

import os

import pytest

from emulator.firestore import EmulatorUnavailable, FirestoreEmulator
from emulator.pubsub import PubSubEmulator

PROJECT = "runonce-local"


@pytest.fixture(scope="session")
def firestore_emulator():
    """A running Firestore emulator; FIRESTORE_EMULATOR_HOST and GOOGLE_CLOUD_PROJECT point at it."""
    try:
        emulator = FirestoreEmulator().start()
    except EmulatorUnavailable as exc:
        pytest.fail(f"cannot run the Firestore tests: {exc}", pytrace=False)
    saved = {name: os.environ.get(name) for name in ("FIRESTORE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT")}
    os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host
    os.environ["GOOGLE_CLOUD_PROJECT"] = PROJECT
    yield emulator
    emulator.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def pubsub_emulator():
    """A running Pub/Sub emulator; PUBSUB_EMULATOR_HOST points at it for the whole session."""
    try:
        emulator = PubSubEmulator().start()
    except EmulatorUnavailable as exc:
        pytest.fail(f"cannot run the Pub/Sub tests: {exc}", pytrace=False)
    saved = os.environ.get("PUBSUB_EMULATOR_HOST")
    os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
    yield emulator
    emulator.stop()
    if saved is None:
        os.environ.pop("PUBSUB_EMULATOR_HOST", None)
    else:
        os.environ["PUBSUB_EMULATOR_HOST"] = saved


@pytest.fixture
def firestore_client(firestore_emulator):
    """A Firestore client on the emulator."""
    from google.cloud import firestore

    return firestore.Client(project=PROJECT)
