"""Event jobs: the topic, the trigger kind (push or Eventarc) and what an Eventarc trigger needs,
Pub/Sub's ranges, and the lease, delivery attempts, retry window, event age and retention that
must agree for an event to run once."""

from __future__ import annotations

import re
from collections.abc import Iterator

from stacks import locations
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import (
    EVENTARC,
    EVENTARC_MAX_EVENT_AGE_SECONDS,
    EVENTARC_RETENTION_SECONDS,
    LEASE_MARGIN_SECONDS,
    MAX_RETRY_WINDOW_SECONDS,
    PUSH,
    EventJob,
    PushRetry,
)
from stacks.validate.functions import LEASE_ENV
from stacks.validate.team import closest

# Pub/Sub push: the ack deadline is at most 600 s (it also is the push request's timeout), a
# backoff 0-600 s, retention 10 min to 7 days, dead-letter attempts 5-100 (Pub/Sub's
# Subscription reference: ackDeadlineSeconds, RetryPolicy, messageRetentionDuration,
# DeadLetterPolicy). A topic id: 3-255 characters, starting with a letter, not "goog".
MIN_ACK_DEADLINE, MAX_ACK_DEADLINE = 10, 600
MAX_PUSH_BACKOFF = 600
MIN_RETRY_WINDOW = 600
MIN_DELIVERY_ATTEMPTS, MAX_DELIVERY_ATTEMPTS = 5, 100
TOPIC_ID = re.compile(r"^(?!goog)[A-Za-z][A-Za-z0-9._~%+-]{2,254}$")
# Event-driven gen2 functions (an Eventarc trigger) time out after at most 540 s.
MAX_EVENT_FUNCTION_TIMEOUT = 540
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


def trigger(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """The trigger kind, and what an Eventarc trigger needs."""
    if job.trigger not in (PUSH, EVENTARC):
        yield problem("trigger", f"{job.trigger!r} is not a trigger kind", f'use "{PUSH}" or "{EVENTARC}"')
        return
    if job.trigger == PUSH and job.bucket_location:
        yield problem("bucket_location", "a push job has no bucket", "remove bucket_location=")
    if job.trigger == PUSH and job.bucket:
        yield problem(
            "bucket",
            "a push subscription delivers a topic's messages, not a bucket's events",
            f'set trigger="{EVENTARC}" for Cloud Storage events, or remove bucket=',
        )
    if job.trigger != EVENTARC:
        return
    if job.bucket and job.topic:
        yield problem("topic", "an Eventarc trigger listens to a bucket or a topic, not both", "remove one")
    if job.bucket and not BUCKET_NAME.match(job.bucket):
        yield problem(
            "bucket", f"{job.bucket!r} is not a Cloud Storage bucket name", "give the bucket's name"
        )
    yield from _bucket_location(job, problem)
    if job.timeout_seconds > MAX_EVENT_FUNCTION_TIMEOUT:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s is longer than an event-driven function may run "
            f"({MAX_EVENT_FUNCTION_TIMEOUT} s)",
            f"choose at most {MAX_EVENT_FUNCTION_TIMEOUT} s, or use the push trigger (600 s)",
        )


