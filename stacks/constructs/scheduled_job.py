"""One job's trigger: a Cloud Scheduler job that POSTs to its function with an OIDC token."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from constructs import Construct

from runonce.contract import Overlap
from runonce.scheduler.exclusion import JobCalendar
from stacks import naming
from stacks.config import defaults
from stacks.config.headers import job_headers
from stacks.config.team import Job, Retry, Team
from stacks.constructs.identity import CREATE_BEFORE_DESTROY, member
from stacks.constructs.provider import (
    CloudRunV2ServiceIamMember,
    CloudSchedulerJob,
    CloudSchedulerJobAppEngineHttpTarget,
    CloudSchedulerJobAppEngineHttpTargetAppEngineRouting,
    CloudSchedulerJobHttpTarget,
    CloudSchedulerJobHttpTargetOidcToken,
    CloudSchedulerJobRetryConfig,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.toolchain import ITerraformDependable


class Invoked(Protocol):
    """What a Scheduler job and its invoker grant need of the function or service they call
    (`DeduplicatedFunction` and `RunService` are ones)."""

    @property
    def uri(self) -> str:
        """The function's run.app URI, which the Scheduler job calls and its OIDC token is for."""

    @property
    def service(self) -> str:
        """The function's Cloud Run service name, which the invoker grant is on."""


class AppEngineRoute(Protocol):
    """Where an App Engine target's request goes (`AppEngineJob` is one)."""

    @property
    def relative_uri(self) -> str:
        """The handler's path, starting with "/"."""

    @property
    def service(self) -> str:
        """The App Engine service."""

    @property
    def version(self) -> str:
        """The version; "" for the one serving the service's traffic."""


@dataclass(frozen=True)
class ScheduledJobProps:
    """One Scheduler job's settings, and the invoker account it signs as."""

    project: str
    """Project id of the Scheduler job (and of the function's service)."""
    region: str
    """Region of the Scheduler job (and of the function's service): the team's, or for an App
    Engine job the application's (`Team.scheduler_region`). Its run keys hash it."""
    name: str
    """The Scheduler job's name (`naming.scheduler_job_name`)."""
    schedule: str
    """unix-cron expression (`Job.schedule`)."""
    time_zone: str
    """IANA time zone the schedule is evaluated in."""
    attempt_deadline_seconds: int
    """How long Scheduler waits for one attempt."""
    retry: Retry
    """Scheduler's retry_config."""
    invoker_email: str
    """The team's invoker account (its email)."""
    apis: RequiredApis
    """The stack's enabled APIs."""
    description: str = ""
    """Shown on the Scheduler job; "" sets none."""
    body: str = ""
    """Request body (sent base64-encoded, as the provider takes it); "" sends none."""
    overlap: Overlap = Overlap.ALLOW
    """The job's overlap policy (`Job.overlap`), sent as OVERLAP_HEADER unless it is `allow`."""
    calendar: JobCalendar | None = None
    """The job's calendar (`Job.calendar`), sent as CALENDAR_HEADER when it has one."""

    @classmethod
    def of(cls, team: Team, job: Job, invoker_email: str, apis: RequiredApis) -> ScheduledJobProps:
        """The props of one job of the team."""
        return cls(
            project=team.project,
            region=team.scheduler_region(job.name),
            name=naming.scheduler_job_name(team.name, job.name),
            schedule=job.schedule,
            time_zone=job.time_zone,
            attempt_deadline_seconds=job.attempt_deadline_seconds,
            retry=job.retry,
            invoker_email=invoker_email,
            apis=apis,
            description=job.description,
            body=job.body,
            overlap=job.overlap,
            calendar=job.calendar,
        )


def seconds(value: int) -> str:
    """A duration as the provider writes it ("180s")."""
    return f"{value}s"


def grant_run_invoker(
    scope: Construct, project: str, region: str, function: Invoked, invoker_email: str, apis: RequiredApis
) -> CloudRunV2ServiceIamMember:
    """roles/run.invoker for `invoker_email` on this function's Cloud Run service only (the
    service the function names, never rebuilt from its name), with create_before_destroy."""
    return CloudRunV2ServiceIamMember(
        scope,
        "invoker",
        project=project,
        location=region,
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

    def grant_invoker(self, function: Invoked) -> CloudRunV2ServiceIamMember:
        """roles/run.invoker for the team's invoker on this function's service only."""
        props = self.props
        self.invoker_grant = grant_run_invoker(
            self, props.project, props.region, function, props.invoker_email, props.apis
        )
        return self.invoker_grant

    def schedule(
        self, function: Invoked, after: Sequence[ITerraformDependable], path: str = ""
    ) -> CloudSchedulerJob:
        """The Scheduler job calling `function` (at `path` of a service), created `after` its
        invoker grant has settled. The OIDC audience is set to the run.app URL without the path:
        Cloud Run accepts a token whose audience is the service's run.app URL (its "custom
        audiences" page), and Scheduler's default audience would be the whole URI, path included."""
        job = self.props
        return self._job(
            after,
            http_target=CloudSchedulerJobHttpTarget(
                uri=f"{function.uri}{path}" if path else function.uri,
                http_method="POST",
                # runonce keys runs by these (with Scheduler's own headers): they say which project's and
                # region's Scheduler sent the request, which the short X-CloudScheduler-JobName does not.
                headers=self.headers,
                body=self.body,
                oidc_token=CloudSchedulerJobHttpTargetOidcToken(
                    service_account_email=job.invoker_email, audience=function.uri
                ),
            ),
        )

    def schedule_app_engine(
        self, route: AppEngineRoute, after: Sequence[ITerraformDependable]
    ) -> CloudSchedulerJob:
        """The Scheduler job calling an App Engine handler through an App Engine HTTP target, with
        the same project/location headers (`AppEngineHttpTarget.headers`); an App Engine target
        carries no OIDC token."""
        return self._job(
            after,
            app_engine_http_target=CloudSchedulerJobAppEngineHttpTarget(
                relative_uri=route.relative_uri,
                http_method="POST",
                headers=self.headers,
                body=self.body,
                app_engine_routing=CloudSchedulerJobAppEngineHttpTargetAppEngineRouting(
                    service=route.service, version=route.version or None
                ),
            ),
        )

    @property
    def headers(self) -> dict[str, str]:
        """The headers runonce keys a run by, beside Scheduler's own, the job's overlap policy
        unless it is `allow`, and its calendar if any (`stacks.config.headers`)."""
        return job_headers(self.props.project, self.props.region, self.props.overlap, self.props.calendar)

    @property
    def body(self) -> str | None:
        """The request body, base64-encoded as the provider takes it; None for none."""
        body = self.props.body
        return base64.b64encode(body.encode()).decode() if body else None

    def _job(self, after: Sequence[ITerraformDependable], **target: Any) -> CloudSchedulerJob:
        job, retry = self.props, self.props.retry
        self.job = CloudSchedulerJob(
            self,
            "job",
            project=job.project,
            region=job.region,
            name=job.name,
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
            depends_on=[*self.props.apis.of(defaults.API_SCHEDULER), *after],
            **target,
        )
        return self.job
