"""The typed team config: one team file in `teams/` builds one `Team`.

This module is plain data on purpose: it imports nothing from cdktf, so the local scheduler
(`localscheduler/`) reads exactly the same jobs the stacks deploy without loading Terraform
bindings. Every field documents its default; the defaults are the secure, working choice.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runonce.contract import DEFAULT_COLLECTION, Overlap
from runonce.scheduler.exclusion import JobCalendar
from stacks.config.state import GcsState
from stacks.config.store import Firestore, Valkey
from stacks.config.targets import Target
from stacks.config.ticks import campaign_last_run
from stacks.locations import app_engine_scheduler_region

REPO_ROOT = Path(__file__).resolve().parents[2]
TEAMS_DIR = REPO_ROOT / "teams"
FUNCTIONS_DIR = REPO_ROOT / "functions"

# Added to the function timeout to give the lease: a live attempt never loses its claim.
LEASE_MARGIN_SECONDS = 60
# The idempotent proxy shipped with runonce, which a job with a `target` runs (functions/proxy).
PROXY_SOURCE = "proxy"
# The most runs a campaign may have: synth counts them one by one (about 10 us each, cronsim).
MAX_RUNS = 100_000


@dataclass(frozen=True)
class Window:
    """The dates a job is active, both included, in the job's time zone (docs/stacks/schedules.md,
    "Calendars"): its scheduled runs before `start` or after `end` are recorded `excluded`, not run.
    Either may be left open (None). A campaign gives `runs` instead of `end`: the window ends with
    its Nth run from `start`."""

    start: date | None = None
    """The first date a scheduled run runs; None: no first date."""
    end: date | None = None
    """The last date a scheduled run runs; None: no last date. The stack refuses one already past."""
    runs: int | None = None
    """How many scheduled runs the job has from `start` (a campaign): the window ends after the
    Nth tick of the schedule on or after `start` that the calendar lets run (ticks on excluded
    dates do not count), computed at synth; None: the window ends with `end`. Needs `start`, not
    `end`; the stack refuses a campaign whose last run is already past."""


@dataclass(frozen=True)
class Calendar:
    """Dates a job's scheduled runs do not run (holidays), in the job's time zone: a run on one is
    recorded `excluded`, not run (docs/schedules/calendars.md)."""

    dates: list[date] = field(default_factory=list)
    """The excluded dates."""


def job_calendar(
    time_zone: str, active: Window | None, exclude: Calendar | None, schedule: str
) -> JobCalendar | None:
    """The calendar the stack sends a job's handler (its X-Runonce-Calendar header), or None
    when the job sets neither `active` nor `exclude`. A campaign's (`Window.runs`) last run is
    computed from `schedule`; None when it cannot be (synth refuses that job: `stacks.validate`)."""
    if active is None and exclude is None:
        return None
    calendar = JobCalendar(
        time_zone=time_zone,
        start=active.start if active else None,
        end=active.end if active else None,
        excluded=frozenset(exclude.dates if exclude else ()),
    )
    runs = active.runs if active else None
    if not isinstance(runs, int) or isinstance(runs, bool) or not _readable(calendar):
        return calendar
    return replace(calendar, last_run=campaign_last_run(schedule, calendar, min(runs, MAX_RUNS)))


def _readable(calendar: JobCalendar) -> bool:
    """Whether every date and the time zone are what they must be (else validation reports them)."""
    try:
        ZoneInfo(calendar.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    days = [calendar.start, calendar.end, *calendar.excluded]
    return all(day is None or (isinstance(day, date) and not isinstance(day, datetime)) for day in days)


@dataclass(frozen=True)
class Retry:
    """Cloud Scheduler's retry_config for one job (ranges are Scheduler's own).

    Retries are safe with runonce (a retry of a finished run is answered 200 without running),
    so the default retries a failed or lost delivery up to five times instead of Scheduler's zero.
    """

    retry_count: int = 5
    """How many times a failed attempt is retried, 0-5. Scheduler's own default is 0."""
    max_retry_duration_seconds: int = 0
    """Stop retrying after this long; 0 means no limit (retries still stop at the next run)."""
    min_backoff_seconds: int = 20
    """Wait before the first retry, 0-3600."""
    max_backoff_seconds: int = 600
    """Longest wait between retries, 0-3600, at least min_backoff_seconds."""
    max_doublings: int = 4
    """How often the backoff doubles before growing linearly, 0-16. With the defaults the
    retries come 20, 60, 140, 300 and 620 s after the first attempt: the last one after the
    default lease (360 s), so a run whose instance crashed is taken over within its window."""

    def backoff_seconds(self, retry: int) -> int:
        """Scheduler's wait before retry number `retry` (1-based): min_backoff, doubled
        max_doublings times, then growing linearly by the last doubled step, at most max_backoff."""
        doubled = self.min_backoff_seconds * 2 ** min(retry - 1, self.max_doublings)
        return min(self.max_backoff_seconds, doubled * (1 + max(0, retry - 1 - self.max_doublings)))

    def exhausted(self, retries_done: int, elapsed_seconds: float) -> bool:
        """Scheduler stops once both retry_count and max_retry_duration (0: none) are used up."""
        count_left = retries_done < self.retry_count
        duration_left = (
            self.max_retry_duration_seconds > 0 and elapsed_seconds < self.max_retry_duration_seconds
        )
        return not (count_left or duration_left)

    def offsets_seconds(self, next_run_seconds: float) -> list[int]:
        """When the retries come, in seconds after the first attempt, if every attempt fails at
        once; none at or after the next scheduled run, `next_run_seconds` after the first."""
        offsets: list[int] = []
        at = 0
        while True:
            at += self.backoff_seconds(len(offsets) + 1)
            if self.exhausted(len(offsets), at) or at >= next_run_seconds:
                return offsets
            offsets.append(at)


