"""A scheduled job's catch-up window (`Job.catch_up_seconds`): the watchdog starts a run missed
within it, so the window must open after the watchdog can judge a run missed and close before
the watchdog stops looking and before the run's record is gone (docs/stacks/schedules.md)."""

from __future__ import annotations

from collections.abc import Iterator

from stacks.config.lookback import TICK_SECONDS, first_judged_seconds, lookback_seconds
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import Job, Team
from stacks.validate.windows import grace_seconds

FIELD = "catch_up_seconds"


def catch_up(team: Team, job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """A catch-up window that is 0 (off), or opens after a run can be judged missed and closes
    within the watchdog's lookback and the run's retention, on a team whose watchdog runs."""
    window = job.catch_up_seconds
    if window == 0:
        return
    if window < 0:
        yield problem(
            FIELD, f"{window} is negative", "use 0 (the watchdog only reports) or a number of seconds"
        )
        return
    if not team.watchdog:
        yield problem(
            FIELD,
            "is set, but the team has no watchdog (watchdog=False): nothing would start a missed run",
            "set catch_up_seconds=0, or remove watchdog=False from the team",
        )
        return
    grace = grace_seconds(job)
    lookback = lookback_seconds(grace, job.retention_seconds)
    earliest = first_judged_seconds(grace)
    if window > job.retention_seconds:
        yield problem(
            FIELD,
            f"{window} s is longer than retention_seconds ({job.retention_seconds} s): a run older than "
            "its retention may have no record left, and a completed run without one looks never "
            "delivered, so it would be run again",
            f"set catch_up_seconds <= {lookback}",
        )
    elif window > lookback:
        yield problem(
            FIELD,
            f"{window} s is longer than the watchdog looks back for this job ({lookback} s: a day, "
            f"or its grace and three ticks, at most its retention): a run missed earlier is never found",
            f"set catch_up_seconds <= {lookback}",
        )
    if window <= earliest:
        yield problem(
            FIELD,
            f"{window} s ends before the watchdog can judge a run missed: a run may still finish "
            f"{grace} s after its scheduled time (its retry window and lease), and the watchdog "
            f"ticks every {TICK_SECONDS} s, so a missed run is first reported up to {earliest} s "
            "after its time, outside the window",
            f"set catch_up_seconds above {earliest}"
            + (f" (at most {lookback})" if lookback > earliest else "")
            + ", or 0",
        )
