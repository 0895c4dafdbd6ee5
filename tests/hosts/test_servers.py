"""Real servers on the Firestore emulator: gunicorn serving a Flask app and a Django app (two
worker processes of four threads each), uvicorn serving a FastAPI app with an `async def` job and a
`def` job (two worker processes). Each is started here with the apps of tests/hosts/apps, importing
runonce from the installed wheel (`installed_runonce`, tests/package/wheel.py), and delivered
to as Cloud Scheduler does: duplicates at once, a lost answer and its retry, a permanent failure.
The job's effects are lines in a file: one run, one line."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from emulator.process import free_port
from tests.conftest import PROJECT
from tests.core.conftest import scheduler_headers
from tests.package.wheel import installed_environment

ROOT = Path(__file__).resolve().parents[2]
SERVERS = {
    "gunicorn-flask": ["gunicorn", "-w", "2", "--threads", "4", "tests.hosts.apps.flask_app:app"],
    "gunicorn-django": ["gunicorn", "-w", "2", "--threads", "4", "tests.hosts.apps.django_app:application"],
    "uvicorn-fastapi": ["uvicorn", "--workers", "2", "tests.hosts.apps.fastapi_app:app"],
}
PATHS = {"uvicorn-fastapi": ["/jobs/close", "/jobs/close-sync"]}
"""The routes served, when not only /jobs/close: FastAPI's `async def` job and its `def` job."""


