"""`runonce backfill`: run every missed run of a window once, oldest first, through Cloud
Scheduler (docs/schedules/backfill.md).

A run is missed when its scheduled run key has no record (never delivered), or a record left in
progress under an ended lease (retried out), or (asked for) a failed record or one the job's
overlap policy skipped. Each is started the
way `runonce rerun` re-runs a finished run: a request in the job's re-run slot, naming the run and
the record the command saw, then Scheduler's `jobs.run`; the forced delivery that follows consumes
the request and creates (or reopens) the run's claim under its own key, recording the cause. The
slot holds one pending request, so the command starts one run at a time per job, waiting for each
to be consumed and to finish before the next. What keeps a run from running twice is the store:
a request is refused, and a consumed request starts nothing, when the run's record is no longer
what the command saw (someone ran it meanwhile), and never for a completed run.

Past ticks are computed with today's schedule, so a window that starts before the Scheduler
job's last update (`userUpdateTime`, `jobs.get`) is refused: its ticks may have had another one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from operate import actions
from operate.rerun import (
    REQUEST_TTL,
    NotDispatched,
    Refused,
    Target,
    next_run,
    waited,
)
from runonce import _clock
from runonce._instant import parse_instant
from runonce.contract import Excluded, RunStatus
from runonce.core.requests import RequestPending, RerunRefused, RunChanged
from runonce.core.settings import DEFAULT_FORCED_SKEW_SECONDS
from runonce.core.store import (
    CAUSE_FIELD,
    CAUSE_REQUEST_FIELD,
    EXPECTED_ATTEMPT_FIELD,
    EXPECTED_STATUS_FIELD,
    RERUN_OF_FIELD,
    Cause,
    RequestState,
    Store,
)
from runonce.scheduler.exclusion import included
from runonce.scheduler.expected import cron_instant, expected_times, forced_key

NEVER_DELIVERED = "never_delivered"
RETRIED_OUT = "retried_out"
FAILED = "failed"
SKIPPED = "skipped"
MAX_RUNS = 1000
"""The most runs one command starts (`--limit`)."""
POLL_SECONDS = 0.5
"""How often the command looks at the ledger while it waits."""


class NotDelivered(Exception):
    """A started run did not get going within the wait: the message says what is left where."""


@dataclass(frozen=True)
class Missed:
    """A run of the window with no completed record, as the command saw it."""

    schedule_time: datetime
    key: str
    state: str
    """`never_delivered`, `retried_out`, `failed` or `skipped`."""
    attempt_id: str | None
    status: str | None

    @property
    def rfc3339(self) -> str:
        """The run's schedule time as its record and its key write it."""
        return cron_instant(self.schedule_time).rfc3339()


@dataclass(frozen=True)
class Started:
    """What became of one missed run: `outcome` is `completed`, `failed`, `in_progress` (still
    running when the wait ended) or `skipped` (someone else ran it, or it changed); `note` says
    more."""

    missed: Missed
    outcome: str
    note: str
    request_id: str | None = None


def missed_runs(
    store: Store,
    target: Target,
    start: datetime,
    end: datetime,
    include_failed: bool,
    now: datetime,
    include_skipped: bool = False,
) -> list[Missed]:
    """The runs of `target` scheduled in (start, end] that have no completed record, oldest first:
    no record, in progress under an ended lease, or (asked for) failed or skipped by the job's
    overlap policy. Ticks the job's calendar excludes are none of them (`excluded_ticks`)."""
    times = included(target.calendar, expected_times(target.schedule, target.time_zone, start, end))
    keys = {target.run_key(moment): moment for moment in times}
    records = store.read_many(list(keys))
    found = []
    for key, moment in keys.items():
        record = records.get(key)
        state = _state(record, include_failed, include_skipped, now)
        if state is not None:
            attempt = None if record is None else record.get("attempt_id")
            status = None if record is None else record.get("status")
            found.append(Missed(moment, key, state, attempt, status))
    return found


