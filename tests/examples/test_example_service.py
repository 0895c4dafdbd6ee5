"""The example Cloud Run service (examples/service): the image `make service-image` builds and the
sandbox's service jobs run. Its main.py is served here as its Dockerfile serves it (uvicorn,
`main:app`), importing runonce from the installed wheel, on the Firestore emulator: a run delivered
twice at once, then retried, has one effect; and the files the image is built from agree with the
repository's pins. The image build itself needs Cloud Build (`make service-image`): not run here."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from google.cloud import firestore

from emulator.process import free_port
from tests.conftest import PROJECT
from tests.core.conftest import scheduler_headers
from tests.package.wheel import installed_environment

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "examples" / "service"


def pins(path: Path) -> dict[str, str]:
    """name -> version of each `name==version` line."""
    found = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#]+)", line.strip()):
            found[match.group(1).lower()] = match.group(2)
    return found


def test_the_images_requirements_are_pinned_as_the_repository_pins_them():
    theirs, ours = pins(SERVICE / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert theirs, "examples/service/requirements.txt pins nothing"
    assert {name: ours.get(name) for name in theirs} == theirs


def test_the_dockerfile_serves_main_app_on_cloud_runs_port_with_runonce_from_the_local_wheel():
    text = (SERVICE / "Dockerfile").read_text()
    (command,) = [line for line in text.splitlines() if line.startswith("CMD")]
    assert "uvicorn main:app" in command and "${PORT" in command and "0.0.0.0" in command
    # runonce itself never comes from the package index: only the wheel built from this checkout.
    assert "--no-index --no-deps --find-links ./wheels runonce" in text
    assert '"runonce[fastapi]"' in text
    assert "wheels/" in (SERVICE / ".gitignore").read_text()
    ignored = [
        line for line in (SERVICE / ".gcloudignore").read_text().splitlines() if not line.startswith("#")
    ]
    assert not any("wheels" in line for line in ignored)  # uploaded to Cloud Build


@pytest.fixture
def service(firestore_emulator, installed_runonce, tmp_path):
    port, outbox = free_port(), f"close_outbox_{uuid.uuid4().hex[:10]}"
    log = tmp_path / "uvicorn.log"
    environment = {
        **installed_environment(),
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "RUNONCE_COLLECTION": f"runs_{uuid.uuid4().hex[:10]}",
        "CLOSE_OUTBOX": outbox,
        "PORT": str(port),
    }
    # The Dockerfile's CMD, run from the folder the image copies main.py into.
    (command,) = [
        line for line in (SERVICE / "Dockerfile").read_text().splitlines() if line.startswith("CMD")
    ]
    shell = re.search(r'"(exec uvicorn[^"]*)"', command).group(1).replace("0.0.0.0", "127.0.0.1")
    shell = shell.replace("exec uvicorn", f"exec {installed_runonce} -m uvicorn")
    with log.open("w") as out:
        process = subprocess.Popen(
            ["sh", "-c", shell],
            cwd=SERVICE,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/jobs/close"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"the example service exited: {log.read_text()[-3000:]}")
            try:
                requests.get(url, timeout=1)
                break
            except (requests.ConnectionError, requests.Timeout):
                if time.monotonic() > deadline:
                    pytest.fail(f"the example service did not listen: {log.read_text()[-3000:]}")
                time.sleep(0.2)
        yield url, firestore.Client(project=PROJECT).collection(outbox), log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)


def test_a_run_delivered_twice_at_once_then_retried_has_one_effect(service):
    url, outbox, log = service
    headers = scheduler_headers(job="close-books", time="2026-12-01T01:00:00Z")
    with ThreadPoolExecutor(2) as pool:
        first = list(pool.map(lambda _: requests.post(url, headers=headers, timeout=30), range(2)))
    retry = requests.post(url, headers=headers, timeout=30)
    outcomes = sorted(answer.json()["outcome"] for answer in [*first, retry])
    assert outcomes.count("completed") == 1, (outcomes, log.read_text()[-2000:])
    assert set(outcomes) <= {"completed", "duplicate", "in_progress"}, outcomes
    assert retry.json()["outcome"] == "duplicate"
    effects = list(outbox.stream())
    assert len(effects) == 1
    assert effects[0].get("run_key") == retry.json()["run_key"]
