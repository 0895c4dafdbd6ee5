"""The Google APIs the sandbox tests call, over REST with the sandbox credentials.

Each helper is one documented call (its reference page named in docs/stacks.md, "The sandbox
suite"). Pub/Sub's base URL can be pointed at the emulator, which serves the same REST paths:
that is how the offline tests exercise publish, pull and acknowledge.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import datetime
from typing import Any

import requests

from stacks import naming
from tests.sandbox.dead_letters import DeadLetter, read_dead_letter
from tests.sandbox.waiting import wait_for

PUBSUB = "https://pubsub.googleapis.com/v1"
SCHEDULER = "https://cloudscheduler.googleapis.com/v1"
LOGGING = "https://logging.googleapis.com/v2"
STORAGE_UPLOAD = "https://storage.googleapis.com/upload/storage/v1"
FUNCTIONS = "https://cloudfunctions.googleapis.com/v2"
EVENTARC = "https://eventarc.googleapis.com/v1"
RUN = "https://run.googleapis.com/v2"
CLOUD_BUILD = "https://cloudbuild.googleapis.com/v1"
WORKFLOW_EXECUTIONS = "https://workflowexecutions.googleapis.com/v1"
RESOURCE_MANAGER = "https://cloudresourcemanager.googleapis.com/v3"
BILLING = "https://cloudbilling.googleapis.com/v1"
SERVICE_USAGE = "https://serviceusage.googleapis.com/v1"
OPERATION_WITHIN = 10 * 60
PREREQUISITE_APIS = ("serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com")
"""What must be on before the first apply (docs/stacks.md, "First deploy")."""
TIMEOUT = 60


def authorized_session() -> requests.Session:
    """A session that signs every request with the sandbox credentials (cloud-platform scope)."""
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return AuthorizedSession(credentials)


def answered(response: requests.Response) -> dict[str, Any]:
    """The JSON answer of a successful call; the failure's text otherwise."""
    assert response.ok, f"{response.request.method} {response.url}: {response.status_code} {response.text}"
    return response.json() if response.content else {}


def rfc3339(instant: datetime) -> str:
    """An aware datetime as the RFC 3339 text Logging filters and Google's timestamps use."""
    return instant.isoformat().replace("+00:00", "Z")


class PubSub:
    """Publish, pull and acknowledge on one Pub/Sub endpoint (the service, or the emulator)."""

    def __init__(self, session: requests.Session, base: str = PUBSUB) -> None:
        self.session = session
        self.base = base

    def publish(self, topic: str, data: bytes, attributes: dict[str, str] | None = None) -> str:
        """Publish one message to `projects/P/topics/T`; its messageId."""
        message: dict[str, Any] = {"data": base64.b64encode(data).decode()}
        if attributes:
            message["attributes"] = attributes
        answer = answered(
            self.session.post(f"{self.base}/{topic}:publish", json={"messages": [message]}, timeout=TIMEOUT)
        )
        return answer["messageIds"][0]

    def pull(self, subscription: str, max_messages: int = 100) -> list[dict[str, Any]]:
        """What `projects/P/subscriptions/S` has now (`receivedMessages`), without waiting."""
        answer = answered(
            self.session.post(
                f"{self.base}/{subscription}:pull",
                json={"maxMessages": max_messages, "returnImmediately": True},
                timeout=TIMEOUT,
            )
        )
        return answer.get("receivedMessages", [])

    def acknowledge(self, subscription: str, ack_ids: list[str]) -> None:
        """Acknowledge pulled messages, so that they are not delivered again."""
        if ack_ids:
            answered(
                self.session.post(
                    f"{self.base}/{subscription}:acknowledge", json={"ackIds": ack_ids}, timeout=TIMEOUT
                )
            )

    def take_dead_letters(self, subscription: str) -> list[DeadLetter]:
        """Pull every dead letter there is now, read each, and acknowledge them."""
        letters = [read_dead_letter(received, subscription) for received in self.pull(subscription)]
        self.acknowledge(subscription, [letter.ack_id for letter in letters])
        return letters

    def subscription(self, subscription: str) -> dict[str, Any]:
        """The subscription resource (its retention, retry and dead-letter policies)."""
        return answered(self.session.get(f"{self.base}/{subscription}", timeout=TIMEOUT))


def force_run(session: requests.Session, project: str, region: str, team: str, job: str) -> None:
    """Fire the team's Scheduler job for `job` now ("Force run"), through jobs.run."""
    name = f"projects/{project}/locations/{region}/jobs/{naming.scheduler_job_name(team, job)}"
    answered(session.post(f"{SCHEDULER}/{name}:run", json={}, timeout=TIMEOUT))


