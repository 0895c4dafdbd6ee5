"""Instance pools: real functions-framework processes serving the example function, and a pool
of another host."""

import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from emulator.process import free_port
from localscheduler.clock import AcceleratedClock
from localscheduler.hosts.pool import InstancePool
from localscheduler.hosts.probe import answers
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


@dataclass(frozen=True)
class FolderServer:
    """A host that is not functions-framework: Python's own http.server, serving one folder."""

    folder: Path

    def command(self, source: Path, target: str, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "--directory",
            str(self.folder),
            str(port),
        ]

    def environment(self, source: Path, target: str) -> dict[str, str]:
        return {}

    def serving(self, port: int) -> bool:
        return answers(port)


@pytest.mark.fast
def test_a_pool_runs_the_host_it_is_given(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "probe.txt").write_text("served by the pool's host")
    pool = InstancePool(
        "host-test", served / "probe.txt", "probe", 1, {}, tmp_path / "logs", host=FolderServer(served)
    )
    try:
        pool.start(timeout=30)
        with pool.acquire(timeout=5) as instance:
            assert requests.get(f"{instance.url}probe.txt", timeout=5).text == "served by the pool's host"
    finally:
        pool.stop()
    assert pool.pids() == []