@dataclass(frozen=True)
class Job:
    """One scheduled job: a Cloud Scheduler job that calls one deduplicated function, either the
    team's own code (`source`) or the idempotent proxy starting a Google API `target`."""

    name: str
    """Job id, also the function and Scheduler job name: lowercase letters, digits and
    hyphens, starting with a letter, at most 40 characters (it prefixes resource names)."""
    schedule: str
    """unix-cron expression, e.g. "0 3 * * *". App Engine style ("every 5 minutes") is rejected:
    Scheduler sends no X-CloudScheduler-ScheduleTime header for it, so runs cannot be told apart."""
    source: str = ""
    """Folder under functions/ with main.py and requirements.txt; runonce is added to it. Give
    either this or `target`."""
    entry_point: str = "handle"
    """Name of the decorated function in the folder's main.py."""
    time_zone: str = "Etc/UTC"
    """IANA time zone the schedule is evaluated in."""
    description: str = ""
    """Shown on the Scheduler job."""
    timeout_seconds: int = 300
    """Function timeout, 1-3600 (the HTTP maximum). The lease is this plus a margin."""
    memory: str = "256Mi"
    """Function memory, Cloud Run notation (128Mi, 256Mi, 512Mi, 1Gi, ...)."""
    attempt_deadline_seconds: int = 180
    """How long Scheduler waits for one attempt, 15-1800. At most timeout_seconds: a longer
    deadline waits for an answer the function can no longer give."""
    retry: Retry = field(default_factory=Retry)
    """Scheduler retry config."""
    retention_seconds: int = 7 * 24 * 3600
    """How long a run's record is kept (Firestore TTL on expire_at). It must outlast the retry
    window, or a late duplicate would find no record and run again."""
    body: str = ""
    """Request body Scheduler sends to the function."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for the function. RUNONCE_* are set by the stack from this
    config; only RUNONCE_LEASE_SECONDS may be given here, to lengthen the lease."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the job's resources, merged over the team's."""
    min_instances: int = 0
    """Instances kept warm."""
    max_instances: int = 3
    """Upper bound on instances; duplicates are safe, so a small number suffices."""
    next_run_catches_up: bool = False
    """True accepts that a run whose instance crashed mid-run may never be retried, because the
    next scheduled run redoes its work (a sync, a sweep). Needed when the lease (timeout + 60 s)
    cannot expire before the last retry, e.g. a job scheduled more often than its lease."""
    runtime: str = "python312"
    """Cloud Run functions runtime the source is built with."""
    retries_may_skip_next_run: bool = False
    """True accepts that this run's retries may still be going at the next scheduled time, where
    Scheduler may skip that next run (Google's "Retry jobs" page) or stop the retries (its API
    reference). False (the default) requires the last retry to end before the next run."""
    target: Target | None = None
    """A Google API to start once per run instead of the team's own code (`stacks.targets`:
    Workflow, CloudRunJob, BuildTrigger, GoogleApi): the stack deploys the idempotent proxy
    shipped with runonce (functions/proxy) with RUNONCE_TARGET set, and its account gets only the
    target's role (docs/targets.md). Give either this or `source`."""
    overlap: Overlap = Overlap.ALLOW
    """What a run does while another run of this job is in progress under a live lease: `allow` runs
    it too, `skip` records it skipped (never run later unless an operator asks), `wait` answers it 409
    so Scheduler retries it until the run before it ends (docs/schedules/overlap.md)."""
    catch_up_seconds: int = 0
    """How far back the watchdog starts a missed run itself, once, through Scheduler (0: it only
    reports missed runs). A run missed longer ago than this is reported only (docs/schedules/overlap.md)."""
    pause_after_failures: int = 0
    """After this many consecutive runs end failed (a permanent failure, or retried out), the
    watchdog pauses the Scheduler job once, until `runonce resume` (docs/schedules/pause.md); 0 (the
    default) never pauses it. Needs the team's watchdog."""
    active: Window | None = None
    """The dates the job's scheduled runs run (a `Window`, in `time_zone`); None: always. Runs
    outside it are answered and recorded `excluded`, never run, never reported missed, never
    backfilled (docs/schedules/calendars.md)."""
    exclude: Calendar | None = None
    """Dates the job's scheduled runs do not run (a `Calendar`, in `time_zone`), as for `active`."""

    @property
    def calendar(self) -> JobCalendar | None:
        """The calendar its handler is sent, or None (`job_calendar`)."""
        return job_calendar(self.time_zone, self.active, self.exclude, self.schedule)

    @property
    def lease_seconds(self) -> int:
        """Lease on a claimed run: the function timeout plus a margin, so a live attempt keeps it."""
        return self.timeout_seconds + LEASE_MARGIN_SECONDS

    @property
    def code_source(self) -> str:
        """The folder under functions/ that is deployed: `source`, or the proxy for a target."""
        return PROXY_SOURCE if self.target is not None else self.source

    @property
    def source_dir(self) -> Path:
        """Absolute path of the job's function folder (the proxy's for a target)."""
        return FUNCTIONS_DIR / self.code_source


