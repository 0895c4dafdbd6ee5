"""The sandbox team: every kind of job the kit deploys, in one team file's terms.

It is the example team (teams/example.py: its scheduled jobs and its `orders` push job, as
shipped) plus one job of each other kind, each with the settings a team gets when it writes
nothing more, so that a default the stacks get wrong shows in the sandbox:

- `pushed`: a push event job on functions/events_example (its message attributes make a body
  fail permanently, fail once, or kill its instance), all defaults;
- `stale`: the same code with a 30 s maximum event age and a first redelivery 60 s later, so a
  message that fails once arrives too old;
- `uploads` and `messages`: Eventarc jobs on a Cloud Storage bucket and on a topic, all defaults,
  on the CloudEvent function in tests/sandbox/functions/cloud_event_outbox;
- `run-job`: a Cloud Run job target; `workflow`: a Workflows target; `build`: a Cloud Build
  trigger target (only when a trigger is given: a trigger needs a connected repository, which a
  test cannot create);
- `svc-deployed-close` and `svc-existing-close`: service jobs (docs/stacks/services.md) on a Cloud
  Run service the stack deploys and on one that exists before the team's plan (the sandbox stack
  creates it), both from the image RUNONCE_SANDBOX_SERVICE_IMAGE names (only when it is given:
  the team builds its image, a test cannot), all defaults.

The bucket, the Cloud Run job and the workflow the jobs point at are created by the sandbox stack
itself (tests/sandbox/stack.py); their names are derived here so both agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from stacks.targets import BuildTrigger, CloudRunJob, Workflow
from stacks.team import (
    EVENTARC,
    FUNCTIONS_DIR,
    REPO_ROOT,
    TEAMS_DIR,
    EventJob,
    Job,
    PushRetry,
    Service,
    ServiceJob,
    Team,
    load_team_file,
)

SANDBOX = "sandbox"
"""The sandbox team's name (and so its stack's)."""
REPORT = "report"
ORDERS = "orders"
PUSHED = "pushed"
STALE = "stale"
UPLOADS = "uploads"
MESSAGES = "messages"
RUN_JOB = "run-job"
WORKFLOW = "workflow"
BUILD = "build"
STALE_MAX_EVENT_AGE_SECONDS = 30
STALE_FIRST_REDELIVERY_SECONDS = 60
EVENTS_SOURCE = "events_example"
EVENTS_OUTBOX = "event_example_outbox"
"""The outbox functions/events_example writes (its OUTBOX)."""
CLOUD_EVENT_FOLDER = REPO_ROOT / "tests" / "sandbox" / "functions" / "cloud_event_outbox"
# A job's source is a folder under functions/; the sandbox's CloudEvent function is a test
# fixture and lives with the tests, so it is named relative to functions/.
CLOUD_EVENT_SOURCE = os.path.relpath(CLOUD_EVENT_FOLDER, FUNCTIONS_DIR)
CLOUD_EVENT_OUTBOX = "cloud_event_outbox"
"""The outbox the CloudEvent function writes (its OUTBOX)."""
DEPLOYED_SERVICE = "svc-deployed"
EXISTING_SERVICE = "svc-existing"
DEPLOYED_SERVICE_JOB = "svc-deployed-close"
EXISTING_SERVICE_JOB = "svc-existing-close"
SERVICE_JOB_PATH = "/jobs/close"
"""The path of the service image's `@deduplicated` handler (RUNONCE_SANDBOX_SERVICE_IMAGE)."""
TARGET_JOB_IMAGE = "us-docker.pkg.dev/cloudrun/container/job:latest"
"""Google's sample job image (Cloud Run's "Create a Cloud Run job" Terraform sample)."""


@dataclass(frozen=True)
class SandboxPlace:
    """Where the sandbox deploys, and the names of what its stack creates besides the team's."""

    project: str
    region: str
    team: str = SANDBOX

    @property
    def upload_bucket(self) -> str:
        """The bucket whose object uploads trigger `uploads` (bucket names are global)."""
        return f"{self.project}-{self.team}-uploads"

    @property
    def target_job_id(self) -> str:
        """The Cloud Run job `run-job` starts."""
        return f"{self.team}-target-job"

    @property
    def target_job(self) -> str:
        """Its full name, as the target takes it."""
        return f"projects/{self.project}/locations/{self.region}/jobs/{self.target_job_id}"

    @property
    def workflow_id(self) -> str:
        """The workflow `workflow` starts."""
        return f"{self.team}-target-workflow"

    @property
    def workflow(self) -> str:
        """Its full name, as the target takes it."""
        return f"projects/{self.project}/locations/{self.region}/workflows/{self.workflow_id}"


def build_trigger_target(trigger: str, service_account: str) -> BuildTrigger:
    """The trigger as a target, with `service_account` (the trigger's own account, an email, or ""
    for none), which the stack needs to let the proxy act as it."""
    return BuildTrigger(trigger=trigger, service_account=service_account)


def sandbox_team(
    place: SandboxPlace, build_trigger: str = "", trigger_account: str = "", service_image: str = ""
) -> Team:
    """The sandbox team in `place`, deletable (no delete protection, force_destroy), with the
    build trigger job only when `build_trigger` names one, and the service jobs only when
    `service_image` names an image."""
    example = load_team_file(TEAMS_DIR / "example.py")
    jobs = [
        *example.jobs,
        Job(name=RUN_JOB, schedule="0 3 * * *", target=CloudRunJob(job=place.target_job)),
        Job(name=WORKFLOW, schedule="0 5 * * *", target=Workflow(workflow=place.workflow)),
    ]
    if build_trigger:
        jobs.append(
            Job(name=BUILD, schedule="0 4 * * *", target=build_trigger_target(build_trigger, trigger_account))
        )
    event_jobs = [
        *example.event_jobs,
        EventJob(name=PUSHED, source=EVENTS_SOURCE),
        EventJob(
            name=STALE,
            source=EVENTS_SOURCE,
            max_event_age_seconds=STALE_MAX_EVENT_AGE_SECONDS,
            retry=PushRetry(min_backoff_seconds=STALE_FIRST_REDELIVERY_SECONDS),
        ),
        EventJob(name=UPLOADS, source=CLOUD_EVENT_SOURCE, trigger=EVENTARC, bucket=place.upload_bucket),
        EventJob(name=MESSAGES, source=CLOUD_EVENT_SOURCE, trigger=EVENTARC),
    ]
    services, service_jobs = [], []
    if service_image:
        # The existing service's timeout is the sandbox stack's (Cloud Run's default, 300 s).
        services = [Service(name=DEPLOYED_SERVICE, image=service_image), Service(name=EXISTING_SERVICE)]
        service_jobs = [
            ServiceJob(
                name=DEPLOYED_SERVICE_JOB,
                schedule="0 6 * * *",
                service=DEPLOYED_SERVICE,
                path=SERVICE_JOB_PATH,
            ),
            ServiceJob(
                name=EXISTING_SERVICE_JOB,
                schedule="0 6 * * *",
                service=EXISTING_SERVICE,
                path=SERVICE_JOB_PATH,
            ),
        ]
    return replace(
        example,
        name=place.team,
        services=services,
        service_jobs=service_jobs,
        project=place.project,
        region=place.region,
        jobs=jobs,
        event_jobs=event_jobs,
        delete_protection=False,
        force_destroy=True,
    )
