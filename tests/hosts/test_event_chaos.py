"""The event chaos suite on the service hosts: `@deduplicated_event` on a Flask view and on a Django
view, each served by gunicorn, and on a FastAPI route (`runonce.events.asgi`, an `async def` job)
served by uvicorn, each app from localscheduler/hosts/apps importing runonce from the installed
wheel, receiving the real Pub/Sub emulator's pushes through the local push proxy with its faults
(lost acks, duplicate pushes, late arrivals, instances killed holding the claim) and the job's own
(retryable and permanent failures, kills before and right after the effect), on the Firestore
emulator.

The properties are tests/local/event_chaos.py's, the ones tests/local/test_event_chaos.py asserts
on functions-framework: every message has exactly one effect or exactly one dead letter with its
reason, none is lost (the dead letters are counted), no body starts again after one that ended
normally nor while another runs. Shorter than the functions-framework suite: two messages of each
fault, the three hosts played side by side once for the module. Two faults are left out to keep it
short, both the emulator's more than the host's: `attempts_exhausted` (Pub/Sub's own
dead-lettering after the maximum delivery attempts; the host answers it 500 as it does
`retryable`) needs a maximum event age of 37 s or more (`EventConfig.margin_problems`), so a late
message would be held 40 s; `slow` (a job past the 10 s ack deadline) needs a 15 s lease, which a
killed message then waits out. The 409 a push gets while another holds the message is still
played: by the duplicate pushes and the redeliveries of the killed messages.
"""

from __future__ import annotations

import functools

import pytest

from localscheduler.demos.events import EventConfig, EventHarness, EventResult, fault_table
from localscheduler.hosts.service import services
from localscheduler.side_by_side import side_by_side
from tests.conftest import PROJECT
from tests.local.event_chaos import EventChaosProperties, published, show

HOSTS = ("gunicorn-flask", "gunicorn-django", "uvicorn-fastapi")
SEED = 20261204
MIX = {
    "none": 4,
    "lost_ack": 2,
    "duplicate_push": 2,
    "killed_holding_claim": 2,
    "retryable": 2,
    "kill_before_effect": 2,
    "kill_after_effect": 2,
    "permanent": 2,
    "too_old": 2,
}
# A killed message is taken over after its 6 s lease; a late one is held 33 s. A shorter maximum
# age had ordinary messages reach it on a loaded machine while the killed servers restarted: 12 s
# with two hosts side by side, and 18 s with three (four retried messages at 18.3-19.9 s).
CONFIG = EventConfig(lease_seconds=6, max_event_age_seconds=30, topics=2, instances=3)
TIMEOUT_SECONDS = 120.0


@pytest.fixture(scope="module")
def played(firestore_emulator, pubsub_emulator, tmp_path_factory, installed_runonce):
    """Each host's outcome, the three played side by side."""
    by_name = {service.name: service for service in services(installed_runonce)}
    harnesses = [
        EventHarness(
            f"events-{host}", by_name[host], MIX, SEED, PROJECT, tmp_path_factory.mktemp(host), CONFIG
        )
        for host in HOSTS
    ]
    try:
        for harness in harnesses:  # one at a time: an instance's port is chosen before it binds it
            harness.start(pubsub_emulator.host)
        results = side_by_side([functools.partial(harness.play, TIMEOUT_SECONDS) for harness in harnesses])
    finally:
        for harness in harnesses:
            harness.stop()
    return dict(zip(HOSTS, results, strict=True))


@pytest.fixture(scope="module", params=HOSTS)
def outcome(request, played) -> EventResult:
    result = played[request.param]
    print(f"\n{request.param}:", end="")
    show(result)
    return result


def test_every_fault_but_attempts_exhausted_and_slow_was_published(outcome):
    assert set(published(outcome)) == set(fault_table(CONFIG)) - {"attempts_exhausted", "slow"}
    assert published(outcome) == MIX


class TestOnEachServiceHost(EventChaosProperties):
    """The event chaos properties on each host: the same tests as on functions-framework."""