@dataclass(frozen=True)
class PushRetry:
    """A Pub/Sub subscription's retry_policy: exponential backoff between redeliveries after a
    nack (Pub/Sub's bounds: 0-600 s each)."""

    min_backoff_seconds: int = 10
    """Wait before the first redelivery, 0-600 (Pub/Sub's own default is 10 s)."""
    max_backoff_seconds: int = 600
    """Longest wait between redeliveries, 0-600, at least min_backoff_seconds."""

    def attempt_offsets_seconds(self, attempts: int) -> list[int]:
        """When each delivery attempt comes, in seconds after the first, if every attempt fails at
        once (an instance that died answers 5xx, a held claim 409). Conservative: Pub/Sub's
        backoff grows exponentially from the minimum, but the growth is not documented and is
        "best effort" (RetryPolicy reference), so each wait is taken as the minimum alone."""
        return [attempt * self.min_backoff_seconds for attempt in range(attempts)]


# Pub/Sub keeps an unacknowledged message at most this long (message_retention_duration).
MAX_RETRY_WINDOW_SECONDS = 7 * 24 * 3600
# Eventarc keeps an undelivered event 24 hours (its "Retry events" page) and redelivers at most
# 600 s apart; an Eventarc job's maximum event age leaves six such gaps before that, so a
# redelivery older than the age still comes, and runonce dead-letters the event before Eventarc
# drops it.
EVENTARC_RETENTION_SECONDS = 24 * 3600
EVENTARC_MAX_EVENT_AGE_SECONDS = EVENTARC_RETENTION_SECONDS - 3600
PUSH = "push"
"""`EventJob.trigger`: a Pub/Sub push subscription the stack configures fully (the default)."""
EVENTARC = "eventarc"
"""`EventJob.trigger`: a gen2 Eventarc trigger (CloudEvents); see docs/stacks.md for its limits."""


