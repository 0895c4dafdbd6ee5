"""The FastAPI example of docs/library.md ("ASGI: FastAPI and Starlette") runs as written, and
every framework row of the README's table names a decorator that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import runonce
from runonce.scheduler import asgi
from tests.core.conftest import LEASE, scheduler_headers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_kind() -> str:
    return "memory"


def _block_after(path: Path, heading: str) -> str:
    text = path.read_text()
    section = text[text.index(heading) :]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.fast
def test_the_fastapi_example_runs_once_per_scheduled_run(serving_client, monkeypatch):
    monkeypatch.setenv("RUNONCE_LEASE_SECONDS", str(int(LEASE.total_seconds())))  # the test store's
    charged: list[str] = []

    async def charge(key: str) -> None:
        charged.append(key)

    namespace = {"charge": charge}
    exec(_block_after(ROOT / "docs" / "library.md", "### ASGI: FastAPI and Starlette"), namespace)
    client = TestClient(namespace["app"])
    first = client.post("/jobs/close", headers=scheduler_headers()).json()
    again = client.post("/jobs/close", headers=scheduler_headers()).json()
    assert (first["outcome"], again["outcome"]) == ("completed", "duplicate")
    assert charged == [first["run_key"]] and first["result"] == {"charged": first["run_key"]}


@pytest.mark.fast
def test_every_framework_in_the_readme_names_a_decorator_that_exists():
    readme = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| (Flask|Django|FastAPI, Starlette) \| (.*) \|$", readme, re.MULTILINE))
    assert set(rows) == {"Flask", "Django", "FastAPI, Starlette"}
    assert all("`@deduplicated`" in row for row in rows.values())
    assert "runonce.scheduler.asgi" in rows["FastAPI, Starlette"] and callable(asgi.deduplicated)
    assert callable(runonce.deduplicated)