class Server:
    """One server process group on a port of its own, its job's effects in `effects`."""

    def __init__(self, python: Path, kind: str, workdir: Path, path: str, lease: int = 60):
        self.port = free_port()
        self.effects, self.started = workdir / "effects.txt", workdir / "started.txt"
        self.effects.touch()
        self.started.touch()
        self.log = workdir / "server.log"
        self.url = f"http://127.0.0.1:{self.port}{path}"
        command = [str(python), "-m", *SERVERS[kind]]
        command += (
            ["--bind", f"127.0.0.1:{self.port}"]
            if kind.startswith("gunicorn")
            else ["--port", str(self.port)]
        )
        # No PYTHONPATH: `python -m` run from ROOT finds tests.hosts.apps, and runonce only in the venv.
        environment = {
            **installed_environment(),
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "RUNONCE_COLLECTION": f"runs_{uuid.uuid4().hex[:12]}",
            "RUNONCE_LEASE_SECONDS": str(lease),
            "RUNONCE_TEST_EFFECTS": str(self.effects),
            "RUNONCE_TEST_STARTED": str(self.started),
        }
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server exited: {self.log.read_text()[-3000:]}")
            try:
                requests.get(self.url, timeout=1)
                return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        pytest.fail(f"the server did not listen within {seconds} s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)

    def effects_of(self, key: str) -> list[str]:
        return [line for line in self.effects.read_text().splitlines() if line.startswith(key)]

    def started_by(self, key: str) -> list[int]:
        """The processes whose job body started the run `key`."""
        return [
            int(line.split()[1]) for line in self.started.read_text().splitlines() if line.startswith(key)
        ]


@pytest.fixture(
    scope="module",
    params=[(kind, path) for kind in sorted(SERVERS) for path in PATHS.get(kind, ["/jobs/close"])],
    ids=lambda param: param[0] + param[1].removeprefix("/jobs/close"),
)
def server(request, firestore_emulator, tmp_path_factory, installed_runonce):
    kind, path = request.param
    started = Server(installed_runonce, kind, tmp_path_factory.mktemp(kind), path)
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()


SHORT_LEASE = 3


@pytest.fixture(scope="module", params=sorted(SERVERS))
def short_lease_server(request, firestore_emulator, tmp_path_factory, installed_runonce):
    """A server whose runs are leased for SHORT_LEASE seconds, so a takeover comes quickly."""
    workdir = tmp_path_factory.mktemp(f"{request.param}-short")
    started = Server(installed_runonce, request.param, workdir, "/jobs/close", SHORT_LEASE)
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()


def test_the_servers_import_runonce_from_the_installed_wheel_not_the_source_tree(installed_runonce):
    found = subprocess.run(
        [str(installed_runonce), "-c", "import runonce, tests.hosts.apps.job; print(runonce.__file__)"],
        cwd=ROOT,
        env=installed_environment(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).is_relative_to(installed_runonce.parents[1]), found
    assert not Path(found).is_relative_to(ROOT / "functions"), found


def delivery(**extra: str) -> dict[str, str]:
    """The headers of one new run: a job of its own, scheduled a second ago."""
    time_ = (datetime.now(UTC) - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**scheduler_headers(job=f"close-{uuid.uuid4().hex[:8]}", time=time_), **extra}


def test_simultaneous_duplicates_of_one_run_give_exactly_one_body(server):
    headers = delivery(**{"X-Test-Sleep": "0.5"})
    answers: list[requests.Response] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(requests.post(server.url, headers=headers, timeout=30))
        )
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(40)
    outcomes = sorted(answer.json()["outcome"] for answer in answers)
    assert len(answers) == 8 and outcomes.count("completed") == 1, outcomes
    assert set(outcomes) <= {"completed", "in_progress", "duplicate"}
    key = next(answer.json()["run_key"] for answer in answers if answer.json()["outcome"] == "completed")
    assert len(server.effects_of(key)) == 1


def test_a_lost_answer_and_its_retry_give_one_effect(server):
    headers = delivery(**{"X-Test-Sleep": "1.5"})
    with pytest.raises(requests.Timeout):
        requests.post(server.url, headers=headers, timeout=0.3)  # the answer never reaches Scheduler
    retry = requests.post(server.url, headers=headers, timeout=10)
    assert (retry.status_code, retry.json()["outcome"]) == (409, "in_progress")
    key = retry.json()["run_key"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        later = requests.post(server.url, headers=headers, timeout=10)
        if later.status_code == 200:
            break
        time.sleep(0.3)
    assert (later.status_code, later.json()["outcome"], later.json()["result"]) == (
        200,
        "duplicate",
        {"effect": key},
    )
    assert len(server.effects_of(key)) == 1


def test_a_permanent_failure_is_answered_200_failed_and_not_run_again(server):
    headers = delivery(**{"X-Test-Fail": "permanent"})
    first = requests.post(server.url, headers=headers, timeout=10)
    assert (first.status_code, first.json()["outcome"]) == (200, "failed")
    assert first.json()["error"] == "the test asked for a permanent failure"
    again = requests.post(server.url, headers=headers, timeout=10)
    assert (again.status_code, again.json()["outcome"], again.json()["status"]) == (
        200,
        "duplicate",
        "failed",
    )
    assert server.effects_of(first.json()["run_key"]) == []


def test_a_worker_killed_mid_run_holds_the_run_until_its_lease_then_a_retry_runs_it_once(short_lease_server):
    server = short_lease_server
    headers = delivery(**{"X-Test-Sleep": "30"})  # this attempt never reaches its effect
    killed: list[int] = []

    def kill_when_started() -> None:
        deadline = time.monotonic() + 20
        while not killed and time.monotonic() < deadline:
            lines = server.started.read_text().splitlines()
            if lines:
                killed.append(int(lines[-1].split()[1]))
                os.kill(killed[0], signal.SIGKILL)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    with pytest.raises(requests.RequestException):  # the worker dies under the request
        requests.post(server.url, headers=headers, timeout=25)
    killer.join(25)
    assert killed, "the job never started"
    retry = requests.post(server.url, headers={**headers, "X-Test-Sleep": "0"}, timeout=10)
    assert (retry.status_code, retry.json()["outcome"]) == (409, "in_progress")  # its lease still holds it
    key = retry.json()["run_key"]
    time.sleep(SHORT_LEASE + 0.5)
    taken = requests.post(server.url, headers={**headers, "X-Test-Sleep": "0"}, timeout=10)
    assert (taken.status_code, taken.json()["outcome"], taken.json()["attempt"]) == (200, "completed", 2)
    assert len(server.effects_of(key)) == 1 and len(server.started_by(key)) == 2
