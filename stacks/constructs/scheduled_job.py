"""One job's trigger: a Cloud Scheduler job that POSTs to its function with an OIDC token."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from cdktf import ITerraformDependable
from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.config.team import Job, Team
from stacks.constructs.deduplicated_function import DeduplicatedFunction
from stacks.constructs.identity import CREATE_BEFORE_DESTROY, member
from stacks.constructs.provider import (
    CloudRunV2ServiceIamMember,
    CloudSchedulerJob,
    CloudSchedulerJobHttpTarget,
    CloudSchedulerJobHttpTargetOidcToken,
    CloudSchedulerJobRetryConfig,
)
from stacks.constructs.required_apis import RequiredApis

# runonce keys runs by these (with Scheduler's own headers): they say which project's and
# region's Scheduler sent the request, which the short X-CloudScheduler-JobName does not.
PROJECT_HEADER = "X-Runonce-Project"
LOCATION_HEADER = "X-Runonce-Location"


@dataclass(frozen=True)
class ScheduledJobProps:
    """The job, and the team's invoker account its Scheduler job signs as."""

    team: Team
    """The job's team (project, region)."""
    job: Job
    """Schedule, time zone, attempt deadline, retry config, body, description."""
    invoker_email: str
    """The team's invoker account (its email)."""
    apis: RequiredApis
    """The stack's enabled APIs."""


def seconds(value: int) -> str:
    """A duration as the provider writes it ("180s")."""
    return f"{value}s"


def grant_run_invoker(
    scope: Construct, team: Team, function: DeduplicatedFunction, invoker_email: str, apis: RequiredApis
) -> CloudRunV2ServiceIamMember:
    """roles/run.invoker for `invoker_email` on this function's Cloud Run service only (the
    service the function names, never rebuilt from its name), with create_before_destroy."""
    return CloudRunV2ServiceIamMember(
        scope,
        "invoker",
        project=team.project,
        location=team.region,
        name=function.service,
        role=defaults.ROLE_INVOKER,
        member=member(invoker_email),
        depends_on=apis.of(defaults.API_RUN),
        lifecycle=CREATE_BEFORE_DESTROY,
    )


class ScheduledJob(Construct):
    """A job's Scheduler job, built in two steps by `TeamStack`.

    1. `grant_invoker`, on the construct of each function's first job only: the team's invoker
       account gets `roles/run.invoker` on that function's Cloud Run service (the service named
       by the function, never rebuilt from its name), with create_before_destroy. The grant sits
       where a job's own invoker grant sat before functions were shared (`<job>-schedule/invoker`),
       so on a deployed team the change of invoker is a replacement of that grant: the new one is
       created, the Scheduler job is repointed, and only then the old one is removed.
    2. `schedule`, on every job, once every invoker grant has settled: the Scheduler job POSTs to
       its function's run.app URI with an OIDC token for that same audience, signed as the
       invoker, as the provider's "cloudfunctions2 scheduler auth" example does.
    """

    def __init__(self, scope: Construct, id: str, props: ScheduledJobProps) -> None:
        super().__init__(scope, id)
        self.props = props
        self.invoker_grant: CloudRunV2ServiceIamMember | None = None
        """roles/run.invoker on the function's service, on the construct of the function's first
        job (None on the others: one grant per function, never two for one binding)."""
        self.job: CloudSchedulerJob | None = None
        """The `google_cloud_scheduler_job`, once `schedule` ran."""

    def grant_invoker(self, function: DeduplicatedFunction) -> CloudRunV2ServiceIamMember:
        """roles/run.invoker for the team's invoker on this function's service only."""
        self.invoker_grant = grant_run_invoker(
            self, self.props.team, function, self.props.invoker_email, self.props.apis
        )
        return self.invoker_grant

    def schedule(
        self, function: DeduplicatedFunction, after: Sequence[ITerraformDependable]
    ) -> CloudSchedulerJob:
        """The Scheduler job calling `function`, created `after` its invoker grant has settled."""
        team, job, retry = self.props.team, self.props.job, self.props.job.retry
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
                uri=function.uri,
                http_method="POST",
                headers={PROJECT_HEADER: team.project, LOCATION_HEADER: team.region},
                body=base64.b64encode(job.body.encode()).decode() if job.body else None,
                oidc_token=CloudSchedulerJobHttpTargetOidcToken(
                    service_account_email=self.props.invoker_email, audience=function.uri
                ),
            ),
            depends_on=[*self.props.apis.of(defaults.API_SCHEDULER), *after],
        )
        return self.job
