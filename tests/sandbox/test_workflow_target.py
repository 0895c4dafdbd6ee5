"""The proxy against the real Workflows API: one execution per run key, found again by its label.

Deploys a tiny workflow in the sandbox project (RUNONCE_SANDBOX_REGION, default europe-west1;
the Workflows API must be enabled, and the credentials allowed to create workflows and executions),
starts it twice through the proxy with one run key, and deletes it. This is where the label filter
form `labels.runonce_run="..."` (docs/targets.md, "not verified here") meets the real API.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

pytestmark = pytest.mark.sandbox

WORKFLOWS = "https://workflows.googleapis.com/v1"
EXECUTIONS = "https://workflowexecutions.googleapis.com/v1"
SOURCE = """
main:
  params: [args]
  steps:
    - done:
        return: ${args}
"""


def _session():
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return AuthorizedSession(credentials)


def _wait(session, operation: dict, deadline_seconds: float = 300) -> dict:
    """Poll a Workflows long-running operation until it is done; fail with its error."""
    deadline = time.monotonic() + deadline_seconds
    while not operation.get("done"):
        assert time.monotonic() < deadline, f"operation {operation['name']} not done in time"
        time.sleep(3)
        operation = session.get(f"{WORKFLOWS}/{operation['name']}", timeout=30).json()
    assert "error" not in operation, operation["error"]
    return operation


@pytest.fixture(scope="module")
def tiny_workflow():
    """A workflow that returns its argument, created for this module and deleted after it."""
    session = _session()
    project = os.environ["RUNONCE_SANDBOX_PROJECT"]
    region = os.environ.get("RUNONCE_SANDBOX_REGION", "europe-west1")
    workflow_id = f"runonce-target-{uuid.uuid4().hex[:8]}"
    parent = f"projects/{project}/locations/{region}"
    created = session.post(
        f"{WORKFLOWS}/{parent}/workflows",
        params={"workflowId": workflow_id},
        json={"sourceContents": SOURCE, "labels": {"runonce": "sandbox"}},
        timeout=60,
    )
    created.raise_for_status()
    _wait(session, created.json())
    name = f"{parent}/workflows/{workflow_id}"
    yield name
    deleted = session.delete(f"{WORKFLOWS}/{name}", timeout=60)
    deleted.raise_for_status()
    _wait(session, deleted.json())


def test_a_repeated_start_finds_the_first_execution_by_its_label(tiny_workflow):
    from runonce.targets import LABEL_KEY, Workflow
    from runonce.targets.proxy import Proxy

    key = uuid.uuid4().hex + uuid.uuid4().hex
    proxy = Proxy(Workflow(tiny_workflow, {"hello": "sandbox"}))
    first = proxy.start(key)
    again = proxy.start(key)  # what a retry after a lost answer, or a takeover, does

    assert first["reconciled"] is False
    assert again == {**first, "reconciled": True}
    listing = _session().get(
        f"{EXECUTIONS}/{tiny_workflow}/executions",
        params={"filter": f'labels.{LABEL_KEY}="{key[:63]}"', "view": "FULL"},
        timeout=30,
    )
    listing.raise_for_status()
    assert [execution["name"] for execution in listing.json().get("executions", [])] == [first["execution"]]
