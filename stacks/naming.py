"""Every cloud resource name a team stack creates, derived from the team and job names.

Names are prefixed with the team so two teams in one project never collide. Each name has its
own limit; `validation` checks the ones a user can make too long, and service account ids
(6-30 characters, shorter than most job names allow) are shortened with a stable digest.
"""

from __future__ import annotations

import hashlib
import re

# Lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen.
DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")

MAX_TEAM_NAME = 20
"""Team names prefix every resource; with a 30-character project id the bucket name fits 63."""
MAX_JOB_NAME = 40
MAX_FUNCTION_NAME = 49
"""A gen2 function is a Cloud Run service, whose name has at most 49 characters."""
MAX_ACCOUNT_ID = 30
MIN_ACCOUNT_ID = 6
DIGEST_LENGTH = 6
RUNTIME_ROLE = "run"
"""Suffix of a function's runtime account (one per function)."""
TRIGGER_ROLE = "trg"
"""Suffix of an Eventarc event job's trigger account (one per such job)."""
TEAM_ROLES = ("build", "call")
"""Suffixes of the team's two shared accounts: the build account and the Scheduler invoker."""


def function_name(team: str, job: str) -> str:
    """Name of the job's function (and so of its Cloud Run service)."""
    return f"{team}-{job}"


def scheduler_job_name(team: str, job: str) -> str:
    """Name of the job's Cloud Scheduler job (sent as X-CloudScheduler-JobName)."""
    return f"{team}-{job}"


def bucket_name(project: str, team: str) -> str:
    """The team's function source bucket (bucket names are global, hence the project). A valid
    project id (30) and team name (20) keep it within the 63-character limit."""
    return f"{project}-{team}-sources"


def repository_id(team: str) -> str:
    """The team's Artifact Registry repository that function builds push images to."""
    return f"{team}-functions"


def account_id(team: str, job: str, role: str) -> str:
    """A service account id for one role of one function (named after its first job):
    `team-job-role`, or a shortened stable form `team-jo-1a2b3c-role` when that exceeds the
    30-character limit."""
    full = f"{team}-{job}-{role}"
    if len(full) <= MAX_ACCOUNT_ID:
        return full
    digest = hashlib.sha256(f"{team}-{job}".encode()).hexdigest()[:DIGEST_LENGTH]
    room = MAX_ACCOUNT_ID - len(role) - DIGEST_LENGTH - 2
    return f"{f'{team}-{job}'[:room].rstrip('-')}-{digest}-{role}"


def team_account_id(team: str, role: str) -> str:
    """The id of one of the team's shared accounts (`TEAM_ROLES`): `team-build`, `team-call`. A
    valid team name (at most 20 characters) keeps it within 6-30; a function's account ends in
    `-run`, so the two never meet."""
    return f"{team}-{role}"


def source_object_name(digest: str) -> str:
    """Object name of a source archive: a new digest (a code change) is a new object."""
    return f"sources/{digest}.zip"


def gcf_sources_bucket(project_number: str, region: str) -> str:
    """Google's own bucket that Cloud Run functions (gen2) copy each deployed source into, and
    that the build fetches it from (the name in provider issue 20571's error)."""
    return f"gcf-v2-sources-{project_number}-{region}"


def one_bucket_condition(bucket: str) -> str:
    """An IAM condition that matches one bucket and the objects in it, and nothing else.

    Cloud Storage names a bucket `projects/_/buckets/B` and an object in it
    `projects/_/buckets/B/objects/O` in IAM conditions; a bare prefix on the bucket name would
    also match other buckets (the region europe-west1 is a prefix of europe-west10)."""
    name = f"projects/_/buckets/{bucket}"
    return f'resource.name == "{name}" || resource.name.startsWith("{name}/objects/")'


def topic_name(team: str, job: str) -> str:
    """The topic an event job's stack creates when the job names no existing one."""
    return f"{team}-{job}"


def dead_letter_topic_name(team: str, job: str) -> str:
    """The event job's dead-letter topic (runonce's and Pub/Sub's dead letters)."""
    return f"{team}-{job}-dead-letter"


def push_subscription_name(team: str, job: str) -> str:
    """The push subscription that delivers the job's topic to its function."""
    return f"{team}-{job}-push"


def dead_letter_subscription_name(team: str, job: str) -> str:
    """The pull subscription that keeps the job's dead letters for 7 days."""
    return f"{team}-{job}-dead-letter"


def topic_path(project: str, topic: str) -> str:
    """A topic's full path, as RUNONCE_DEAD_LETTER_TOPIC and dead_letter_policy take it."""
    return f"projects/{project}/topics/{topic}"


WATCHDOG = "watchdog"
"""The team's watchdog takes a job's place in the names: function and Scheduler job
`<team>-watchdog`, runtime account `<team>-watchdog-run` (so no job of a watched team may be
called this)."""


def watchdog_database(ledger_database: str) -> str:
    """The watchdog's own Firestore database, beside the team's ledger: its ticks and its claims
    of reported runs live there, so its account may write there and only read the ledger."""
    return f"{ledger_database}-{WATCHDOG}"


WATCHDOG_COLLECTION = "watchdog_runs"
"""The collection of the watchdog's own records (its ticks, its claims of reported runs and its
pauses): in its database on Firestore, under this name on a Valkey server."""
