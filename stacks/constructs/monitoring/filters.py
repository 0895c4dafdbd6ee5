"""The Logging and Monitoring filters the team's metrics, alerts and charts are made of, and the
log fields and answers they match (docs/monitoring.md).

The filters match the team's own functions only: Cloud Run functions log under the
`cloud_run_revision` resource, `resource.labels.service_name` naming the function's service by
its short name, which `service_name` takes from the end of the service's full name.
"""

from __future__ import annotations

from collections.abc import Sequence

from stacks.contract import DEAD_LETTER_MESSAGE_ID_FIELD, MISSED_RUN_FIELD, PAUSED_FIELD, WATCHDOG_LOGGER
from stacks.toolchain import Fn, Token

RUNONCE_LOGGER = "runonce"
"""The `logger` of every line the library writes (runonce/_logs.py)."""
LOG_METRIC_PREFIX = "logging.googleapis.com/user/"
"""A log-based metric's type in Cloud Monitoring is this prefix and the metric's name."""
RUN_REVISION = "cloud_run_revision"
"""The monitored resource a Cloud Run function (gen2) or service logs under (docs/monitoring.md)."""
GAE_APP = "gae_app"
"""The monitored resource an App Engine application logs under, its `module_id` label naming the
App Engine service and `version_id` the version (docs/monitoring.md)."""
DEAD_LETTER_OUTCOMES = ("dead_letter_failed",)
"""The answer of an event whose copy could not be forwarded (it is redelivered)."""
NOT_RUN_OUTCOMES = ("failed", "too_old")
"""The answers after which no delivery runs the job again (docs/library.md's status tables)."""
RETRY_OUTCOMES = ("retry", "error", "store_unavailable", "misconfigured", "dead_letter_failed")
"""The answers (5xx) after which Scheduler or Pub/Sub delivers the run again."""
SKIPPED = "skipped"
"""The answer (200) of a run its job's `skip` overlap policy skipped: it is not run later."""
EXCLUDED = "excluded"
"""The answer (200) of a scheduled run its job's calendar excludes (`Job.active`, `Job.exclude`):
recorded, never run (docs/schedules/calendars.md)."""
WAITING = "waiting"
"""The answer (409) of a run waiting, under its job's `wait` overlap policy, for the run before it
to end: Scheduler retries it."""
CAUSE = "cause"
"""On the answer line of a run a request started (docs/stacks/schedules.md, "Metrics and
alerts"): what made the request, `catch_up` (the watchdog), `backfill` or `rerun` (an operator)."""
CATCH_UP = "catch_up"
"""On a watchdog line about a catch-up: how it went. `started` is a line without `missed_run` (the
run is not missed: it was started); `failed` (the watchdog could not start it) and `not_delivered`
(started, but no delivery came) are on the missed run's own ERROR line."""
CATCH_UP_FAILURES = ("failed", "not_delivered")
"""The catch-ups that did not run the missed run (neither is tried again)."""
ANSWERED = "jsonPayload.latency_ms:*"
"""Only the line that answers a delivery carries `latency_ms` (docs/library.md, "Logs")."""
DEAD_LETTERED = f"jsonPayload.{DEAD_LETTER_MESSAGE_ID_FIELD}:*"
"""Only the line about a copy runonce published carries its messageId."""
ALIGNMENT = "60s"
"""Charts and backlog conditions take one point per minute."""


def any_of(field_path: str, values: Sequence[str]) -> str:
    """A filter clause matching a field equal to any of the values (Logging and Monitoring both
    accept `field="a" OR field="b"`)."""
    return "(" + " OR ".join(f'{field_path}="{value}"' for value in values) + ")"


def service_name(service: str) -> str:
    """The `service_name` label of the `cloud_run_revision` entries and time series of a Cloud Run
    service given by its full name (`projects/P/locations/R/services/NAME`, what a function's
    `service_config[0].service` holds at apply time): NAME, its last segment, taken by Terraform
    (docs/monitoring.md, "Which service a filter names")."""
    return Token.as_string(Fn.element(Fn.reverse(Fn.split("/", service)), 0))


def runonce_lines(services: Sequence[str], app_engine_services: Sequence[str] = ()) -> str:
    """A Logging filter for the library's lines from these Cloud Run services (by `service_name`
    label: short names) and App Engine services (by `module_id` label). Logging's OR binds
    tighter than AND, so each source is parenthesized."""
    run = f'resource.type="{RUN_REVISION}" AND {any_of("resource.labels.service_name", services)}'
    if not app_engine_services:
        return f'{run} AND jsonPayload.logger="{RUNONCE_LOGGER}"'
    gae = f'resource.type="{GAE_APP}" AND {any_of("resource.labels.module_id", app_engine_services)}'
    sources = f"(({run}) OR ({gae}))" if services else f"({gae})"
    return f'{sources} AND jsonPayload.logger="{RUNONCE_LOGGER}"'


def watchdog_lines(scheduler_jobs: Sequence[str]) -> str:
    """A Logging filter for the watchdog's missed-run lines about these Scheduler jobs: a run a
    catch-up started has none (its `catch_up` `started` line carries no `missed_run`), one a
    catch-up could not run has its own, with `catch_up` saying why."""
    return (
        f'jsonPayload.logger="{WATCHDOG_LOGGER}" AND jsonPayload.{MISSED_RUN_FIELD}:* AND '
        f"{any_of('jsonPayload.scheduler_job', scheduler_jobs)}"
    )


def failed_catch_ups(scheduler_jobs: Sequence[str]) -> str:
    """A Logging filter for the watchdog's lines about a catch-up of these Scheduler jobs that did
    not run the missed run."""
    return (
        f'jsonPayload.logger="{WATCHDOG_LOGGER}" AND {any_of(f"jsonPayload.{CATCH_UP}", CATCH_UP_FAILURES)} '
        f"AND {any_of('jsonPayload.scheduler_job', scheduler_jobs)}"
    )


PAUSED = PAUSED_FIELD
"""The field of the watchdog's line saying it paused a Scheduler job after its runs kept failing
(`runonce.contract.PAUSED_FIELD`)."""


def paused_jobs(scheduler_jobs: Sequence[str]) -> str:
    """A Logging filter for the watchdog's lines saying it paused one of these Scheduler jobs."""
    return (
        f'jsonPayload.logger="{WATCHDOG_LOGGER}" AND jsonPayload.{PAUSED}:* AND '
        f"{any_of('jsonPayload.scheduler_job', scheduler_jobs)}"
    )


def metric_filter(metric: str, resource: str = RUN_REVISION, **labels: str) -> str:
    """A Monitoring filter for a log-based metric, by its name: its time series are of the
    monitored resource its log entries are of ("" for any), with these label values."""
    clauses = [f'metric.type="{LOG_METRIC_PREFIX}{metric}"']
    clauses += [f'resource.type="{resource}"'] if resource else []
    clauses += [f'metric.labels.{key}="{value}"' for key, value in labels.items()]
    return " AND ".join(clauses)


def subscription_filter(metric: str, subscription: str) -> str:
    """A Monitoring filter for one Pub/Sub subscription metric of one subscription."""
    return (
        f'metric.type="pubsub.googleapis.com/subscription/{metric}" AND '
        f'resource.type="pubsub_subscription" AND resource.labels.subscription_id="{subscription}"'
    )
