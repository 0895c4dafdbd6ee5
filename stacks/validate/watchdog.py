"""The team's watchdog (`Team.watchdog`): the names it takes must be free, its database id valid."""

from __future__ import annotations

from collections.abc import Iterator

from stacks import naming
from stacks.config.problem import Problem
from stacks.config.team import Team
from stacks.validate.team import DATABASE_ID


def watchdog(team: Team) -> Iterator[Problem]:
    """A watched team has no job named like the watchdog and room for the watchdog's database id."""
    if not team.watched:
        return
    jobs = (team.jobs, team.event_jobs, team.service_jobs, team.app_engine_jobs)
    for name in [job.name for kind in jobs for job in kind]:
        if name == naming.WATCHDOG:
            yield Problem(
                team.name,
                name,
                "name",
                f"{naming.WATCHDOG!r} names the team's watchdog (its function "
                f"{naming.function_name(team.name, naming.WATCHDOG)!r}, Scheduler job and account)",
                "give the job another name, or set watchdog=False on the team",
            )
    database = naming.watchdog_database(team.database)
    if DATABASE_ID.match(team.database) and not DATABASE_ID.match(database):
        longest = 63 - len(database) + len(team.database)
        yield Problem(
            team.name,
            None,
            "database",
            f"the watchdog's own database {database!r} is longer than Firestore's 63 characters",
            f"use a database id of at most {longest} characters, or set watchdog=False on the team",
        )