@dataclass(frozen=True)
class EventJob:
    """One event job: a Pub/Sub push subscription delivering a topic's messages to a function
    whose entry point is `@deduplicated_event` (docs/stacks.md, "Event jobs"). The stack creates
    the push subscription, a dead-letter topic with a pull subscription that keeps dead letters
    7 days, and the topic itself unless `topic` names an existing one."""

    name: str
    """Job id, also the function name: the rules of `Job.name`."""
    source: str
    """Folder under functions/ with main.py (a `@deduplicated_event` handler under
    `@functions_framework.http`) and requirements.txt listing google-cloud-pubsub."""
    entry_point: str = "handle"
    """Name of the decorated function in the folder's main.py."""
    topic: str = ""
    """An existing topic of the team's project, by its id; "" (default): the stack creates
    the topic `<team>-<job>`."""
    description: str = ""
    """Shown on the function."""
    timeout_seconds: int = 300
    """Function timeout, 10-600: the push subscription's ack deadline is this timeout, and a push
    ack deadline is at most 600 s. The lease is this plus a margin."""
    memory: str = "256Mi"
    """Function memory, Cloud Run notation."""
    retry: PushRetry = field(default_factory=PushRetry)
    """Backoff between redeliveries of a nacked message."""
    retry_window_seconds: int = MAX_RETRY_WINDOW_SECONDS
    """How long Pub/Sub keeps redelivering an unacknowledged message (the subscription's
    message_retention_duration), 600 s to 7 days."""
    max_delivery_attempts: int = 40
    """Deliveries before Pub/Sub moves a message to the dead-letter topic itself, 5-100. They must
    reach past the lease even if every redelivery comes only `retry.min_backoff_seconds` after
    the last (`PushRetry.attempt_offsets_seconds`): with the defaults the 40th comes 390 s after
    the first, after the default 360 s lease, so a crashed attempt's event is taken over."""
    max_event_age_seconds: int = 23 * 3600
    """An event older than this (from its publish time) is not run but dead-lettered by runonce:
    the end condition Google recommends for retried events. At most retry_window_seconds; for
    an Eventarc job at most 23 hours, an hour under the 24 hours Eventarc keeps an undelivered
    event (`EVENTARC_MAX_EVENT_AGE_SECONDS`)."""
    retention_seconds: int = 8 * 24 * 3600
    """How long an event's record is kept; longer than retry_window_seconds, or a late
    redelivery would find no record and run again."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables (RUNONCE_* are set by the stack, as for `Job.env`)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on the job's resources, merged over the team's."""
    min_instances: int = 0
    """Instances kept warm."""
    max_instances: int = 3
    """Upper bound on instances."""
    runtime: str = "python312"
    """Cloud Run functions runtime the source is built with."""
    trigger: str = PUSH
    """How events arrive: "push" (default), a push subscription with the retry policy, retry
    window, delivery attempts and dead-letter policy above; or "eventarc", the function's own
    Eventarc trigger with RETRY_POLICY_RETRY, for a handler under @functions_framework.cloud_event
    (retry, retry_window_seconds and max_delivery_attempts do not apply: Eventarc's retries cannot
    be configured, and it has no dead-letter topic; runonce's own dead letters still go to the
    stack's dead-letter topic)."""
    bucket: str = ""
    """Eventarc only: a Cloud Storage bucket of the team's project whose object finalize events
    trigger the job; "" (default) triggers on the messages of `topic` instead."""
    bucket_location: str = ""
    """Eventarc bucket jobs only: the bucket's location as Cloud Storage names it, a region
    (`europe-west1`), a dual-region (`eur4`) or a multi-region (`eu`), in lower case; the trigger
    must be in that location. "" (default): the team's region."""

    @property
    def ack_deadline_seconds(self) -> int:
        """The push subscription's ack deadline: the function timeout, so Pub/Sub does not
        redeliver while an attempt may still run (a redelivery then would be answered 409)."""
        return self.timeout_seconds

    @property
    def lease_seconds(self) -> int:
        """Lease on a claimed event: the timeout plus a margin, longer than the ack deadline."""
        return self.timeout_seconds + LEASE_MARGIN_SECONDS

    @property
    def source_dir(self) -> Path:
        """Absolute path of the job's function folder."""
        return FUNCTIONS_DIR / self.source

    def function_job(self, environment: dict[str, str]) -> Job:
        """The `Job` its function is built from (a function's settings, `stacks.config.sharing`), with
        the event variables in `environment` added to its env. Not a scheduled job: it is never
        in `Team.jobs`, so no Scheduler job is made for it."""
        return Job(
            name=self.name,
            schedule="",
            source=self.source,
            entry_point=self.entry_point,
            description=self.description,
            timeout_seconds=self.timeout_seconds,
            memory=self.memory,
            retention_seconds=self.retention_seconds,
            env={**self.env, **environment},
            labels=self.labels,
            min_instances=self.min_instances,
            max_instances=self.max_instances,
            runtime=self.runtime,
        )


# Cloud Run's longest request timeout for a service (60 minutes): the Scheduler attempt deadline
# (at most 30 minutes) and the lease derive from it.
MAX_SERVICE_TIMEOUT_SECONDS = 3600
# App Engine standard's request timeout by scaling type ("How instances are managed"): automatic
# scaling ends an HTTP request after 10 minutes, basic and manual scaling after 24 hours.
APP_ENGINE_REQUEST_TIMEOUT_SECONDS = {"automatic": 600, "basic": 24 * 3600, "manual": 24 * 3600}


