"""Pausing a scheduled job that keeps failing (`Job.pause_after_failures`): the team's watchdog
counts the failed runs and pauses the Scheduler job, so the setting needs a watchdog and at
least one run (docs/schedules/pause.md)."""

from __future__ import annotations

from collections.abc import Iterator

from stacks.config.problem import Problem, ProblemAt
from stacks.config.team import Job, Team

FIELD = "pause_after_failures"


def pause(team: Team, job: Job, problem: ProblemAt) -> Iterator[Problem]:
    """`pause_after_failures` is 0 (never paused) or a number of runs, at least 1, on a team whose
    watchdog runs."""
    runs = job.pause_after_failures
    if isinstance(runs, bool) or not isinstance(runs, int):
        yield problem(
            FIELD, f"{runs!r} is not a whole number of runs", "use 0 (never paused) or a number >= 1"
        )
        return
    if runs == 0:
        return
    if runs < 0:
        yield problem(FIELD, f"{runs} is negative", "use 0 (never paused) or a number of runs, at least 1")
        return
    if not team.watchdog:
        yield problem(
            FIELD,
            "is set, but the team has no watchdog (watchdog=False): nothing would count the failed runs "
            "or pause the job",
            "set pause_after_failures=0, or remove watchdog=False from the team",
        )