def _bucket_location(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """A Cloud Storage trigger must be in its bucket's location (a region, dual- or
    multi-region); a Pub/Sub trigger only in a single region, the team's."""
    if not job.bucket_location:
        return
    if not job.bucket:
        yield problem(
            "bucket_location",
            "only a Cloud Storage trigger takes its bucket's location; a Pub/Sub trigger is in a single "
            "region, the team's",
            "remove bucket_location=",
        )
    elif job.bucket_location not in locations.STORAGE_TRIGGER_LOCATIONS:
        lowered = job.bucket_location.lower()
        close = (
            f"write it in lower case, {lowered!r}"
            if lowered in locations.STORAGE_TRIGGER_LOCATIONS
            else f"use one of {closest(lowered, locations.STORAGE_TRIGGER_LOCATIONS)}"
        )
        yield problem(
            "bucket_location",
            f"{job.bucket_location!r} is not a location a Cloud Storage trigger can be in (a region, "
            f"or one of {', '.join(sorted(locations.STORAGE_TRIGGER_MULTI_REGIONS))})",
            f"give the bucket's location: {close}; if Eventarc lists it now, add it to stacks/locations.py",
        )


def push_ranges(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Pub/Sub's own limits on the settings an event job gives."""
    if not MIN_ACK_DEADLINE <= job.timeout_seconds <= MAX_ACK_DEADLINE:
        yield problem(
            "timeout_seconds",
            f"{job.timeout_seconds} s cannot be the push subscription's ack deadline, which the "
            f"stack derives from it: a push ack deadline is {MIN_ACK_DEADLINE}-{MAX_ACK_DEADLINE} s, "
            "and a push still running after it is redelivered",
            f"choose {MIN_ACK_DEADLINE}-{MAX_ACK_DEADLINE} s (split longer work into more events)",
        )
    retry: PushRetry = job.retry
    for field, value in (
        ("min_backoff_seconds", retry.min_backoff_seconds),
        ("max_backoff_seconds", retry.max_backoff_seconds),
    ):
        yield from _pubsub_range(problem, f"retry.{field}", value, 0, MAX_PUSH_BACKOFF, "backoff", " s")
    if retry.min_backoff_seconds > retry.max_backoff_seconds:
        yield problem(
            "retry.min_backoff_seconds",
            f"{retry.min_backoff_seconds} s is above max_backoff_seconds ({retry.max_backoff_seconds} s)",
            "make min_backoff_seconds <= max_backoff_seconds",
        )
    yield from _pubsub_range(
        problem,
        "retry_window_seconds",
        job.retry_window_seconds,
        MIN_RETRY_WINDOW,
        MAX_RETRY_WINDOW_SECONDS,
        "message retention",
        " s",
        " (10 minutes to 7 days)",
    )
    yield from _pubsub_range(
        problem,
        "max_delivery_attempts",
        job.max_delivery_attempts,
        MIN_DELIVERY_ATTEMPTS,
        MAX_DELIVERY_ATTEMPTS,
        "dead-letter",
    )
    if job.max_event_age_seconds < 1:
        yield problem(
            "max_event_age_seconds",
            f"{job.max_event_age_seconds} s is not a positive age",
            "give 1 or more seconds",
        )


def _pubsub_range(
    problem: ProblemAt,
    field: str,
    value: int,
    low: int,
    high: int,
    what: str,
    unit: str = "",
    note: str = "",
) -> Iterator[Problem]:
    """`value` outside Pub/Sub's `what` range `low`-`high`, with that range as the fix."""
    if not low <= value <= high:
        yield problem(
            field,
            f"{value}{unit} is outside Pub/Sub's {what} range {low}-{high}{unit}{note}",
            f"choose {low}-{high}",
        )


def event_cross_layer(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Subscription, function and ledger settings that must agree for exactly-once to hold."""
    lease = int(job.env[LEASE_ENV]) if job.env.get(LEASE_ENV, "").isdigit() else job.lease_seconds
    if lease <= job.ack_deadline_seconds:
        yield problem(
            "env",
            f"the lease ({lease} s) is not longer than the ack deadline ({job.ack_deadline_seconds} s, "
            "the timeout): Pub/Sub redelivers a push still running at its ack deadline, and that "
            "redelivery would take over the live attempt's claim and run the event twice",
            f"remove {LEASE_ENV} from env (the stack then uses timeout_seconds + "
            f"{LEASE_MARGIN_SECONDS}) or set it above {job.ack_deadline_seconds}",
        )
    if job.trigger == EVENTARC:
        yield from _eventarc_event_age(job, problem)
    else:
        yield from _push_attempts_outlast_lease(job, lease, problem)
    if job.trigger != EVENTARC and job.max_event_age_seconds > job.retry_window_seconds:
        yield problem(
            "max_event_age_seconds",
            f"{job.max_event_age_seconds} s is longer than the retry window "
            f"({job.retry_window_seconds} s): Pub/Sub drops a message at the end of its retention, "
            "so an event failing until then would vanish instead of being dead-lettered as too old",
            f"set max_event_age_seconds <= {job.retry_window_seconds} (or lengthen retry_window_seconds)",
        )
    needed = max(job.retry_window_seconds, lease)
    if job.retention_seconds <= needed:
        yield problem(
            "retention_seconds",
            f"{job.retention_seconds} s does not outlast the retry window ({job.retry_window_seconds} s) "
            f"and the lease ({lease} s): a late redelivery would find no record and run again",
            f"set retention_seconds > {needed}",
        )


def _push_attempts_outlast_lease(job: EventJob, lease: int, problem: ProblemAt) -> Iterator[Problem]:
    """A crashed attempt's push fails at once and leaves its claim leased: every redelivery
    within the lease is answered 409, so the last delivery attempt must come after the lease,
    or Pub/Sub dead-letters an event whose body never finished, with no runonce reason. Checked
    on `PushRetry.attempt_offsets_seconds`, which takes every wait as the minimum backoff."""
    reach = lease + job.retry.max_backoff_seconds
    if job.retry_window_seconds <= reach:
        # After the lease ends, the next delivery comes at most one maximum backoff later.
        yield problem(
            "retry_window_seconds",
            f"{job.retry_window_seconds} s of message retention may end before a redelivery comes "
            f"after the lease ({lease} s) of an attempt whose instance died at the first delivery: "
            f"that redelivery may wait up to retry.max_backoff_seconds ({job.retry.max_backoff_seconds} s) "
            "more, and Pub/Sub drops the message unacknowledged, with no dead letter",
            f"set retry_window_seconds above {reach}, or lower retry.max_backoff_seconds",
        )
    attempts, backoff = job.max_delivery_attempts, job.retry.min_backoff_seconds
    last = job.retry.attempt_offsets_seconds(attempts)[-1]
    if last > lease:
        return
    fixes = []
    needed_attempts = lease // backoff + 2 if backoff else MAX_DELIVERY_ATTEMPTS + 1
    if needed_attempts <= MAX_DELIVERY_ATTEMPTS:
        fixes.append(f"raise max_delivery_attempts to {needed_attempts}")
    needed_backoff = lease // (attempts - 1) + 1
    if needed_backoff <= min(MAX_PUSH_BACKOFF, job.retry.max_backoff_seconds):
        fixes.append(f"raise retry.min_backoff_seconds to {needed_backoff}")
    fixes.append(f"lower timeout_seconds (the lease is timeout + {LEASE_MARGIN_SECONDS} s)")
    yield problem(
        "max_delivery_attempts",
        f"{attempts} delivery attempts {backoff} s apart (the minimum backoff, all Pub/Sub "
        f"promises) end {last} s after the first, within the lease ({lease} s): when an attempt's "
        "instance dies, its push fails at once and every redelivery meets the held claim (409), so "
        "Pub/Sub dead-letters the event before the lease lets one take it over, with no runonce "
        "reason",
        f"make the last attempt come after {lease} s: {', or '.join(fixes)}",
    )


def _eventarc_event_age(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """Eventarc drops an event it could not deliver in 24 hours; runonce dead-letters a too old
    event only when a delivery comes after `max_event_age_seconds`, so the age leaves room for
    redeliveries before that end."""
    if job.max_event_age_seconds > EVENTARC_MAX_EVENT_AGE_SECONDS:
        yield problem(
            "max_event_age_seconds",
            f"{job.max_event_age_seconds} s is not well under the {EVENTARC_RETENTION_SECONDS} s "
            "(24 hours) Eventarc keeps an undelivered event: an event still failing then is dropped "
            "(Eventarc's trigger has no dead-letter topic) before runonce can dead-letter it as "
            "too old",
            f"set max_event_age_seconds <= {EVENTARC_MAX_EVENT_AGE_SECONDS} (23 hours, six of "
            "Eventarc's longest redelivery gaps under its retention)",
        )


def topic(job: EventJob, problem: ProblemAt) -> Iterator[Problem]:
    """A topic the job names is given by its id."""
    if job.topic and not TOPIC_ID.match(job.topic):
        yield problem(
            "topic",
            f"{job.topic!r} is not a Pub/Sub topic id",
            'give the id of a topic in the team\'s project (not the projects/P/topics/ path), or "" '
            "to let the stack create one",
        )
