"""The names the library, the stacks and the local scheduler must agree on, in one place.

Plain constants and one enum, no imports beyond the standard library, so the stacks (which never
load the Google clients) and the local scheduler can import this module alone. Change a name here
and every layer changes with it; a record written under an old name would no longer be read.
"""

from __future__ import annotations

from enum import Enum

# Headers of a scheduled delivery. Cloud Scheduler sends the first two; the stack adds the others
# so that same-named jobs of several projects or regions are different runs.
JOB_HEADER = "X-CloudScheduler-JobName"
TIME_HEADER = "X-CloudScheduler-ScheduleTime"
PROJECT_HEADER = "X-Runonce-Project"
LOCATION_HEADER = "X-Runonce-Location"
OVERLAP_HEADER = "X-Runonce-Overlap"
"""The job's overlap policy, an `Overlap` value: the stack sends it on every delivery of a job whose
team file sets one (docs/schedules/overlap.md)."""
CALENDAR_HEADER = "X-Runonce-Calendar"
"""The job's calendar (its active window and excluded dates, in its time zone), as one JSON object:
the stack sends it on every delivery of a job whose team file sets `active` or `exclude`
(runonce.scheduler.exclusion; docs/stacks/schedules.md)."""

# Environment variables the library reads (decorator options override them).
LEASE_VARIABLE = "RUNONCE_LEASE_SECONDS"
RETENTION_VARIABLE = "RUNONCE_RETENTION_SECONDS"
COLLECTION_VARIABLE = "RUNONCE_COLLECTION"
DATABASE_VARIABLE = "RUNONCE_DATABASE"
STORE_VARIABLE = "RUNONCE_STORE"
"""The run store: `firestore` (the default), or a Valkey store's URL (`valkey://HOST:PORT`,
`valkeys://` with TLS, `?replicas=N`); the stack sets it for a team on Valkey (docs/stacks/stores.md)."""
FORCED_SKEW_VARIABLE = "RUNONCE_FORCED_SKEW_SECONDS"
MAX_EVENT_AGE_VARIABLE = "RUNONCE_MAX_EVENT_AGE_SECONDS"
DEAD_LETTER_TOPIC_VARIABLE = "RUNONCE_DEAD_LETTER_TOPIC"
PROJECT_VARIABLE = "GOOGLE_CLOUD_PROJECT"
TARGET_VARIABLE = "RUNONCE_TARGET"
"""The proxy's Google API target, as one JSON object (docs/targets.md); the stack sets it."""
TARGET_BASE_URL_VARIABLE = "RUNONCE_TARGET_BASE_URL"
"""Replaces the target's googleapis.com host, to point tests at a local stand-in."""
TARGET_TIMEOUT_VARIABLE = "RUNONCE_TARGET_TIMEOUT_SECONDS"
"""The proxy's timeout per call to the target's API."""
TARGET_GRACE_VARIABLE = "RUNONCE_TARGET_GRACE_SECONDS"
"""How long the proxy holds a run whose start's outcome is unknown."""
JOB_VARIABLE = "RUNONCE_JOB"
"""An event function's job, as the team file names it: the `job` field of its log lines, which the
stack's metrics and alerts label by and `runonce dead-letters --job` takes (the stack sets it)."""
STORE_CA_VARIABLE = "RUNONCE_STORE_CA"
"""With `valkeys://`: the server's CA certificates, as PEM text (the instance's own CA, which the
stack reads from the instance at apply time: no file exists to name in a deployed function)."""
CONSUMER_VARIABLE = "K_SERVICE"
"""Set by Cloud Run in every container to the service's name (a Cloud Run function's too): the
consumer of an event function's CloudEvents (Cloud Run's "Container runtime contract")."""

# Where the proxy puts the run key in what it starts; the downstream services read it from these.
IDEMPOTENCY_HEADER = "X-Runonce-Idempotency-Key"
IDEMPOTENCY_ARGUMENT_FIELD = "runonce_idempotency_key"
IDEMPOTENCY_ENV_VARIABLE = "RUNONCE_IDEMPOTENCY_KEY"
IDEMPOTENCY_SUBSTITUTION = "_RUNONCE_IDEMPOTENCY_KEY"

DEFAULT_COLLECTION = "scheduler_runs"
"""The ledger's collection when RUNONCE_COLLECTION is not set."""

