"""Fixtures for `@deduplicated_event` on the service hosts: the event tests' fixtures
(tests/events/conftest.py), registered here, so the probe, the stores and the dead-letter copies
are theirs."""

from __future__ import annotations

from tests.events import conftest as events

collection, dead_letter_topic, memory_store = events.collection, events.dead_letter_topic, events.memory_store
probe, pubsub, records, recorded_copies = events.probe, events.pubsub, events.records, events.recorded_copies
tap, tapped_client = events.tap, events.tapped_client