@dataclass(frozen=True)
class Service:
    """A Cloud Run service that `ServiceJob`s call (docs/stacks/services.md). With an `image`, the
    stack deploys it: internal ingress, its own runtime account that may use only the ledger, the
    RUNONCE_* variables set. Without one, it is an existing service of the team's project and
    region that the stack only reads (a plan stops if it does not exist) and whose runtime
    account it grants the ledger; the team sets the RUNONCE_* variables on it."""

    name: str
    """The Cloud Run service's name (short, as `gcloud run services list` shows it): lowercase
    letters, digits and hyphens, starting with a letter, at most 40 characters."""
    image: str = ""
    """The container image the stack deploys, e.g.
    "europe-west1-docker.pkg.dev/acme-prod/jobs/closer:1.4.2" (a tag or an @sha256 digest), built
    and pushed by the team. "" (default): the service exists already and is not deployed here."""
    timeout_seconds: int = 300
    """The service's request timeout, 1-3600. Deployed: set on the service. Existing: the timeout
    the service has (a plan stops if it differs). The lease is this plus a margin."""
    concurrency: int = 80
    """Deployed only: requests one instance serves at once (max_instance_request_concurrency), 1-1000."""
    min_instances: int = 0
    """Deployed only: instances kept warm."""
    max_instances: int = 3
    """Deployed only: upper bound on instances; duplicates are safe, so a small number suffices."""
    memory: str = "512Mi"
    """Deployed only: memory of one instance, Cloud Run notation."""
    cpu: str = "1"
    """Deployed only: vCPUs of one instance, "1", "2", "4", "6" or "8", or millicores below one
    ("80m" to "999m", which needs concurrency=1); memory must fit Cloud Run's table for it
    (docs/stacks/services.md)."""
    env: dict[str, str] = field(default_factory=dict)
    """Deployed only: extra environment variables (RUNONCE_* are set by the stack, as for `Job.env`)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Deployed only: labels on the service, merged over the team's."""

    @property
    def deployed(self) -> bool:
        """Whether the stack deploys this service (it has an image) or only reads it."""
        return bool(self.image)

    @property
    def below_one_vcpu(self) -> bool:
        """Whether `cpu` is millicores, below one vCPU (Cloud Run then needs concurrency 1,
        request-based billing and the first generation execution environment)."""
        return self.cpu.endswith("m")

    @property
    def lease_seconds(self) -> int:
        """Lease on a claimed run: the request timeout plus a margin, so a live attempt keeps it."""
        return self.timeout_seconds + LEASE_MARGIN_SECONDS


@dataclass(frozen=True)
class ServiceJob:
    """One scheduled job on a Cloud Run service: a Scheduler HTTP job that POSTs to `path` of the
    service named by `service` (one of `Team.services`) with an OIDC token, whose handler is
    `@deduplicated` (docs/stacks/services.md). Several jobs may call one service on different paths."""

    name: str
    """Job id, also the Scheduler job's name: the rules of `Job.name`."""
    schedule: str
    """unix-cron expression, as for `Job.schedule`."""
    service: str
    """The name of one of `Team.services`: the service this job calls."""
    path: str = "/"
    """The path of the service the job POSTs to, starting with "/" (e.g. "/jobs/close")."""
    time_zone: str = "Etc/UTC"
    """IANA time zone the schedule is evaluated in."""
    description: str = ""
    """Shown on the Scheduler job."""
    attempt_deadline_seconds: int = 180
    """How long Scheduler waits for one attempt, 15-1800, at most the service's timeout_seconds."""
    retry: Retry = field(default_factory=Retry)
    """Scheduler retry config."""
    retention_seconds: int = 7 * 24 * 3600
    """How long a run's record is kept; it must outlast the retry window (as for `Job`)."""
    body: str = ""
    """Request body Scheduler sends."""
    next_run_catches_up: bool = False
    """As for `Job.next_run_catches_up`."""
    retries_may_skip_next_run: bool = False
    """As for `Job.retries_may_skip_next_run`."""
    overlap: Overlap = Overlap.ALLOW
    """As for `Job.overlap`."""
    catch_up_seconds: int = 0
    """As for `Job.catch_up_seconds`."""
    pause_after_failures: int = 0
    """As for `Job.pause_after_failures`."""
    active: Window | None = None
    """As for `Job.active`."""
    exclude: Calendar | None = None
    """As for `Job.exclude`."""

    def scheduled(self, timeout_seconds: int) -> Job:
        """The `Job` its Scheduler settings are checked and watched as (`stacks.validate.windows`,
        the watchdog), with the request timeout `timeout_seconds` of the service it calls. Not
        deployed as a function: it is never in `Team.jobs`."""
        return _scheduler_view(self, timeout_seconds)