EXPIRE_AT_FIELD = "expire_at"
"""The record field holding when the record may be deleted: the Firestore TTL policy's field."""
STATUS_FIELD = "status"
"""The record field holding the run's `RunStatus` value."""
VERSION_FIELD = "runonce_version"
"""On every record and every log line: the version of the runonce library that wrote it (on a
record, the attempt's that last claimed or finished it), so an operator can tell which code did."""
EXCLUDED_BECAUSE_FIELD = "excluded_because"
"""On an excluded run's record: why its calendar excludes it (an `Excluded` value)."""
SKIPPED_FOR_FIELD = "skipped_for"
"""On a skipped run's record: the run key of the run that held the job's lock (docs/schedules/overlap.md)."""
DEAD_LETTERED_AT_FIELD = "dead_lettered_at"
"""On an event's record: when its copy was forwarded to the dead-letter topic."""
DEAD_LETTER_REASON_FIELD = "dead_letter_reason"
"""On an event's record: why it was dead-lettered (a `DeadLetterReason` value)."""
DEAD_LETTER_MESSAGE_ID_FIELD = "dead_letter_message_id"
"""On an event's record: the messageId of its copy in the dead-letter topic."""
DEAD_LETTER_FAILED_AT_FIELD = "dead_letter_failed_at"
"""On an event's record: when forwarding its copy last failed (a redelivery may forward it now)."""
DEAD_LETTER_FORM_FIELD = "dead_letter_form"
"""On an event's record: how its copy holds the original (a `DeadLetterForm` value)."""

# The two log lines the core writes around every job body (with run_key and attempt_id bound):
# one before the body starts, one when it ends. A body whose instance died has no end line.
BODY_FIELD = "runonce_body"
"""`started` on the first line, `ended` on the second."""
BODY_END_FIELD = "runonce_body_end"
"""On the end line: how the body ended, a `BodyEnd` value."""
BODY_ERROR_FIELD = "error"
"""On the end line of a body that raised: the exception's class name."""
WALL_TIME_FIELD = "time"
"""On both lines: the wall clock (RFC 3339) when the line was written."""

# Attributes runonce adds to an event's copy in the dead-letter topic (the original ones are kept).
DEAD_LETTER_REASON_ATTRIBUTE = "runonce_reason"
"""Why the event was dead-lettered: one of the `DeadLetterReason` values."""
DEAD_LETTER_RUN_KEY_ATTRIBUTE = "runonce_run_key"
"""The event's run key: the ledger record's id."""
DEAD_LETTER_ATTEMPT_ATTRIBUTE = "runonce_attempt"
"""The ledger attempt that dead-lettered it (1 for the first)."""
DEAD_LETTER_ERROR_ATTRIBUTE = "runonce_error"
"""The failure, as recorded (cut short)."""
DEAD_LETTER_ORIGIN_ATTRIBUTE = "runonce_origin"
"""The push subscription, or the CloudEvent source, the event came from."""
DEAD_LETTER_EVENT_ID_ATTRIBUTE = "runonce_event_id"
"""The Pub/Sub messageId or CloudEvent id the event had (the copy gets a new messageId)."""
DEAD_LETTER_WRAPPED_ATTRIBUTE = "runonce_wrapped"
"""On a wrapped copy: the type of the message its data holds, `google.pubsub.v1.PubsubMessage`."""
DEAD_LETTER_COPY_ID_ATTRIBUTE = "runonce_copy_message_id"
"""On the note that follows a bare copy: that copy's messageId."""
DEAD_LETTER_ATTRIBUTE_PREFIX = "runonce_"
"""Every attribute runonce adds starts with this; a plain copy's original has none that does."""

CLAIMED_AT_FIELD = "claimed_at"
"""On every record: when its last attempt claimed it (a first claim or a takeover)."""
EVENT_SOURCE_FIELD = "event_source"
"""On an event's record: its push subscription (`projects/P/subscriptions/S`) or CloudEvent source.
`runonce runs` lists a push job's records by it and `claimed_at` (the stack's composite index)."""
EVENT_CONSUMER_FIELD = "event_consumer"
"""On a CloudEvent's record: the function (Cloud Run service) that consumed it. `runonce runs`
lists an Eventarc job's records by it and `claimed_at` (the stack's composite index)."""
ACTIONS_FIELD = "operator_actions"
"""On a record an operator changed (the `runonce` command): a list of {"action", "by", "at",
"detail"} maps, oldest first; every release, re-run and replay appends one."""
HISTORY_FIELD = "history"
"""On a run an operator re-ran: the finished states it had, oldest first, each the record's
status, error, result and finishing fields as they were before the re-run reopened it."""

# The watchdog's report of a run that did not finish (functions/watchdog; docs/operate.md): one
# ERROR line per missed run, read by the team's log-based metric (docs/monitoring.md).
WATCHDOG_LOGGER = "runonce.watchdog"
"""The `logger` field of every line the watchdog writes."""
MISSED_RUN_FIELD = "missed_run"
"""On a watchdog line about a missed run: how it was missed, a `MissedRun` value."""
PAUSED_FIELD = "paused_after_failures"
"""On the watchdog's line saying it paused a job: how many consecutive runs failed (the alert
on paused jobs matches the field)."""

