"""Instance pools: real functions-framework processes serving the example function."""

import threading
from datetime import UTC, datetime

import pytest
import requests

from emulator.process import free_port
from localscheduler.clock import AcceleratedClock
from localscheduler.hosts.pool import InstancePool
from stacks.team import FUNCTIONS_DIR


@pytest.fixture
def pool(firestore_emulator, tmp_path):
    clock_file = tmp_path / "clock"
    clock_file.write_text(AcceleratedClock.starting_now(datetime(2026, 1, 1, tzinfo=UTC), 1.0).spec())
    env = {
        "FIRESTORE_EMULATOR_HOST": firestore_emulator.host,
        "GOOGLE_CLOUD_PROJECT": "runonce-local",
        "RUNONCE_LOCAL_CLOCK_FILE": str(clock_file),
    }
    pool = InstancePool("instances-test", FUNCTIONS_DIR / "report" / "main.py", "handle", 2, env, tmp_path)
    yield pool.start()
    pool.stop()


def _headers_only_delivery(url: str) -> int:
    return requests.post(url, headers={"X-CloudScheduler-JobName": "probe"}, timeout=10).status_code


def test_an_instance_serves_the_deployed_function(pool):
    with pool.acquire(timeout=5) as instance:
        assert _headers_only_delivery(instance.url) == 400  # the handler's answer to a missing ScheduleTime


def test_a_killed_instance_is_replaced_and_serves_again(pool):
    with pool.acquire(timeout=5) as instance:
        pool.kill(instance)
    with pool.acquire(timeout=60) as first, pool.acquire(timeout=60) as second:
        assert {first.name, second.name} == {i.name for i in pool.instances}
        assert _headers_only_delivery(first.url) == _headers_only_delivery(second.url) == 400
    assert pool.restarts == 1


def test_stopping_the_pool_leaves_no_process(pool):
    pool.stop()
    assert pool.pids() == []


def test_ports_handed_to_pools_started_in_parallel_are_all_different():
    handed: list[int] = []

    def take() -> None:
        handed.extend(free_port() for _ in range(50))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(handed) == 400 and len(set(handed)) == 400