@dataclass(frozen=True)
class AppEngineJob:
    """One scheduled job on an App Engine application that exists already (the stack never creates
    one: one per project, its region fixed for good): a Scheduler job with an App Engine HTTP
    target POSTing to `relative_uri` of `service` (and `version`), whose handler is
    `@deduplicated` (docs/stacks/services.md). The stack checks at plan time that the application
    exists and grants its runtime account the ledger."""

    name: str
    """Job id, also the Scheduler job's name: the rules of `Job.name`."""
    schedule: str
    """unix-cron expression, as for `Job.schedule`."""
    relative_uri: str
    """The handler's path (and query), starting with "/", e.g. "/jobs/close"."""
    service: str = "default"
    """The App Engine service (module) the request goes to."""
    version: str = ""
    """The version it goes to; "" (default): the version that serves the service's traffic."""
    scaling: str = "automatic"
    """The scaling type of that service's app.yaml, "automatic", "basic" or "manual": it sets App
    Engine's request timeout (10 minutes, or 24 hours), which bounds timeout_seconds."""
    timeout_seconds: int = 300
    """How long the handler may run, at most the scaling's request timeout (600 s for automatic,
    86400 s for basic and manual). The lease is this plus a margin; the default, like a function's,
    lets the default retries take over a run whose instance died."""
    service_account: str = ""
    """The email of the account the App Engine app runs as when app.yaml sets `service_account`;
    "" (default): App Engine's default account (PROJECT@appspot.gserviceaccount.com), read from the
    project's accounts before the jobs are created (at plan time once the IAM API is on)."""
    time_zone: str = "Etc/UTC"
    """IANA time zone the schedule is evaluated in."""
    description: str = ""
    """Shown on the Scheduler job."""
    attempt_deadline_seconds: int = 180
    """How long Scheduler waits for one attempt, 15 s to 24 h for an App Engine target, at most
    timeout_seconds."""
    retry: Retry = field(default_factory=Retry)
    """Scheduler retry config (a 503 is retried by App Engine without counting: never answer one)."""
    retention_seconds: int = 7 * 24 * 3600
    """How long a run's record is kept; it must outlast the retry window (as for `Job`)."""
    body: str = ""
    """Request body Scheduler sends."""
    next_run_catches_up: bool = False
    """As for `Job.next_run_catches_up`."""
    retries_may_skip_next_run: bool = False
    """As for `Job.retries_may_skip_next_run`."""
    overlap: Overlap = Overlap.ALLOW
    """As for `Job.overlap`."""
    catch_up_seconds: int = 0
    """As for `Job.catch_up_seconds`."""
    pause_after_failures: int = 0
    """As for `Job.pause_after_failures`."""
    active: Window | None = None
    """As for `Job.active`."""
    exclude: Calendar | None = None
    """As for `Job.exclude`."""

    @property
    def lease_seconds(self) -> int:
        """Lease on a claimed run: the handler's timeout plus a margin."""
        return self.timeout_seconds + LEASE_MARGIN_SECONDS

    def scheduled(self) -> Job:
        """The `Job` its Scheduler settings are checked and watched as (see `ServiceJob.scheduled`)."""
        return _scheduler_view(self, self.timeout_seconds)


def _scheduler_view(job: ServiceJob | AppEngineJob, timeout_seconds: int) -> Job:
    return Job(
        name=job.name,
        schedule=job.schedule,
        time_zone=job.time_zone,
        description=job.description,
        timeout_seconds=timeout_seconds,
        attempt_deadline_seconds=job.attempt_deadline_seconds,
        retry=job.retry,
        retention_seconds=job.retention_seconds,
        body=job.body,
        next_run_catches_up=job.next_run_catches_up,
        retries_may_skip_next_run=job.retries_may_skip_next_run,
        overlap=job.overlap,
        catch_up_seconds=job.catch_up_seconds,
        pause_after_failures=job.pause_after_failures,
        active=job.active,
        exclude=job.exclude,
    )


@dataclass(frozen=True)
class AlertThresholds:
    """When a team's alert policies fire (docs/monitoring.md lists every policy)."""

    sustained_seconds: int = 300
    """How long `misconfigured` or `store_unavailable` answers must keep coming before their alert
    fires: the answers of every sliding window this long are counted, and the count must stay
    above zero this long. A multiple of 60 (Cloud Monitoring's rule for a condition's duration),
    60-3600."""
    notification_period_seconds: int = 300
    """The log-match alerts (a failed run, a dead-lettered event, a missed run) notify at most once
    per this period: Cloud Monitoring requires a rate limit on them. A multiple of 60, 60-86400."""


