"""The deployed sandbox team's Google API targets, through the stacks: a Cloud Run job, a
workflow and a Cloud Build trigger, each started once per run even when the run's Scheduler job
is forced twice (the second forced run carries the same ScheduleTime, so it is the same run)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from runonce._instant import parse_instant
from runonce.targets import LABEL_KEY, SUBSTITUTION, BuildTrigger
from tests.sandbox import teams
from tests.sandbox.cloud import answered, force_run, job_executions, workflow_executions
from tests.sandbox.variables import BUILD_TRIGGER_VARIABLE
from tests.sandbox.waiting import wait_for

# A fresh proxy's first request includes a cold start, and starting the target takes a while.
STARTED_WITHIN = 5 * 60
# After the second forced run: time for a second start, if one were made, to show.
SECOND_START_WITHIN = 2 * 60
CLOCK_MARGIN = timedelta(minutes=1)


def created_since(items: list[dict], since: datetime, field: str = "createTime") -> list[dict]:
    """The executions or builds created (or, for workflow executions, started) at or after `since`."""
    return [item for item in items if parse_instant(item[field]).utc >= since]


def forced_twice(session, team, job: str, starts: Callable[[], list[dict]]) -> tuple[list[dict], list[dict]]:
    """Force the job's run and wait for `starts` to show a start, then force it again: the starts
    seen after the first forced run, and after the second."""
    force_run(session, team.project, team.region, team.name, job)
    first = wait_for(starts, bool, within=STARTED_WITHIN)
    if first:
        force_run(session, team.project, team.region, team.name, job)
        time.sleep(SECOND_START_WITHIN)
    return first, starts()


@pytest.mark.sandbox
def test_a_cloud_run_job_run_forced_twice_executes_once(deployed, sandbox_team, sandbox_place, session):
    since = datetime.now(UTC) - CLOCK_MARGIN

    def executions() -> list[dict]:
        return created_since(job_executions(session, sandbox_place.target_job), since)

    first, after = forced_twice(session, sandbox_team, teams.RUN_JOB, executions)
    assert first, f"no execution of {sandbox_place.target_job} within {STARTED_WITHIN} s of the forced run"
    assert [execution["name"] for execution in after] == [first[0]["name"]]


@pytest.mark.sandbox
def test_a_workflow_run_forced_twice_starts_one_execution(deployed, sandbox_team, sandbox_place, session):
    since = datetime.now(UTC) - CLOCK_MARGIN

    def labelled() -> list[dict]:
        executions = created_since(workflow_executions(session, sandbox_place.workflow), since, "startTime")
        return [execution for execution in executions if LABEL_KEY in (execution.get("labels") or {})]

    first, after = forced_twice(session, sandbox_team, teams.WORKFLOW, labelled)
    # A 403 on the start (the proxy's role on the project) fails the run: no execution at all.
    assert first, f"no execution of {sandbox_place.workflow} within {STARTED_WITHIN} s of the forced run"
    assert [execution["name"] for execution in after] == [first[0]["name"]]


@pytest.mark.sandbox(needs=(BUILD_TRIGGER_VARIABLE,))
def test_a_build_trigger_run_forced_twice_builds_once(deployed, sandbox_team, session):
    [job] = [job for job in sandbox_team.jobs if job.name == teams.BUILD]
    assert job.target is not None
    # The listing the proxy itself reads (builds.list of the trigger); the key is matched here.
    listing = BuildTrigger(job.target.trigger).lookup("")
    since = datetime.now(UTC) - CLOCK_MARGIN

    def keyed_builds() -> list[dict]:
        answer = answered(session.get(listing.url, params=listing.params, timeout=60))
        builds = created_since(answer.get("builds", []), since)
        return [build for build in builds if (build.get("substitutions") or {}).get(SUBSTITUTION)]

    first, after = forced_twice(session, sandbox_team, teams.BUILD, keyed_builds)
    # Without actAs on the trigger's own account the run is refused and no build exists.
    assert first, f"no build of {job.target.trigger} within {STARTED_WITHIN} s of the forced run"
    assert [build["id"] for build in after] == [first[0]["id"]]
