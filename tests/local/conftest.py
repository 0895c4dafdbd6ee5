"""Fixtures of the local scheduler's tests: the event harnesses run on the event tests' Pub/Sub
emulator fixture (each harness in a project of its own, so one emulator serves them all)."""

from tests.events.conftest import pubsub_emulator

__all__ = ["pubsub_emulator"]