def excluded_ticks(target: Target, start: datetime, end: datetime) -> list[tuple[datetime, Excluded]]:
    """The ticks of `target` in (start, end] its calendar excludes, oldest first, each with why
    (before or after its window, on an excluded date): backfill never starts them."""
    calendar = target.calendar
    if calendar is None:
        return []
    times = expected_times(target.schedule, target.time_zone, start, end)
    return [(moment, why) for moment in times if (why := calendar.excluded_because(moment)) is not None]


def _state(
    record: Mapping[str, Any] | None, include_failed: bool, include_skipped: bool, now: datetime
) -> str | None:
    if record is None:
        return NEVER_DELIVERED
    status = record.get("status")
    if status == RunStatus.IN_PROGRESS.value:
        lease = record.get("lease_expires")
        return RETRIED_OUT if isinstance(lease, datetime) and lease <= now else None
    if status == RunStatus.FAILED.value and include_failed:
        return FAILED
    if status == RunStatus.SKIPPED.value and include_skipped:
        return SKIPPED
    return None


def schedule_refusal(updated: datetime | None, start: datetime) -> str | None:
    """Why a window starting at `start` cannot be computed with today's schedule: the Scheduler
    job was updated at `updated`, after it (its earlier ticks may have had another schedule)."""
    if updated is None or start >= updated:
        return None
    accepted = cron_instant(updated + timedelta(seconds=1)).rfc3339()
    return (
        f"the Scheduler job was last updated at {updated.isoformat()} (its userUpdateTime), after "
        f"the window's start {cron_instant(start).rfc3339()}: runs before then may have had another "
        f"schedule, which runonce does not keep. Backfill from then on: --from {accepted}"
    )


