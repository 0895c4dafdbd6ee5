"""A team's Cloud Monitoring: log-based metrics over runonce's log lines, alert policies that name
the `runonce` command to run, the e-mail channels they notify, and one dashboard
(docs/monitoring.md lists every metric, alert and threshold, with its sources).

The metrics count lines of the team's own functions only (Cloud Run functions log under the
`cloud_run_revision` resource, `resource.labels.service_name` naming the function's service by
its short name, which `service_name` takes from the end of the service's full name),
labelled by job and outcome: never by run key or event id, one value per run, which would make a
time series per run. A metric's kind and value type cannot change once created and its labels
can be added but not changed, so both are fixed here, once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdktf import Fn, ITerraformDependable, TerraformLocal, Token
from constructs import Construct

from stacks import naming
from stacks.config import defaults
from stacks.config.team import EVENTARC, AlertThresholds, Team
from stacks.constructs import provider
from stacks.constructs.provider import (
    LoggingMetric,
    LoggingMetricMetricDescriptor,
    LoggingMetricMetricDescriptorLabels,
    MonitoringAlertPolicy,
    MonitoringAlertPolicyAlertStrategy,
    MonitoringAlertPolicyAlertStrategyNotificationRateLimit,
    MonitoringAlertPolicyConditions,
    MonitoringAlertPolicyConditionsConditionMatchedLog,
    MonitoringAlertPolicyConditionsConditionThreshold,
    MonitoringAlertPolicyConditionsConditionThresholdAggregations,
    MonitoringAlertPolicyDocumentation,
    MonitoringDashboard,
    MonitoringNotificationChannel,
    Sleep,
)
from stacks.constructs.required_apis import RequiredApis
from stacks.contract import DEAD_LETTER_MESSAGE_ID_FIELD, MISSED_RUN_FIELD, WATCHDOG_LOGGER

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
WAITING = "waiting"
"""The answer (409) of a run waiting, under its job's `wait` overlap policy, for the run before it
to end: Scheduler retries it."""
CAUSE = "cause"
"""On the answer line of a run a request started (docs/stacks/schedules.md, "Metrics and
alerts"): what made the request, `catch_up` (the watchdog), `backfill` or `rerun` (an operator)."""
STARTED_BY = ("catch_up", "backfill")
"""The causes the dashboard charts: runs the watchdog caught up, and runs a backfill started."""
CATCH_UP = "catch_up"
"""On a watchdog line about a catch-up: how it went. `started` is a line without `missed_run` (the
run is not missed: it was started); `failed` (the watchdog could not start it) and `not_delivered`
(started, but no delivery came) are on the missed run's own ERROR line."""
CATCH_UP_FAILURES = ("failed", "not_delivered")
"""The catch-ups that did not run the missed run (neither is tried again)."""
SUSTAINED_OUTCOMES = ("misconfigured", "store_unavailable")
"""The answers that alert once they keep coming for `AlertThresholds.sustained_seconds`."""
SUSTAINED_ABOVE = 1
"""More than one such answer in every sliding window of `sustained_seconds`, for that long: a
lone answer, or two close together, stays below; a run whose retries keep answering so does not."""
EMAIL_CHANNEL = "email"
"""The only channel type the stack creates (policy rule RO-MON-1)."""
ANSWERED = "jsonPayload.latency_ms:*"
"""Only the line that answers a delivery carries `latency_ms` (docs/library.md, "Logs")."""
DEAD_LETTERED = f"jsonPayload.{DEAD_LETTER_MESSAGE_ID_FIELD}:*"
"""Only the line about a copy runonce published carries its messageId."""
ALIGNMENT = "60s"
"""Charts and backlog conditions take one point per minute."""


@dataclass(frozen=True)
class WatchedEvents:
    """One event job's subscriptions, watched for a backlog."""

    job: str
    """The event job's name."""
    dead_letter_subscription: str
    """The id of the pull subscription that keeps its dead letters."""
    push_subscription: str = ""
    """The id of its push subscription; "" for an Eventarc job (Eventarc owns that one)."""
    oldest_unacked_seconds: int = 0
    """Alert when the push subscription's oldest unacknowledged message is older than this."""


@dataclass(frozen=True)
class MonitoringProps:
    """What one team's monitoring watches and whom it tells."""

    project: str
    """Project id the metrics, alerts and dashboard are created in."""
    team: str
    """Team name: names the metrics and titles the alerts and the dashboard."""
    services: Mapping[str, str]
    """The Cloud Run service of each of the team's functions, by function name, as the function's
    `service_config[0].service` gives it: its full name, `projects/P/locations/R/services/NAME`."""
    event_services: Sequence[str]
    """The services (values of `services`) of the event jobs' functions."""
    scheduler_jobs: Mapping[str, str]
    """The Scheduler job id of each scheduled job, by job name (the watchdog's `scheduler_job`)."""
    events: Sequence[WatchedEvents]
    """The event jobs' subscriptions."""
    apis: RequiredApis
    """The enabled APIs (Cloud Logging and Cloud Monitoring among them)."""
    alerts: bool = True
    """Create the alert policies (and the e-mail channels); False: metrics and dashboard only."""
    app_engine_services: Sequence[str] = ()
    """The App Engine services (`module_id`) the team's App Engine jobs call."""
    channels: Sequence[str] = ()
    """Existing notification channels of the project, by display name (read at plan)."""
    emails: Sequence[str] = ()
    """Addresses to create an e-mail channel for."""
    thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    """When the alerts fire."""
    settle: str = defaults.METRIC_SETTLE
    """How long the alert policies on the log-based metrics wait after the metrics are created."""
    catches_up: bool = False
    """Whether the team's watchdog catches up missed runs (a job has `catch_up_seconds`)."""

    @classmethod
    def of(cls, team: Team, services: Mapping[str, str], apis: RequiredApis) -> MonitoringProps:
        """The monitoring of a team whose functions run as these Cloud Run services (by function
        name). A push job's backlog alert fires at half its retry window: half the time Pub/Sub
        keeps redelivering a message is then gone, and the other half is left to act in."""
        return cls(
            project=team.project,
            team=team.name,
            services=services,
            event_services=[services[job.name] for job in team.event_jobs],
            app_engine_services=sorted({job.service for job in team.app_engine_jobs}),
            scheduler_jobs={
                job.name: naming.scheduler_job_name(team.name, job.name) for job in team.scheduled_views
            },
            events=[
                WatchedEvents(
                    job=job.name,
                    dead_letter_subscription=naming.dead_letter_subscription_name(team.name, job.name),
                    push_subscription=""
                    if job.trigger == EVENTARC
                    else naming.push_subscription_name(team.name, job.name),
                    oldest_unacked_seconds=0 if job.trigger == EVENTARC else job.retry_window_seconds // 2,
                )
                for job in team.event_jobs
            ],
            apis=apis,
            alerts=team.alerts,
            channels=tuple(team.notification_channels),
            emails=tuple(team.alert_emails),
            thresholds=team.alert_thresholds,
            catches_up=team.watched and any(job.catch_up_seconds > 0 for job in team.scheduled_views),
        )


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


def metric_filter(metric: str, resource: str = RUN_REVISION, **labels: str) -> str:
    """A Monitoring filter for a log-based metric, by its name: its time series are of the
    monitored resource its log entries are of ("" for any), with these label values."""
    clauses = [f'metric.type="{LOG_METRIC_PREFIX}{metric}"']
    clauses += [f'resource.type="{resource}"'] if resource else []
    clauses += [f'metric.labels.{key}="{value}"' for key, value in labels.items()]
    return " AND ".join(clauses)


def channel_id(address: str, kind: str = "email") -> str:
    """The construct id of an address's e-mail channel (or of an existing channel's data source,
    by display name): the same for the same value wherever it is listed (reordering the list
    changes no channel), distinct for distinct values."""
    digest = hashlib.sha256(address.encode()).hexdigest()[:6]
    return f"{kind}-{re.sub(r'[^a-z0-9]+', '-', address.lower()).strip('-')}-{digest}"


def _threshold(filter_: str, name: str, duration: str, above: float, aligner: str, period: str) -> Any:
    return MonitoringAlertPolicyConditions(
        display_name=name,
        condition_threshold=MonitoringAlertPolicyConditionsConditionThreshold(
            filter=filter_,
            comparison="COMPARISON_GT",
            threshold_value=above,
            duration=duration,
            aggregations=[
                MonitoringAlertPolicyConditionsConditionThresholdAggregations(
                    alignment_period=period, per_series_aligner=aligner
                )
            ],
        ),
    )


def _documentation(text: str) -> MonitoringAlertPolicyDocumentation:
    return MonitoringAlertPolicyDocumentation(content=text, mime_type="text/markdown")


class Monitoring(Construct):
    """The team's log-based metrics, alert policies, e-mail channels and dashboard. The alert
    policies on a log-based metric depend on it and on a `time_sleep` after it: Monitoring refuses
    a policy on a log-based metric for up to 10 minutes after the metric is created."""

    def __init__(self, scope: Construct, id: str, props: MonitoringProps) -> None:
        super().__init__(scope, id)
        self.props = props
        """The props it was built from."""
        self.metric_names: list[str] = []
        """The names of the team's log-based metrics (what Monitoring's metric types end with)."""
        # One local per service: the dashboard's JSON names it with no quote inside `${...}`.
        self.service_names = {
            service: TerraformLocal(self, f"service-{function}", service_name(service)).as_string
            if Token.is_unresolved(service) or "/" in service
            else service
            for function, service in props.services.items()
        }
        """The `service_name` label of each of the team's services, by the service's name as given:
        a Terraform local for a full name (a function's, a reference), the name itself for a
        short one (a service of `Team.services`, which the team file names)."""
        self.event_service_names = [self.service_names[service] for service in props.event_services]
        """The `service_name` labels of the event jobs' services."""
        services, event_services = list(self.service_names.values()), self.event_service_names
        self.answered_on = "" if props.app_engine_services else RUN_REVISION
        """The monitored resource of the answers metric's time series: `cloud_run_revision`, or
        any ("") for a team whose App Engine jobs answer under `gae_app` too."""
        self.answers = self._metric(
            "answers",
            self.answers_name,
            f"{runonce_lines(services, props.app_engine_services)} AND {ANSWERED}",
            "runonce answers",
            {
                "job": "The job the run belongs to",
                "outcome": "The answer's outcome",
                CAUSE: "What requested the run, if a request did: catch_up, backfill or rerun",
            },
        )
        """Counts every answer of the team's functions (the line with `latency_ms`), by job,
        outcome and, for a run a request started, its cause."""
        self.missed_runs = (
            self._metric(
                "missed-runs",
                self.missed_runs_name,
                watchdog_lines(list(props.scheduler_jobs.values())),
                "runonce missed runs",
                {"job": "The scheduled job", "missed_run": "How the run was missed (MissedRun)"},
            )
            if props.scheduler_jobs
            else None
        )
        """Counts the watchdog's lines about the team's scheduled jobs, by job and how the run was
        missed; None for a team without scheduled jobs."""
        self.dead_letters = (
            self._metric(
                "dead-letters",
                self.dead_letters_name,
                f"{runonce_lines(event_services)} AND {DEAD_LETTERED}",
                "runonce dead-letter copies",
                {
                    "job": "The event job",
                    "outcome": "The answer that sent it: failed, too_old, or duplicate (sent late)",
                },
            )
            if props.event_services
            else None
        )
        """Counts the copies runonce published to the team's dead-letter topics, by job and
        outcome; None for a team without event jobs."""
        self.metrics = [m for m in (self.answers, self.missed_runs, self.dead_letters) if m is not None]
        """Every log-based metric of the team."""
        self.channels: list[MonitoringNotificationChannel] = []
        """The e-mail channels the stack creates."""
        self.existing_channels: list[provider.DataGoogleMonitoringNotificationChannel] = []
        """The `google_monitoring_notification_channel` data sources of the team's existing
        channels, one per display name in `MonitoringProps.channels`."""
        self.policies: list[MonitoringAlertPolicy] = []
        """Every alert policy of the team."""
        self.metrics_settled: Sleep | None = None
        """The wait after the metrics that the policies on them depend on (None without alerts)."""
        if props.alerts:
            self._alerts()
        self.dashboard = MonitoringDashboard(
            self,
            "dashboard",
            project=props.project,
            dashboard_json=json.dumps(self.dashboard_document(), sort_keys=True),
            depends_on=[*props.apis.of(defaults.API_MONITORING), *self.metrics],
        )
        """The team's `google_monitoring_dashboard`."""

    def _metric(
        self, id: str, name: str, filter_: str, display: str, labels: Mapping[str, str]
    ) -> LoggingMetric:
        """A counter (DELTA, INT64) of the log entries matching the filter, with STRING labels
        extracted from the entries' JSON payload fields of the same names."""
        self.metric_names.append(name)
        return LoggingMetric(
            self,
            id,
            project=self.props.project,
            name=name,
            filter=filter_,
            description=f"{display} of team {self.props.team} (runonce docs/monitoring.md)",
            metric_descriptor=LoggingMetricMetricDescriptor(
                metric_kind="DELTA",
                value_type="INT64",
                unit="1",
                display_name=display,
                labels=[
                    LoggingMetricMetricDescriptorLabels(key=key, value_type="STRING", description=text)
                    for key, text in labels.items()
                ],
            ),
            label_extractors={key: f"EXTRACT(jsonPayload.{key})" for key in labels},
            depends_on=self.props.apis.of(defaults.API_LOGGING),
        )

    def _alerts(self) -> None:
        props, team = self.props, self.props.team
        self.channels = [
            MonitoringNotificationChannel(
                self,
                channel_id(address),
                project=props.project,
                type=EMAIL_CHANNEL,
                display_name=f"runonce {team}: {address}",
                labels={"email_address": address},
                depends_on=props.apis.of(defaults.API_MONITORING),
            )
            for address in props.emails
        ]
        # Read at plan (no depends_on: a data source that depends on a resource with changes is
        # read during the apply), so a channel that does not exist, or is not unique, stops the plan.
        self.existing_channels = [
            provider.DataGoogleMonitoringNotificationChannel(
                self, channel_id(display_name, "channel"), project=props.project, display_name=display_name
            )
            for display_name in props.channels
        ]
        notify = [*(channel.name for channel in self.existing_channels), *(c.name for c in self.channels)]
        self.metrics_settled = Sleep(
            self,
            "metrics-settled",
            create_duration=props.settle,
            triggers={"metrics": ",".join(sorted(self.metric_names))},
            depends_on=list(self.metrics),
        )
        on_metrics: list[ITerraformDependable] = [*self.metrics, self.metrics_settled]
        period = f"{props.thresholds.notification_period_seconds}s"
        services, event_services = list(self.service_names.values()), self.event_service_names

        def policy(
            id: str,
            title: str,
            severity: str,
            conditions: list[Any],
            text: str,
            after: Sequence[ITerraformDependable] = (),
            strategy: MonitoringAlertPolicyAlertStrategy | None = None,
        ) -> None:
            self.policies.append(
                MonitoringAlertPolicy(
                    self,
                    id,
                    project=props.project,
                    display_name=f"runonce {team}: {title}",
                    combiner="OR",
                    severity=severity,
                    conditions=conditions,
                    notification_channels=notify,
                    documentation=_documentation(text),
                    alert_strategy=strategy,
                    depends_on=[*props.apis.of(defaults.API_MONITORING), *after],
                )
            )

        def log_match(
            id: str, title: str, severity: str, filter_: str, labels: Sequence[str], text: str
        ) -> None:
            policy(
                id,
                title,
                severity,
                [
                    MonitoringAlertPolicyConditions(
                        display_name=title,
                        condition_matched_log=MonitoringAlertPolicyConditionsConditionMatchedLog(
                            filter=filter_,
                            label_extractors={key: f"EXTRACT(jsonPayload.{key})" for key in labels},
                        ),
                    )
                ],
                text,
                strategy=MonitoringAlertPolicyAlertStrategy(
                    notification_rate_limit=MonitoringAlertPolicyAlertStrategyNotificationRateLimit(
                        period=period
                    )
                ),
            )

        log_match(
            "failed",
            "a run failed permanently",
            "ERROR",
            f"{runonce_lines(services, props.app_engine_services)} AND {ANSWERED} AND "
            f"{any_of('jsonPayload.outcome', NOT_RUN_OUTCOMES)}",
            ["job", "outcome"],
            f"A run of job `JOB` (the notification's `job` label) will not run again by itself: it "
            f"failed permanently (`failed`: its job raised PermanentError or returned a 4xx), or it "
            f"came too late to be deduplicated and was not run (`too_old`).\n\n"
            f"1. List the failed runs: `runonce runs --team {team} --job JOB --status failed`.\n"
            f"2. Read one with its error: `runonce show KEY --team {team}`.\n"
            f"3. Once the cause is fixed, run the command `show` prints under `next` (a scheduled "
            f"run: `runonce rerun --team {team} --job JOB --time SCHEDULE_TIME`; an event: "
            f"`runonce replay COPY_ID --team {team}`).",
        )
        if props.event_services:
            log_match(
                "dead-lettered",
                "an event was dead-lettered",
                "ERROR",
                f"{runonce_lines(event_services)} AND ({DEAD_LETTERED} "
                f"OR {any_of('jsonPayload.outcome', DEAD_LETTER_OUTCOMES)})",
                ["job", "outcome"],
                f"An event of job `JOB` (the notification's `job` label) did not run: it was too old "
                f"(`too_old`) or its job failed permanently (`permanent_failure`), and runonce "
                f"forwarded it to the dead-letter topic, or could not (`dead_letter_failed`: the event "
                f"is redelivered until forwarding works).\n\n"
                f"1. See the copies and their reasons: `runonce dead-letters --team {team} --job JOB`.\n"
                f"2. Once the cause is fixed, publish one back once: `runonce replay COPY_ID --team {team}`.",
            )
        if self.missed_runs is not None:
            log_match(
                "missed-run",
                "a scheduled run was missed",
                "ERROR",
                watchdog_lines(list(props.scheduler_jobs.values())),
                ["job", "missed_run"],
                f"The watchdog found a scheduled run of job `JOB` that did not finish in time "
                f"(`missed_run`: never_delivered, waited_out, still_held or retried_out). Its log line "
                f"carries the exact command.\n\n"
                f"1. Read the run: `runonce show --team {team} --job JOB --time SCHEDULE_TIME`.\n"
                f"2. still_held: an attempt may still be alive; wait until its lease ends "
                f"(`lease_expires` in show: rerun and release are refused until then), then follow "
                f"what show prints; retried_out: `runonce rerun --team {team} --job JOB --time "
                f"SCHEDULE_TIME`; "
                f"never_delivered: no record to re-run; look at the Scheduler job, and if the work is "
                f"still wanted run the `gcloud scheduler jobs run` command `show` prints (a forced run); "
                f"waited_out (a `wait` job's run whose retries ran out while the run before it held the "
                f"job): if still wanted, `runonce backfill --team {team} --job JOB --from SCHEDULE_TIME "
                f"--to SCHEDULE_TIME` runs it once.",
            )
        if self.missed_runs is not None and props.catches_up:
            log_match(
                "catch-up-failed",
                "a catch-up did not run a missed run",
                "ERROR",
                failed_catch_ups(list(props.scheduler_jobs.values())),
                ["job", CATCH_UP],
                f"The watchdog found a missed run of job `JOB` within its catch-up window but could "
                f"not start it (`failed`: its request could not be written, or Scheduler refused "
                f"`jobs.run`), or started it and no delivery came (`not_delivered`); it does not try "
                f"again. The run is also reported missed. Its log line says why (`catch_up_error`) "
                f"and carries the exact command.\n\n"
                f"1. Read the run: `runonce show --team {team} --job JOB --time SCHEDULE_TIME`.\n"
                f"2. Once the cause is fixed, start it once: `runonce backfill --team {team} --job JOB "
                f"--from SCHEDULE_TIME --to SCHEDULE_TIME` (or `runonce rerun` for a run that has a "
                f"record).",
            )
        sustained = props.thresholds.sustained_seconds
        policy(
            "store-or-config",
            f"misconfigured or store unavailable for {sustained // 60} min",
            "CRITICAL",
            [
                _threshold(
                    metric_filter(self.answers_name, self.answered_on, outcome=outcome),
                    f"{outcome} answers for {sustained // 60} min",
                    f"{sustained}s",
                    SUSTAINED_ABOVE,
                    "ALIGN_SUM",
                    f"{sustained}s",
                )
                for outcome in SUSTAINED_OUTCOMES
            ],
            f"The functions of team {team} keep answering `misconfigured` (a setting or grant is "
            f"wrong) or `store_unavailable` (the Firestore ledger cannot be reached): no run of the "
            f"affected job can take effect until it is fixed; Scheduler and Pub/Sub keep retrying.\n\n"
            f"1. See which runs are waiting: `runonce runs --team {team} --job JOB --status in_progress`.\n"
            f"2. Read the error of one: `runonce show KEY --team {team}`; fix the setting, grant or "
            f"database it names.",
            after=on_metrics,
        )
        for events in props.events:
            policy(
                f"{events.job}-dead-letter-backlog",
                f"dead letters waiting for {events.job}",
                "WARNING",
                [
                    _threshold(
                        _subscription_filter("num_undelivered_messages", events.dead_letter_subscription),
                        "undelivered dead letters",
                        "0s",
                        0,
                        "ALIGN_MAX",
                        ALIGNMENT,
                    )
                ],
                f"The dead-letter subscription `{events.dead_letter_subscription}` holds messages no one "
                f"has handled (they are kept 7 days).\n\n"
                f"1. See them: `runonce dead-letters --team {team} --job {events.job}`.\n"
                f"2. Replay each once its cause is fixed: `runonce replay COPY_ID --team {team}`.",
            )
            if events.push_subscription:
                age = _duration(events.oldest_unacked_seconds)
                policy(
                    f"{events.job}-push-backlog",
                    f"events of {events.job} unacknowledged for {age}",
                    "CRITICAL",
                    [
                        _threshold(
                            _subscription_filter("oldest_unacked_message_age", events.push_subscription),
                            f"oldest unacknowledged message older than {events.oldest_unacked_seconds} s",
                            "0s",
                            events.oldest_unacked_seconds,
                            "ALIGN_MAX",
                            ALIGNMENT,
                        )
                    ],
                    f"The push subscription `{events.push_subscription}` has a message unacknowledged "
                    f"for over {age}: half of the time Pub/Sub keeps redelivering it is gone, and "
                    f"it is lost when the rest is.\n\n"
                    f"1. See the job's recent runs and their answers: "
                    f"`runonce runs --team {team} --job {events.job}`.\n"
                    f"2. Read one that keeps answering 409 or 5xx: `runonce show KEY --team {team}`.",
                )

    @property
    def answers_name(self) -> str:
        """The answers metric's name."""
        return f"runonce-{self.props.team}-answers"

    @property
    def dead_letters_name(self) -> str:
        """The dead-letter copies metric's name."""
        return f"runonce-{self.props.team}-dead-letters"

    @property
    def missed_runs_name(self) -> str:
        """The missed runs metric's name (the watchdog's lines may come from any resource type)."""
        return f"runonce-{self.props.team}-missed-runs"

    def dashboard_document(self) -> dict[str, Any]:
        """The dashboard as the Monitoring Dashboards API's JSON (a `google.monitoring.dashboard.v1
        .Dashboard`): one chart per row of docs/monitoring.md's dashboard table."""
        team, answers, on = self.props.team, self.answers_name, self.answered_on
        by_job = ["metric.label.job"]
        charts: list[tuple[str, list[dict[str, Any]]]] = [
            (
                "Runs per job by outcome",
                [_series(metric_filter(answers, on), ["metric.label.job", "metric.label.outcome"])],
            ),
            (
                "Duplicates skipped (duplicate)",
                [_series(metric_filter(answers, on, outcome="duplicate"), by_job)],
            ),
            (
                "Held by another attempt (409 in_progress)",
                [_series(metric_filter(answers, on, outcome="in_progress"), by_job)],
            ),
            (
                "Answers that ask for a retry (5xx)",
                [_series(metric_filter(answers, on, outcome=outcome), by_job) for outcome in RETRY_OUTCOMES],
            ),
            ("Permanent failures (failed)", [_series(metric_filter(answers, on, outcome="failed"), by_job)]),
            (
                f"Skipped by the overlap policy ({SKIPPED})",
                [_series(metric_filter(answers, on, outcome=SKIPPED), by_job)],
            ),
            (
                f"Waiting for the run before (409 {WAITING})",
                [_series(metric_filter(answers, on, outcome=WAITING), by_job)],
            ),
        ]
        if self.props.scheduler_jobs:
            charts.append(
                (
                    "Runs caught up or backfilled (cause)",
                    [
                        _series(
                            metric_filter(answers, on, **{CAUSE: cause}), [*by_job, "metric.label.outcome"]
                        )
                        for cause in STARTED_BY
                    ],
                )
            )
            charts.append(
                (
                    "Missed runs (watchdog)",
                    [
                        _series(
                            metric_filter(self.missed_runs_name, ""),
                            [*by_job, "metric.label.missed_run"],
                        )
                    ],
                )
            )
        if self.props.events:
            charts.append(
                (
                    "Dead-letter backlog",
                    [
                        _series(
                            _subscription_filter("num_undelivered_messages", events.dead_letter_subscription),
                            ["resource.label.subscription_id"],
                            aligner="ALIGN_MAX",
                            reducer="REDUCE_MAX",
                        )
                        for events in self.props.events
                    ],
                )
            )
        # Cloud Run's request latencies for functions and services; App Engine's own response
        # latencies (its `gae_app` resource, by module) for App Engine jobs (docs/monitoring.md).
        latencies = [
            ("run.googleapis.com/request_latencies", RUN_REVISION, "service_name", service)
            for service in self.service_names.values()
        ] + [
            ("appengine.googleapis.com/http/server/response_latencies", GAE_APP, "module_id", module)
            for module in self.props.app_engine_services
        ]
        charts.append(
            (
                "Request latency (99th percentile, ms)",
                [
                    _series(
                        f'metric.type="{metric}" AND '
                        f'resource.type="{resource}" AND resource.labels.{label}="{name}"',
                        [f"resource.label.{label}"],
                        aligner="ALIGN_PERCENTILE_99",
                        reducer="REDUCE_MAX",
                        plot="LINE",
                    )
                    for metric, resource, label, name in latencies
                ],
            )
        )
        width, height = 24, 16
        return {
            "displayName": f"runonce {team}",
            "mosaicLayout": {
                "columns": 2 * width,
                "tiles": [
                    {
                        "xPos": (index % 2) * width,
                        "yPos": (index // 2) * height,
                        "width": width,
                        "height": height,
                        "widget": {"title": title, "xyChart": {"dataSets": datasets}},
                    }
                    for index, (title, datasets) in enumerate(charts)
                ],
            },
        }


def _duration(seconds: int) -> str:
    """Whole hours as "12 h", anything else in minutes ("90 min"), for titles."""
    return f"{seconds // 3600} h" if seconds % 3600 == 0 else f"{seconds / 60:g} min"


def _subscription_filter(metric: str, subscription: str) -> str:
    """A Monitoring filter for one Pub/Sub subscription metric of one subscription."""
    return (
        f'metric.type="pubsub.googleapis.com/subscription/{metric}" AND '
        f'resource.type="pubsub_subscription" AND resource.labels.subscription_id="{subscription}"'
    )


def _series(
    filter_: str,
    group_by: list[str],
    aligner: str = "ALIGN_SUM",
    reducer: str = "REDUCE_SUM",
    plot: str = "STACKED_BAR",
) -> dict[str, Any]:
    """One data set of an XY chart: the filter's time series, summed per minute, grouped."""
    return {
        "plotType": plot,
        "timeSeriesQuery": {
            "timeSeriesFilter": {
                "filter": filter_,
                "aggregation": {
                    "alignmentPeriod": ALIGNMENT,
                    "perSeriesAligner": aligner,
                    "crossSeriesReducer": reducer,
                    "groupByFields": group_by,
                },
            }
        },
    }