# The watchdog function's settings (functions/watchdog), which the stack sets. Its own ledger (its
# ticks and its claims of the runs it reported) is RUNONCE_DATABASE and RUNONCE_COLLECTION; the team's
# ledger, which it only reads, is named by these.
WATCHDOG_JOBS_VARIABLE = "RUNONCE_WATCHDOG_JOBS"
"""The watched jobs, one JSON list of {"job", "scheduler_job", "schedule", "time_zone",
"grace_seconds", "lookback_seconds", "since"} objects."""
WATCHDOG_TEAM_VARIABLE = "RUNONCE_WATCHDOG_TEAM"
"""The team's name, for the `runonce` command each line names."""
WATCHDOG_LOCATION_VARIABLE = "RUNONCE_WATCHDOG_LOCATION"
"""The region of the team's Scheduler jobs (their X-Runonce-Location), which their run keys hash."""
WATCHDOG_LEDGER_DATABASE_VARIABLE = "RUNONCE_WATCHDOG_LEDGER_DATABASE"
"""The team's ledger database, read only."""
WATCHDOG_LEDGER_COLLECTION_VARIABLE = "RUNONCE_WATCHDOG_LEDGER_COLLECTION"
"""The team's ledger collection."""


class RunStatus(str, Enum):
    """Where a run stands in the ledger (the record's `status` field)."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    """Not run: another run of its `skip` job held the job's lock (its `skipped_for` field names
    that run). Finished, like completed and failed: only an operator's re-run runs it."""
    EXCLUDED = "excluded"
    """Not run: its scheduled time is outside the job's active window or on an excluded date (its
    `excluded_because` field says which). Finished: the watchdog, backfill and catch-up leave it."""


class Overlap(str, Enum):
    """What a run does when another run of its job is in progress under a live lease."""

    ALLOW = "allow"
    """It runs as well: runs of one job may overlap (the default)."""
    SKIP = "skip"
    """It is recorded as skipped and answered 2xx: Scheduler does not retry it."""
    WAIT = "wait"
    """It is answered 409 until the run before it ends, within its own retry window."""


class Excluded(str, Enum):
    """Why a job's calendar excludes a scheduled run (the record's `excluded_because` field)."""

    BEFORE_WINDOW = "before_window"
    """Its date, in the job's time zone, is before the active window's start."""
    AFTER_WINDOW = "after_window"
    """Its date is after the active window's end, or it is after a campaign's last run."""
    EXCLUDED_DATE = "excluded_date"
    """Its date is one of the calendar's excluded dates."""


class BodyStage(str, Enum):
    """Which of the two body lines it is (the `runonce_body` field)."""

    STARTED = "started"
    ENDED = "ended"


class BodyEnd(str, Enum):
    """How a job body ended, as the core read it (the `runonce_body_end` log field)."""

    SUCCEEDED = "succeeded"
    """It returned a success: the run completes."""
    RETRYABLE = "retryable"
    """It raised, or returned 408, 429 or 5xx: the claim is released for a retry."""
    PERMANENT = "permanent"
    """It raised PermanentError or returned another 4xx: the run is recorded failed."""
    STOPPED = "stopped"
    """It raised SystemExit or KeyboardInterrupt: the claim is released, the process goes down."""
    HELD = "held"
    """It raised OutcomeUnknown: the claim stays held for a while, then a retry takes it over."""


class DeadLetterForm(str, Enum):
    """How a dead-letter copy holds the original message (docs/library.md, "Event-driven
    functions", the dead-letter copy)."""

    PLAIN = "plain"
    """The original data and attributes, plus runonce's attributes."""
    WRAPPED = "wrapped"
    """Data: the original serialized as a `google.pubsub.v1.PubsubMessage`; runonce's attributes."""
    BARE = "bare"
    """Exactly the original, nothing added (it is at Pub/Sub's size limit); a note follows it."""


class DeadLetterReason(str, Enum):
    """Why runonce forwarded an event to the dead-letter topic."""

    PERMANENT_FAILURE = "permanent_failure"
    """The job raised PermanentError (or returned a permanent 4xx)."""
    TOO_OLD = "too_old"
    """The event was older than RUNONCE_MAX_EVENT_AGE_SECONDS when delivered; it did not run."""


class MissedRun(str, Enum):
    """How a scheduled run past its grace did not finish (the watchdog's `missed_run` field)."""

    NEVER_DELIVERED = "never_delivered"
    """No record: Scheduler never delivered the run, or no delivery reached the handler."""
    STILL_HELD = "still_held"
    """In progress with a live lease: an attempt (or an outcome-unknown hold) still holds it."""
    RETRIED_OUT = "retried_out"
    """In progress with its lease run out: the attempt holding it died or stopped and no retry
    took it over, so Scheduler's retries ran out. (A run every attempt released for a retry has
    no record left, so it reads as never delivered.)"""
    WAITED_OUT = "waited_out"
    """No record, but a waiting note: a run of a `wait` job answered 409 while another run held
    the job, whose retries ran out before the job was free (docs/schedules/overlap.md)."""
