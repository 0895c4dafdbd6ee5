"""What one team's monitoring watches and whom it tells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stacks import naming
from stacks.config import defaults
from stacks.config.store import Valkey
from stacks.config.team import EVENTARC, AlertThresholds, Team
from stacks.constructs.required_apis import RequiredApis


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
    paused_jobs: Mapping[str, str] = field(default_factory=dict)
    """The Scheduler job id of each job the team's watchdog may pause (`pause_after_failures`), by
    job name; empty without a watchdog."""
    store_instance: str = ""
    """The team's Valkey instance, by id, whose own signals are watched too; "" for Firestore."""
    store_node_type: str = ""
    """That instance's node type (the replication lag threshold depends on it)."""

    @property
    def pauses(self) -> bool:
        """Whether the team's watchdog may pause a job."""
        return bool(self.paused_jobs)

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
            paused_jobs={
                job.name: naming.scheduler_job_name(team.name, job.name)
                for job in team.scheduled_views
                if team.watched and job.pause_after_failures > 0
            },
            store_instance=team.store.instance_id(team.name) if isinstance(team.store, Valkey) else "",
            store_node_type=team.store.node_type if isinstance(team.store, Valkey) else "",
        )