def updated_at(job: Mapping[str, Any]) -> datetime | None:
    """The `userUpdateTime` of a Scheduler Job resource (None if it has none), in UTC."""
    text = job.get("userUpdateTime")
    if not isinstance(text, str) or not text:
        return None
    instant = parse_instant(text)
    return instant.utc + timedelta(microseconds=instant.nanos // 1000)


@dataclass
class Backfill:
    """Starts missed runs of one job one at a time: request, `dispatch` (jobs.run), wait."""

    store: Store
    target: Target
    by: str
    dispatch: Callable[[Target], None]
    wait_seconds: float
    cause: Cause = Cause.BACKFILL
    forced_skew: timedelta = timedelta(seconds=DEFAULT_FORCED_SKEW_SECONDS)
    log: Callable[[Started], None] = lambda started: None

    def run(self, missed: list[Missed]) -> list[Started]:
        """Start each of `missed` in order; what became of each. NotDispatched or NotDelivered
        stop the command (what was started so far is in the ledger)."""
        done = []
        for each in missed:
            started = self.start(each)
            self.log(started)
            done.append(started)
        return done

    def start(self, missed: Missed) -> Started:
        """Start one missed run and wait for it to finish (up to the wait)."""
        deadline = time.monotonic() + self.wait_seconds
        fields: dict[str, Any] = {
            "by": self.by,
            "schedule_time": missed.rfc3339,
            "scheduler_job": self.target.scheduler_job,
            CAUSE_FIELD: self.cause.value,
            EXPECTED_ATTEMPT_FIELD: missed.attempt_id,
            EXPECTED_STATUS_FIELD: missed.status,
        }
        while True:
            self._until_forced_run_counts(deadline)
            try:
                request = self.store.request_rerun(self.target.slot, missed.key, fields, False, REQUEST_TTL)
            except RunChanged as exc:
                return Started(missed, "skipped", str(exc))
            except RequestPending as exc:
                self._pause(deadline, f"the job's re-run slot stayed busy: {exc}")
                continue
            except RerunRefused as exc:
                return Started(missed, "skipped", str(exc))
            try:
                self.dispatch(self.target)
            except NotDispatched as exc:
                if self.store.withdraw_rerun(self.target.slot, request.request_id):
                    raise NotDispatched(str(exc), True) from None
                # Not withdrawn: a delivery took the request, so Scheduler ran the job after all
                # (only its answer was lost): go on as dispatched.
            taken = waited(self.store, request, max(0.0, deadline - time.monotonic()))
            if taken.state == RequestState.VOID.value:
                return Started(missed, "skipped", "its record changed before the delivery: not run")
            if taken.state != RequestState.CONSUMED.value and not self._ours(missed, request.request_id):
                if self.store.withdraw_rerun(self.target.slot, request.request_id):
                    raise NotDelivered(
                        f"no forced delivery of {self.target.scheduler_job} consumed the request for "
                        f"{missed.rfc3339} within {self.wait_seconds:.0f} s: withdrawn, nothing run"
                    )
                continue  # consumed (or voided) while withdrawing: look again
            return self._finished(missed, request.request_id, deadline)

    def _ours(self, missed: Missed, request_id: str) -> bool:
        """Whether the run's record says our request started it (the slot may hold a newer one)."""
        return (self.store.read(missed.key) or {}).get(CAUSE_REQUEST_FIELD) == request_id

    def _finished(self, missed: Missed, request_id: str, deadline: float) -> Started:
        """The started run once it is no longer in progress, or when the wait ends."""
        while True:
            record = self.store.read(missed.key) or {}
            status = str(record.get("status"))
            if status != RunStatus.IN_PROGRESS.value or time.monotonic() >= deadline:
                note = f"delivered (request {request_id}); {record.get('error') or status}"
                return Started(missed, status, note, request_id)
            time.sleep(POLL_SECONDS)

    def _until_forced_run_counts(self, deadline: float) -> None:
        """Wait while a forced delivery now could not start a missed run: within the forced skew
        of the next scheduled run (it would count as that run), or while the run the interval's
        forced key carried is in progress (the delivery would be taken for its retry). Refused if
        the interval's forced key holds an ordinary forced run: every delivery before the next
        scheduled time would be its duplicate."""
        while True:
            now = _clock.now()
            upcoming = next_run(self.target, now)
            if upcoming - now <= self.forced_skew:
                self._pause(deadline, "the job's next scheduled run stayed within the forced skew")
                continue
            key = forced_key(self.target.scheduler_job, upcoming, self.target.project, self.target.location)
            marker = self.store.read(key)
            if marker is None:
                return
            if not marker.get(RERUN_OF_FIELD):
                raise Refused(
                    f"a forced run of job {self.target.job!r} before {cron_instant(upcoming).rfc3339()} "
                    "has a record: Scheduler's deliveries until then carry its headers. Run the command "
                    "again after that time (what it started so far stays started)"
                )
            carried = self.store.read(marker[RERUN_OF_FIELD]) or {}
            if carried.get("status") != RunStatus.IN_PROGRESS.value:
                return
            self._pause(deadline, f"run {marker[RERUN_OF_FIELD]} (started before) stayed in progress")

    def _pause(self, deadline: float, why: str) -> None:
        if time.monotonic() >= deadline:
            raise NotDelivered(f"{why} for {self.wait_seconds:.0f} s (--wait); nothing more started")
        time.sleep(POLL_SECONDS)


def logged(target: Target, by: str) -> Callable[[Started], None]:
    """A `Backfill.log` writing one JSON line per started run on stderr (the command's change log)."""

    def log(started: Started) -> None:
        if started.request_id is None:
            return
        action = actions.entry(
            Cause.BACKFILL.value,
            by,
            {"request_id": started.request_id, "schedule_time": started.missed.rfc3339},
        )
        actions.log_change(
            f"backfill started run {started.missed.key}",
            action,
            run_key=started.missed.key,
            job=target.scheduler_job,
            missed=started.missed.state,
            outcome=started.outcome,
        )

    return log