def every_page(fetch: Callable[[dict[str, str]], dict[str, Any]], field: str) -> list[dict[str, Any]]:
    """Every `field` item of a paged list call: `fetch(page)` makes the call with `page` added
    to its parameters (nothing for the first page, then `pageToken`)."""
    items: list[dict[str, Any]] = []
    page: dict[str, str] = {}
    while True:
        answer = fetch(page)
        items.extend(answer.get(field, []))
        if not answer.get("nextPageToken"):
            return items
        page = {"pageToken": answer["nextPageToken"]}


def log_entries(session: requests.Session, project: str, filter: str) -> list[dict[str, Any]]:
    """Every Cloud Logging entry of the project that matches `filter` (entries.list)."""
    body = {"resourceNames": [f"projects/{project}"], "filter": filter, "pageSize": 1000}
    url = f"{LOGGING}/entries:list"
    return every_page(
        lambda page: answered(session.post(url, json={**body, **page}, timeout=TIMEOUT)), "entries"
    )


def upload(session: requests.Session, bucket: str, name: str, data: bytes) -> None:
    """Upload one object (a simple media upload), which finalizes it."""
    answered(
        session.post(
            f"{STORAGE_UPLOAD}/b/{bucket}/o",
            params={"uploadType": "media", "name": name},
            data=data,
            headers={"Content-Type": "application/octet-stream"},
            timeout=TIMEOUT,
        )
    )


def function(session: requests.Session, project: str, region: str, name: str) -> dict[str, Any]:
    """The deployed gen2 function (its eventTrigger and serviceConfig)."""
    return answered(
        session.get(f"{FUNCTIONS}/projects/{project}/locations/{region}/functions/{name}", timeout=TIMEOUT)
    )


def eventarc_trigger(session: requests.Session, trigger: str) -> dict[str, Any]:
    """An Eventarc trigger by its full name (its transport's Pub/Sub subscription)."""
    return answered(session.get(f"{EVENTARC}/{trigger}", timeout=TIMEOUT))


def job_executions(session: requests.Session, job: str) -> list[dict[str, Any]]:
    """Every execution of the Cloud Run job `projects/P/locations/L/jobs/J`."""
    return every_page(
        lambda page: answered(
            session.get(f"{RUN}/{job}/executions", params={"pageSize": "100", **page}, timeout=TIMEOUT)
        ),
        "executions",
    )


def workflow_executions(session: requests.Session, workflow: str) -> list[dict[str, Any]]:
    """Every execution of the workflow `projects/P/locations/L/workflows/W`, with its labels
    (the FULL view; the BASIC one leaves them out)."""
    return every_page(
        lambda page: answered(
            session.get(
                f"{WORKFLOW_EXECUTIONS}/{workflow}/executions",
                params={"view": "FULL", "pageSize": "100", **page},
                timeout=TIMEOUT,
            )
        ),
        "executions",
    )


def build_trigger(session: requests.Session, trigger: str) -> dict[str, Any]:
    """A Cloud Build trigger by its full name `projects/P/locations/L/triggers/T`."""
    return answered(session.get(f"{CLOUD_BUILD}/{trigger}", timeout=TIMEOUT))


def finished(session: requests.Session, base: str, operation: dict[str, Any]) -> dict[str, Any]:
    """Poll a long-running operation of the API at `base` until it is done; fail with its error."""
    name = operation.get("name", "")
    if not operation.get("done"):
        operation = wait_for(
            lambda: answered(session.get(f"{base}/{name}", timeout=TIMEOUT)),
            lambda current: bool(current.get("done")),
            within=OPERATION_WITHIN,
            every=5,
        )
    assert operation.get("done"), f"operation {name} not done within {OPERATION_WITHIN} s"
    assert "error" not in operation, operation["error"]
    return operation


def create_project(session: requests.Session, project: str, parent: str, billing_account: str) -> None:
    """Create a project under `parent` (folders/ID or organizations/ID), link it to the billing
    account (billingAccounts/ID), and enable the two APIs the stacks need already on."""
    created = answered(
        session.post(
            f"{RESOURCE_MANAGER}/projects", json={"projectId": project, "parent": parent}, timeout=TIMEOUT
        )
    )
    finished(session, RESOURCE_MANAGER, created)
    answered(
        session.put(
            f"{BILLING}/projects/{project}/billingInfo",
            json={"billingAccountName": billing_account},
            timeout=TIMEOUT,
        )
    )
    enabled = answered(
        session.post(
            f"{SERVICE_USAGE}/projects/{project}/services:batchEnable",
            json={"serviceIds": list(PREREQUISITE_APIS)},
            timeout=TIMEOUT,
        )
    )
    finished(session, SERVICE_USAGE, enabled)


def delete_project(session: requests.Session, project: str) -> None:
    """Mark the project for deletion (Google deletes it for good 30 days later)."""
    finished(
        session,
        RESOURCE_MANAGER,
        answered(session.delete(f"{RESOURCE_MANAGER}/projects/{project}", timeout=TIMEOUT)),
    )
