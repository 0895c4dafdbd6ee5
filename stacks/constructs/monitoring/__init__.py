"""A team's Cloud Monitoring: log-based metrics over runonce's log lines, alert policies that name
the `runonce` command to run, the e-mail channels they notify, and one dashboard
(docs/monitoring.md lists every metric, alert and threshold, with its sources).

One module per signal (`answers`, `dead_letters`, `missed_runs`, `latency`, `valkey`), each giving its
alert policies and its dashboard charts; `filters`, `metrics`, `alerts`, `channels` and
`dashboard` are what they are made of. `Monitoring` puts a team's together.
"""

from __future__ import annotations

import json
from typing import Any

from constructs import Construct

from stacks.config import defaults
from stacks.constructs import provider
from stacks.constructs.monitoring import (
    answers,
    channels,
    dashboard,
    dead_letters,
    latency,
    missed_runs,
    paused_jobs,
    valkey,
)
from stacks.constructs.monitoring.alerts import Alerting
from stacks.constructs.monitoring.channels import EMAIL_CHANNEL, channel_id
from stacks.constructs.monitoring.filters import (
    ANSWERED,
    CATCH_UP,
    CAUSE,
    DEAD_LETTERED,
    EXCLUDED,
    GAE_APP,
    LOG_METRIC_PREFIX,
    NOT_RUN_OUTCOMES,
    RETRY_OUTCOMES,
    RUN_REVISION,
    SKIPPED,
    WAITING,
    metric_filter,
    runonce_lines,
    service_name,
    watchdog_lines,
)
from stacks.constructs.monitoring.filters import paused_jobs as pause_lines
from stacks.constructs.monitoring.metrics import log_metric
from stacks.constructs.monitoring.props import MonitoringProps, WatchedEvents
from stacks.constructs.provider import (
    LoggingMetric,
    MonitoringAlertPolicy,
    MonitoringNotificationChannel,
    Sleep,
)
from stacks.toolchain import ITerraformDependable, TerraformLocal, Token

__all__ = [
    "CATCH_UP",
    "CAUSE",
    "EMAIL_CHANNEL",
    "EXCLUDED",
    "GAE_APP",
    "LOG_METRIC_PREFIX",
    "NOT_RUN_OUTCOMES",
    "RETRY_OUTCOMES",
    "RUN_REVISION",
    "SKIPPED",
    "WAITING",
    "Monitoring",
    "MonitoringProps",
    "WatchedEvents",
    "channel_id",
    "metric_filter",
    "service_name",
]


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
            answers.LABELS,
        )
        """Counts every answer of the team's functions (the line with `latency_ms`), by job,
        outcome and, for a run a request started, its cause."""
        self.missed_runs = (
            self._metric(
                "missed-runs",
                self.missed_runs_name,
                watchdog_lines(list(props.scheduler_jobs.values())),
                "runonce missed runs",
                missed_runs.LABELS,
            )
            if props.scheduler_jobs
            else None
        )
        """Counts the watchdog's lines about the team's scheduled jobs, by job and how the run was
        missed; None for a team without scheduled jobs."""
        self.paused_jobs = (
            self._metric(
                "paused-jobs",
                self.paused_jobs_name,
                pause_lines(list(props.paused_jobs.values())),
                "runonce paused jobs",
                paused_jobs.LABELS,
            )
            if props.pauses
            else None
        )
        """Counts the watchdog's lines saying it paused one of the team's jobs, by job; None for a
        team whose watchdog pauses no job."""
        self.dead_letters = (
            self._metric(
                "dead-letters",
                self.dead_letters_name,
                f"{runonce_lines(event_services)} AND {DEAD_LETTERED}",
                "runonce dead-letter copies",
                dead_letters.LABELS,
            )
            if props.event_services
            else None
        )
        """Counts the copies runonce published to the team's dead-letter topics, by job and
        outcome; None for a team without event jobs."""
        self.metrics = [
            m for m in (self.answers, self.missed_runs, self.paused_jobs, self.dead_letters) if m is not None
        ]
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
        self.dashboard = provider.MonitoringDashboard(
            self,
            "dashboard",
            project=props.project,
            dashboard_json=json.dumps(self.dashboard_document(), sort_keys=True),
            depends_on=[*props.apis.of(defaults.API_MONITORING), *self.metrics],
        )
        """The team's `google_monitoring_dashboard`."""

    def _metric(
        self, id: str, name: str, filter_: str, display: str, labels: dict[str, str]
    ) -> LoggingMetric:
        self.metric_names.append(name)
        return log_metric(self, self.props, id, name, filter_, display, labels)

    def _alerts(self) -> None:
        props = self.props
        self.channels = channels.email_channels(self, props)
        self.existing_channels = channels.existing_channels(self, props)
        notify = [*(channel.name for channel in self.existing_channels), *(c.name for c in self.channels)]
        self.metrics_settled = Sleep(
            self,
            "metrics-settled",
            create_duration=props.settle,
            triggers={"metrics": ",".join(sorted(self.metric_names))},
            depends_on=list(self.metrics),
        )
        on_metrics: list[ITerraformDependable] = [*self.metrics, self.metrics_settled]
        alerting = Alerting(self, props, notify)
        scheduler_jobs = list(props.scheduler_jobs.values())
        services = list(self.service_names.values())
        answers.alert_failed(alerting, runonce_lines(services, props.app_engine_services))
        if props.event_services:
            dead_letters.alert_dead_lettered(alerting, runonce_lines(self.event_service_names))
        if self.missed_runs is not None:
            missed_runs.alert_missed(alerting, scheduler_jobs)
            if props.catches_up:
                missed_runs.alert_catch_up_failed(alerting, scheduler_jobs)
            if props.pauses:
                paused_jobs.alert_paused(alerting, scheduler_jobs)
        answers.alert_sustained(alerting, self.answers_name, self.answered_on, after=on_metrics)
        for events in props.events:
            dead_letters.alert_backlog(alerting, events)
        if props.store_instance:
            valkey.alert_store(alerting, props.store_instance, props.store_node_type)
        self.policies = alerting.policies

    @property
    def answers_name(self) -> str:
        """The answers metric's name."""
        return f"runonce-{self.props.team}-answers"

    @property
    def paused_jobs_name(self) -> str:
        """The paused jobs metric's name."""
        return f"runonce-{self.props.team}-paused-jobs"

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
        charts = answers.charts(self.answers_name, self.answered_on)
        if self.props.scheduler_jobs:
            charts += missed_runs.charts(self.answers_name, self.answered_on, self.missed_runs_name)
        if self.props.pauses:
            charts += paused_jobs.charts(
                self.props.paused_jobs,
                self.answers_name,
                self.answered_on,
                self.missed_runs_name,
                self.paused_jobs_name,
            )
        if self.props.events:
            charts.append(dead_letters.chart(list(self.props.events)))
        charts.append(latency.chart(list(self.service_names.values()), self.props.app_engine_services))
        if self.props.store_instance:
            charts.append(valkey.chart(self.props.store_instance))
        return dashboard.document(self.props.team, charts)
