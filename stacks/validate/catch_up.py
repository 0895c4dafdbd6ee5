"""A scheduled job's catch-up window (`Job.catch_up_seconds`): the watchdog starts a run missed
within it, so the window must open after the watchdog can judge a run missed and close before
the watchdog stops looking and before the run's record is gone, and the forced run that carries
a catch-up must be one the library can tell from the scheduled run (docs/stacks/schedules.md)."""

from __future__ import annotations

from collections.abc import Iterator

from runonce.core.settings import DEFAULT_FORCED_SKEW_SECONDS
from stacks.config.lookback import TICK_SECONDS, first_judged_seconds, lookback_seconds
from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import Job, Team
from stacks.validate.schedules import shortest_gap_seconds
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
    gap = shortest_gap_seconds(job)
    if gap is not None and gap <= DEFAULT_FORCED_SKEW_SECONDS:
        yield problem(
            FIELD,
            f"the job runs {gap} s apart: a catch-up reaches the function as a forced run, which "
            f"carries the job's next scheduled time, at most {gap} s ahead, and the library tells a "
            f"forced run from the scheduled one only when that time is more than "
            f"{DEFAULT_FORCED_SKEW_SECONDS} s ahead (docs/library.md, Forced runs): every catch-up "
            "would be taken for the next scheduled run",
            f"schedule the job more than {DEFAULT_FORCED_SKEW_SECONDS} s apart, or set catch_up_seconds=0",
        )
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
