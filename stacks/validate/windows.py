"""Leases and windows: a scheduled job's lease, attempt deadline, retries and record retention
against its function timeout and its next scheduled run, the cross-layer rules exactly-once
depends on. Checked only on values inside their ranges, where the hints make sense."""

from __future__ import annotations

from collections.abc import Iterator

from runonce.contract import Overlap
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import LEASE_MARGIN_SECONDS, Job, Retry
from stacks.validate.functions import LEASE_ENV
from stacks.validate.schedules import MAX_BACKOFF, MAX_RETRY_COUNT, MIN_ATTEMPT_DEADLINE, shortest_gap_seconds

# Scheduler retries until both retry_count and max_retry_duration are used up; with a zero
# backoff and a duration that would be endless, so the replay stops here.
MAX_REPLAYED_RETRIES = 1000


def retry_offsets_seconds(retry: Retry, attempt_seconds: int = 0) -> list[int]:
    """When Scheduler retries a run, in seconds after the first attempt started, if every attempt
    takes `attempt_seconds` and then fails, ignoring the next scheduled run. Each backoff starts
    when the previous attempt ends, and retries go on until both retry_count and
    max_retry_duration (0: none) are used up (Scheduler API reference, RetryConfig)."""
    offsets: list[int] = []
    at = 0
    while len(offsets) < MAX_REPLAYED_RETRIES:
        at += attempt_seconds + retry.backoff_seconds(len(offsets) + 1)
        if retry.exhausted(len(offsets), at):
            break
        offsets.append(at)
    return offsets


def retry_window_seconds(job: Job) -> int:
    """Longest time from a run's first attempt to the end of its last retry: every attempt takes
    the whole attempt deadline before it fails and the next backoff starts."""
    offsets = retry_offsets_seconds(job.retry, job.attempt_deadline_seconds)
    return (offsets[-1] if offsets else 0) + job.attempt_deadline_seconds


def lease_seconds(job: Job) -> int:
    """The lease the job's function runs with: RUNONCE_LEASE_SECONDS from its env, else the stack's."""
    return int(job.env[LEASE_ENV]) if job.env.get(LEASE_ENV, "").isdigit() else job.lease_seconds


def grace_seconds(job: Job) -> int:
    """How long after its first attempt a run may still finish: its retry window, then a last
    claim holding it for the whole lease. The watchdog judges a run only after this."""
    return retry_window_seconds(job) + lease_seconds(job)


