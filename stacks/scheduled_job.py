"""One job's trigger: a Cloud Scheduler job that POSTs to the function with an OIDC token."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from constructs import Construct

from stacks import defaults, naming
from stacks.deduplicated_function import DeduplicatedFunction
from stacks.identity import job_service_account, member
from stacks.provider import (
    CloudRunV2ServiceIamMember,
    CloudSchedulerJob,
    CloudSchedulerJobHttpTarget,
    CloudSchedulerJobHttpTargetOidcToken,
    CloudSchedulerJobRetryConfig,
)
from stacks.required_apis import RequiredApis
from stacks.team import Job, Team

# runonce keys runs by these (with Scheduler's own headers): they say which project's and
# region's Scheduler sent the request, which the short X-CloudScheduler-JobName does not.
PROJECT_HEADER = "X-Runonce-Project"
LOCATION_HEADER = "X-Runonce-Location"


@dataclass(frozen=True)
class ScheduledJobProps:
    """The job and the function it calls."""

    team: Team
    """The job's team (project, region)."""
    job: Job
    """Schedule, time zone, attempt deadline, retry config, body, description."""
    function: DeduplicatedFunction
    """The function the job calls."""
    apis: RequiredApis
    """The stack's enabled APIs."""


def seconds(value: int) -> str:
    """A duration as the provider writes it ("180s")."""
    return f"{value}s"


class ScheduledJob(Construct):
    """The Scheduler job plus a dedicated invoker account allowed to call this function only.

    The invoker holds `roles/run.invoker` on the function's Cloud Run service (granted on the
    service named by the function, never rebuilt from the function's name). The job POSTs to
    the service's run.app URI with an OIDC token for that same audience, as the provider's
    "cloudfunctions2 scheduler auth" example does. It does not wait for the invoker grant to
    settle: a run fired while it propagates is refused (403) and retried like any failed attempt.
    """

    def __init__(self, scope: Construct, id: str, props: ScheduledJobProps) -> None:
        super().__init__(scope, id)
        team, job, function = props.team, props.job, props.function.function
        # The run.app URI, not function.url (cloudfunctions.net): with internal-only ingress,
        # Scheduler counts as internal only on the run.app URL, and Cloud Run accepts ID
        # tokens whose audience is that URL. Read as string attributes, one jsii round trip
        # each, instead of through the typed service_config block (three round trips).
        uri = function.get_string_attribute("service_config[0].uri")
        service = function.get_string_attribute("service_config[0].service")
        self.invoker_account = job_service_account(
            self, "invoker-account", team, job, "call", "scheduler invoker", props.apis
        )
        """The `google_service_account` whose OIDC token Scheduler sends."""
        invoker_email = self.invoker_account.email
        self.invoker_grant = CloudRunV2ServiceIamMember(
            self,
            "invoker",
            project=team.project,
            location=team.region,
            name=service,
            role=defaults.ROLE_INVOKER,
            member=member(invoker_email),
            depends_on=props.apis.of(defaults.API_RUN),
        )
        """roles/run.invoker on the function's Cloud Run service only."""
        retry = job.retry
        self.job = CloudSchedulerJob(
            self,
            "job",
            project=team.project,
            region=team.region,
            name=naming.scheduler_job_name(team.name, job.name),
            description=job.description or None,
            schedule=job.schedule,
            time_zone=job.time_zone,
            attempt_deadline=seconds(job.attempt_deadline_seconds),
            retry_config=CloudSchedulerJobRetryConfig(
                retry_count=retry.retry_count,
                max_retry_duration=seconds(retry.max_retry_duration_seconds),
                min_backoff_duration=seconds(retry.min_backoff_seconds),
                max_backoff_duration=seconds(retry.max_backoff_seconds),
                max_doublings=retry.max_doublings,
            ),
            http_target=CloudSchedulerJobHttpTarget(
                uri=uri,
                http_method="POST",
                headers={PROJECT_HEADER: team.project, LOCATION_HEADER: team.region},
                body=base64.b64encode(job.body.encode()).decode() if job.body else None,
                oidc_token=CloudSchedulerJobHttpTargetOidcToken(
                    service_account_email=invoker_email, audience=uri
                ),
            ),
            depends_on=[*props.apis.of(defaults.API_SCHEDULER), self.invoker_grant],
        )
        """The `google_cloud_scheduler_job`."""
