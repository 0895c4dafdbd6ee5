"""`--team T`: the team file's names, as the stack that deployed it names its resources.

The team file is found and loaded by the stacks' own code (`stacks.stack_names.resolve_stack`,
`stacks.config.team_files`), and every name comes from `stacks.naming`, so the command reads the
database, collection, Scheduler jobs and subscriptions the stack created, never a copy of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runonce.contract import EVENT_CONSUMER_FIELD, EVENT_SOURCE_FIELD
from runonce.scheduler.exclusion import JobCalendar
from stacks import naming
from stacks.config.team import EVENTARC, TEAMS_DIR, Team
from stacks.config.team_files import read_team_folder
from stacks.stack_names import TEAMS_DIR_ENV, resolve_stack


class BadInput(ValueError):
    """An option or argument the command cannot use; the message names it and the fix."""

    def __init__(self, option: str, problem: str):
        super().__init__(f"{option}: {problem}")
        self.option = option
        self.problem = problem


@dataclass(frozen=True)
class ScheduledJob:
    """A scheduled job of the team and its Cloud Scheduler job."""

    name: str
    scheduler_job: str
    """The Scheduler job id: the `job` field of its run records and part of their keys."""
    schedule: str
    time_zone: str
    location: str
    """The Scheduler job's region (`Team.scheduler_region`), part of its run keys."""
    retention_seconds: int
    """How long its records are kept after their run finished (the team file's `retention_seconds`)."""
    calendar: JobCalendar | None = None
    """Its calendar (`Job.calendar`): the ticks it excludes are listed `excluded`, never missing."""


@dataclass(frozen=True)
class EventJob:
    """An event job of the team, its topic and its dead letters."""

    name: str
    trigger: str
    """`push` or `eventarc`."""
    function: str
    """The function's (and its Cloud Run service's) name: an Eventarc record's `event_consumer`."""
    topic: str
    """The topic path its events are published to, "" for a Cloud Storage trigger."""
    push_subscription: str
    """The push subscription's path (a push record's `event_source`), "" for Eventarc."""
    dead_letter_topic: str
    dead_letter_subscription: str
    """The pull subscription that keeps the job's dead letters (runonce's and Pub/Sub's)."""

    @property
    def records(self) -> dict[str, str]:
        """The record field (and its value) that marks a run of this job: the push subscription,
        or for Eventarc the function that consumed the CloudEvent."""
        if self.push_subscription:
            return {EVENT_SOURCE_FIELD: self.push_subscription}
        return {EVENT_CONSUMER_FIELD: self.function}


@dataclass(frozen=True)
class TeamView:
    """What the command needs of one team file."""

    name: str
    project: str
    region: str
    database: str
    collection: str
    jobs: tuple[ScheduledJob, ...]
    event_jobs: tuple[EventJob, ...]

    def job(self, name: str) -> ScheduledJob | EventJob:
        """The job called `name` (its team-file name); BadInput listing the team's jobs if none."""
        jobs: tuple[ScheduledJob | EventJob, ...] = (*self.jobs, *self.event_jobs)
        for job in jobs:
            if name in (job.name, getattr(job, "scheduler_job", None)):
                return job
        known = ", ".join(job.name for job in jobs) or "none"
        raise BadInput("--job", f"team {self.name!r} has no job {name!r}; its jobs: {known}")


def teams_folder() -> Path:
    """The folder of team files: $RUNONCE_TEAMS_DIR, else teams/ (as `make deploy` reads it)."""
    return Path(os.environ.get(TEAMS_DIR_ENV) or TEAMS_DIR)


def load(given: str, folder: Path | None = None) -> Team:
    """The team `given` names (its name, or its file's name or path); BadInput naming the known
    teams if there is none."""
    folder = teams_folder() if folder is None else folder
    resolved = resolve_stack(given, folder)
    if resolved.stack is None:
        raise BadInput("--team", f"{resolved.note} (team files are read from {folder})")
    return next(file.team for file in read_team_folder(folder).files if file.team.name == resolved.stack)


def resolve(given: str, folder: Path | None = None) -> TeamView:
    """The names of the team `given` names (see `load`)."""
    return view(load(given, folder))


def view(team: Team) -> TeamView:
    """The names the stack gives a loaded team's resources."""
    subscription = f"projects/{team.project}/subscriptions/"
    return TeamView(
        name=team.name,
        project=team.project,
        region=team.region,
        database=team.database,
        collection=team.collection,
        jobs=tuple(
            ScheduledJob(
                job.name,
                naming.scheduler_job_name(team.name, job.name),
                job.schedule,
                job.time_zone,
                team.scheduler_region(job.name),
                job.retention_seconds,
                job.calendar,
            )
            for job in team.scheduled_views
        ),
        event_jobs=tuple(
            EventJob(
                name=job.name,
                trigger=job.trigger,
                function=naming.function_name(team.name, job.name),
                topic=(
                    ""
                    if job.bucket
                    else naming.topic_path(team.project, job.topic or naming.topic_name(team.name, job.name))
                ),
                push_subscription=(
                    ""
                    if job.trigger == EVENTARC
                    else subscription + naming.push_subscription_name(team.name, job.name)
                ),
                dead_letter_topic=naming.topic_path(
                    team.project, naming.dead_letter_topic_name(team.name, job.name)
                ),
                dead_letter_subscription=subscription
                + naming.dead_letter_subscription_name(team.name, job.name),
            )
            for job in team.event_jobs
        ),
    )