def cross_layer(job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """Scheduler, function and ledger settings that must agree for exactly-once to hold."""
    if job.attempt_deadline_seconds > job.timeout_seconds:
        yield problem(
            "attempt_deadline_seconds",
            f"{job.attempt_deadline_seconds} s is longer than "
            f"timeout_seconds ({job.timeout_seconds} s): Scheduler would wait for an answer the "
            "function can no longer give",
            f"set attempt_deadline_seconds <= {job.timeout_seconds}"
            if job.timeout_seconds >= MIN_ATTEMPT_DEADLINE
            else f"raise timeout_seconds to at least {job.attempt_deadline_seconds} (attempt "
            f"deadlines start at {MIN_ATTEMPT_DEADLINE} s)",
        )
    lease = lease_seconds(job)
    if lease <= job.timeout_seconds:
        yield problem(
            "env",
            f"the lease ({lease} s) is not longer than timeout_seconds "
            f"({job.timeout_seconds} s): a live attempt would lose its claim and the run would "
            "run twice",
            f"remove {LEASE_ENV} from env (the stack then uses timeout_seconds + "
            f"{LEASE_MARGIN_SECONDS}) or set it above {job.timeout_seconds}",
        )
    gap = shortest_gap_seconds(job)
    if gap:
        yield from _retries_and_next_run(job, lease, gap, problem)
    window = retry_window_seconds(job)
    needed = max(window, lease)
    if job.retention_seconds < needed:
        yield problem(
            "retention_seconds",
            f"{job.retention_seconds} s is shorter than the job's retry window "
            f"({window} s) or lease ({lease} s): a late retry would find no record and run again",
            f"set retention_seconds >= {needed}",
        )


def _retries_and_next_run(job: Job, lease: int, gap: int, problem: ProblemAt) -> Iterator[Problem]:
    """The retry window must reach past the lease (a crashed run is taken over; a `wait` run
    outlasts the run before it) and end before the next scheduled run (Scheduler may skip that
    run, or stop the retries, if they overlap)."""
    retry, deadline = job.retry, job.attempt_deadline_seconds
    if job.overlap == Overlap.WAIT:
        yield from _waiting_outlasts_the_run_before(job, lease, gap, problem)
    elif not job.next_run_catches_up:
        if lease + deadline >= gap:
            yield problem(
                "retry",
                f"no retry can both come after the lease ({lease} s, so a crashed run is taken "
                f"over) and end, {deadline} s later, before the next run {gap} s after the first "
                "attempt",
                "lower timeout_seconds (the lease is timeout + 60 s) or attempt_deadline_seconds, "
                "schedule the job less often, or, if the next run redoes the work, set "
                "next_run_catches_up=True",
            )
        else:
            before_next = [offset for offset in retry_offsets_seconds(retry) if offset < gap]
            if not before_next or before_next[-1] <= lease:
                last = (
                    f"the last retry comes {before_next[-1]} s after the first attempt"
                    if before_next
                    else "no retry comes before the next run"
                )
                yield problem(
                    "retry",
                    f"a run whose instance crashes after claiming it is never retried: its lease "
                    f"({lease} s) outlasts the retry window ({last}; the next run follows {gap} s "
                    "later)",
                    f"{_later_retry_levers(job, lease, gap)}; if the next run redoes the work, set "
                    "next_run_catches_up=True",
                )
    offsets = retry_offsets_seconds(retry, deadline)
    if offsets and offsets[-1] + deadline >= gap and not job.retries_may_skip_next_run:
        yield problem(
            "retry",
            f"when every attempt runs into its {deadline} s deadline, the last retry starts "
            f"{offsets[-1]} s after the first attempt and may run until {offsets[-1] + deadline} s, "
            f'reaching the next scheduled run {gap} s later: Google\'s "Retry jobs" '
            'page says that run "might be skipped if the retries continue through that time", '
            "and the API reference says retries stop at the next run, so either a run or a retry "
            "is lost",
            f"make the last retry end before {gap} s ({_fewer_retry_levers(retry)}), or set "
            "retries_may_skip_next_run=True if a skipped run is acceptable",
        )


def _waiting_outlasts_the_run_before(job: Job, lease: int, gap: int, problem: ProblemAt) -> Iterator[Problem]:
    """A `wait` run is answered 409 at once while the run before it holds the job, which it does
    for at most its lease, so Scheduler must still retry it after the lease, and before the next
    run, where the retries stop (Scheduler API reference, RetryConfig). The same retry also takes
    over a run whose instance crashed, so `next_run_catches_up` does not waive it."""
    before_next = [offset for offset in retry_offsets_seconds(job.retry) if offset < gap]
    if before_next and before_next[-1] > lease:
        return
    last = (
        f"its last retry comes {before_next[-1]} s after its first attempt"
        if before_next
        else f"it gets no retry before its next run, {gap} s later"
    )
    levers = (
        _later_retry_levers(job, lease, gap)
        if lease + job.attempt_deadline_seconds < gap
        else "lower timeout_seconds (the lease is timeout + 60 s) or schedule the job less often"
    )
    yield problem(
        "overlap",
        f"a run that waits is answered 409 while the run before it holds the job, for up to that "
        f"run's lease ({lease} s), but {last}: a run that arrives just after the one before it "
        "started is retried out and missed",
        f"{levers}; or use overlap=Overlap.SKIP (the run is recorded skipped) or Overlap.ALLOW",
    )


def _later_retry_levers(job: Job, lease: int, gap: int) -> str:
    """What can move a retry past the lease, leaving out settings already at their limit."""
    retry = job.retry
    levers = []
    if retry.backoff_seconds(1) >= gap - job.attempt_deadline_seconds:
        levers.append("lower retry.min_backoff_seconds")  # even the first retry is too late
    else:
        if retry.retry_count < MAX_RETRY_COUNT:
            levers.append("raise retry.retry_count")
        if retry.min_backoff_seconds < MAX_BACKOFF:
            levers.append("raise retry.min_backoff_seconds")
        if retry.max_backoff_seconds < MAX_BACKOFF:
            levers.append("raise retry.max_backoff_seconds")
    levers.append("lower timeout_seconds")
    return (
        f"make a retry come between {lease} s and {gap - job.attempt_deadline_seconds} s after "
        f"the first attempt ({', '.join(levers)})"
    )


def _fewer_retry_levers(retry: Retry) -> str:
    levers = []
    if retry.retry_count > 0:
        levers.append("lower retry.retry_count")
    if retry.max_backoff_seconds > 0:
        levers.append("lower retry.max_backoff_seconds")
    if retry.max_retry_duration_seconds > 0:
        levers.append("lower retry.max_retry_duration_seconds")
    return ", ".join(levers)