@dataclass(frozen=True)
class Team:
    """A team: one GCP project and region, one Firestore database, many jobs. One stack each."""

    name: str
    """Team id: lowercase letters, digits and hyphens; names the stack and prefixes resources."""
    project: str
    """GCP project id the stack deploys into."""
    region: str
    """Region of the functions and Scheduler jobs, e.g. europe-west1."""
    jobs: list[Job] = field(default_factory=list)
    """The team's scheduled jobs on functions; default none (a team declares the kinds of jobs it
    has, and needs at least one job of some kind). Names are unique across every job list."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on every resource of the team."""
    event_jobs: list[EventJob] = field(default_factory=list)
    """The team's event jobs (Pub/Sub push, `EventJob`); default none. Kept apart from `jobs`,
    which the local scheduler runs on a schedule; names are unique across both lists."""
    services: list[Service] = field(default_factory=list)
    """The Cloud Run services the team's `service_jobs` call, deployed by the stack (with an
    image) or existing (docs/stacks/services.md); default none."""
    service_jobs: list[ServiceJob] = field(default_factory=list)
    """The team's scheduled jobs on Cloud Run services (`ServiceJob`); default none. Names are
    unique across every job list of the team."""
    app_engine_jobs: list[AppEngineJob] = field(default_factory=list)
    """The team's scheduled jobs on its existing App Engine application (`AppEngineJob`); default none."""
    app_engine_location: str = ""
    """The App Engine application's location as App Engine names it, what `gcloud app describe
    --format='value(locationId)'` prints (e.g. "europe-west", "us-central", "europe-west2");
    required with `app_engine_jobs`, which Scheduler creates only in that region (the stack puts
    them there, `app_engine_region`). "" (default): the team has no App Engine jobs."""
    database: str = "runonce"
    """Firestore database id for the run ledger (a dedicated database keeps IAM scoped to it)."""
    database_location: str = ""
    """Firestore location; empty means the team's region."""
    collection: str = DEFAULT_COLLECTION
    """Collection of run records inside that database."""
    delete_protection: bool = True
    """Protect the ledger database from deletion (turn off only for throwaway sandboxes)."""
    point_in_time_recovery: bool = False
    """Keep 7 days of versions for point-in-time recovery (costs storage)."""
    state: GcsState | None = None
    """Where the team's Terraform state lives. None (default): the local file
    `terraform.<team>.tfstate` at the repository root (one deployer, one machine). Shared teams
    name a bucket: `state=GcsState(bucket="acme-terraform-state", prefix="runonce/orders")`."""
    force_destroy: bool = False
    """Let `destroy` delete the source bucket with every archive in it (throwaway sandbox teams;
    with delete_protection=False the whole stack can then be destroyed)."""
    share_functions: bool = True
    """Jobs with the same source, entry point and function settings run on one deployed function
    (and its one runtime account); their runs stay apart because the run key includes the job
    name. False gives every job a function and runtime account of its own (more service
    accounts: see `stacks/validate/quotas.py`; also the first step of a migration, docs/stacks.md)."""
    keep_per_job_accounts: bool = False
    """Migration step 1 of 2 for a team deployed before accounts were shared (docs/stacks.md,
    "Migration"): this apply moves every Scheduler job to the team's invoker and every build to
    the team's build account, one function per job, and keeps each job's old build and invoker
    accounts (with the build grants) untouched, so nothing a job still uses is deleted before it
    is repointed. Remove it (step 2) and apply again: the old accounts go, and jobs with equal
    settings start sharing functions."""
    quotas: dict[str, int] = field(default_factory=dict)
    """The project's quotas where they differ from Google's defaults, by the keys of
    `stacks.validate.quotas.QUOTAS` (e.g. {"service_accounts": 300} after an increase was granted, or
    lower, to leave room for what else the project holds). Synth fails when the teams of one
    project would need more than this."""
    alerts: bool = True
    """Create the team's alert policies (docs/monitoring.md) and send them to
    `notification_channels` and `alert_emails`, at least one of which must then be given; False,
    on purpose, creates no alert policy and no channel. The log-based metrics and the dashboard
    are created either way."""
    notification_channels: list[str] = field(default_factory=list)
    """Existing Cloud Monitoring notification channels of the team's project every alert of the
    team notifies, by display name (`displayName` in `gcloud beta monitoring channels list`). The
    stack reads each with the `google_monitoring_notification_channel` data source, so a plan
    fails, before anything is created, unless exactly one channel has that name."""
    alert_emails: list[str] = field(default_factory=list)
    """E-mail addresses every alert of the team notifies: the stack creates one e-mail
    notification channel for each."""
    alert_thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    """When the alerts fire; the defaults suit most teams."""
    watchdog: bool = True
    """Deploy the team's watchdog (docs/watchdog.md): a function on its own Scheduler job, every
    10 minutes, logging one ERROR line for each scheduled run that did not finish within its
    grace (never delivered, still held, or retried out), with its own account that may only read
    the ledger and its own Firestore database `<database>-watchdog`. Only for a team with
    scheduled jobs; False deploys none (a job may then be called "watchdog")."""
    operators: list[str] = field(default_factory=list)
    """The principals that operate the team with the `runonce` command (docs/operate.md, "IAM
    for operators"), as IAM writes them: "group:ops@example.com", "user:...", "serviceAccount:...",
    "domain:...". Each gets what the verbs need on the team's resources and nothing more: the
    ledger's database (read and write), subscriber on every dead-letter subscription, publisher
    on every event job's topic, and Scheduler's job runner. Default none."""
    acknowledge: dict[str, str] = field(default_factory=dict)
    """Policy findings the team accepts, each with its reason, which `make policy` shows instead
    of failing (docs/stacks.md, "Acknowledging a finding"): a rule id of the pack (`"RO-IAM-3"`)
    for that rule's findings anywhere in the team's stack, or a rule id and one resource's
    Terraform address as the report prints it (`"RO-IAM-3:google_project_iam_member.x"`) for that
    resource only. Default none: every finding fails."""
    # The store (issue 32): its own block, additive.
    store: Firestore | Valkey = field(default_factory=Firestore)
    """Where the team's runs are recorded: `Firestore()` (the default: the database above), or
    `Valkey(...)`, a Memorystore for Valkey instance and its network (stacks/config/store.py,
    docs/stacks/stores.md). The functions, services and watchdog find it in RUNONCE_STORE."""

    @property
    def location(self) -> str:
        """Firestore location actually used."""
        return self.database_location or self.region

    @property
    def scheduled(self) -> bool:
        """Whether the team has scheduled jobs of any kind: on functions, services or App Engine."""
        return bool(self.jobs or self.service_jobs or self.app_engine_jobs)

    @property
    def watched(self) -> bool:
        """Whether the stack deploys the team's watchdog: it is on and there are scheduled jobs."""
        return self.watchdog and self.scheduled

    @property
    def needs_invoker(self) -> bool:
        """Whether anything signs as the team's invoker account: a Scheduler job with an HTTP
        target or a push subscription (an Eventarc trigger signs as its own account, and an App
        Engine target carries no token)."""
        return (
            bool(self.jobs)
            or bool(self.service_jobs)
            or any(job.trigger != EVENTARC for job in self.event_jobs)
        )

    @property
    def app_engine_region(self) -> str:
        """The region of the Scheduler jobs targeting the App Engine application: its location
        under Scheduler's name (`stacks.locations.app_engine_scheduler_region`)."""
        return app_engine_scheduler_region(self.app_engine_location)

    def scheduler_region(self, job: str) -> str:
        """The region of the Scheduler job of the scheduled job called `job`, which its run keys
        hash and operators address it in: the App Engine application's for an App Engine job,
        the team's for every other."""
        if any(app_engine_job.name == job for app_engine_job in self.app_engine_jobs):
            return self.app_engine_region
        return self.region

    def service(self, name: str) -> Service | None:
        """The service of `services` with this name, or None."""
        return next((service for service in self.services if service.name == name), None)

    @property
    def scheduled_views(self) -> list[Job]:
        """Every Scheduler job of the team as the `Job` its windows are checked and watched as: the
        function jobs themselves, then each service job (with its service's timeout; jobs naming
        no known service are left out, validation reports them) and each App Engine job."""
        services = {service.name: service for service in self.services}
        return [
            *self.jobs,
            *(
                job.scheduled(services[job.service].timeout_seconds)
                for job in self.service_jobs
                if job.service in services
            ),
            *(job.scheduled() for job in self.app_engine_jobs),
        ]


def load_team_file(path: Path) -> Team:
    """Execute one team file and return the `team` it defines."""
    spec = importlib.util.spec_from_file_location(f"teams.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise TypeError(f"{path}: not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    team = getattr(module, "team", None)
    if not isinstance(team, Team):
        raise TypeError(f"{path}: a team file must define `team = Team(...)` (found {type(team).__name__})")
    return team


def team_file_paths(folder: Path = TEAMS_DIR) -> list[Path]:
    """The deployable team files: every `*.py` not starting with an underscore, sorted."""
    return [path for path in sorted(folder.glob("*.py")) if not path.name.startswith("_")]


def load_teams(folder: Path = TEAMS_DIR) -> list[Team]:
    """Every team in the folder (raises on the first broken file; synth reads the folder with
    `stacks.config.team_files.read_team_folder`, which reports every problem of every file instead)."""
    return [load_team_file(path) for path in team_file_paths(folder)]
