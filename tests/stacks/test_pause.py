"""`Job.pause_after_failures` in the stack: refused at synth unless it is 0 or at least 1 on a team
with a watchdog; carried to the watchdog in its job list; and only then the watchdog's account
gets a custom role holding exactly `cloudscheduler.jobs.get` and `cloudscheduler.jobs.pause`, and
each operator one holding exactly `cloudscheduler.jobs.get` and `cloudscheduler.jobs.enable`
(`runonce resume`)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cdktf import Testing as CdktfTesting

from runonce.contract import WATCHDOG_JOBS_VARIABLE
from stacks.config import defaults
from stacks.team import AppEngineJob, Service, ServiceJob
from stacks.validate import find_problems
from tests.stacks.conftest import Synthesized, synthesize
from tests.stacks.test_schedules import TEAM, fields, problems, watchdog_env, watchdog_grants

OPERATORS = ["group:ops@example.com", "user:alex@example.com"]
PAUSING = replace(
    TEAM, name="pausing", jobs=[replace(TEAM.jobs[0], pause_after_failures=3)], operators=OPERATORS
)


@pytest.fixture(scope="module")
def pausing(archive_dir) -> Synthesized:
    return synthesize(PAUSING, archive_dir)


def test_zero_and_a_positive_number_of_failed_runs_are_accepted():
    assert problems(pause_after_failures=0) == []
    assert problems(pause_after_failures=1) == []


def test_a_negative_number_of_failed_runs_is_refused_naming_the_job_and_field():
    (found,) = problems(pause_after_failures=-2)
    assert fields([found]) == [("nightly", "pause_after_failures")]
    assert found.fix == "use 0 (never paused) or a number of runs, at least 1"


def test_pausing_on_a_team_without_a_watchdog_is_refused():
    (found,) = problems(replace(TEAM, watchdog=False), pause_after_failures=3)
    assert found.field == "pause_after_failures"
    assert "watchdog=False" in found.message and found.fix.startswith("set pause_after_failures=0")


def test_a_service_jobs_setting_is_checked_on_its_scheduled_view():
    job = ServiceJob(name="close", schedule="0 7 * * *", service="api", pause_after_failures=2)
    team = replace(TEAM, jobs=[], services=[Service(name="api")], service_jobs=[job])
    assert job.scheduled(300).pause_after_failures == 2
    assert find_problems([team]) == []
    assert fields(find_problems([replace(team, watchdog=False)])) == [("close", "pause_after_failures")]


def test_the_watchdogs_job_list_carries_the_setting(pausing):
    (watched,) = json.loads(watchdog_env(pausing)[WATCHDOG_JOBS_VARIABLE])
    assert watched["pause_after_failures"] == 3


def test_only_a_watchdog_that_may_pause_gets_the_custom_role_with_exactly_get_and_pause(pausing, example):
    roles = {
        address: role
        for address, role in pausing.resources("google_project_iam_custom_role").items()
        if address.startswith("watchdog")
    }
    (role,) = roles.values()
    assert role["permissions"] == ["cloudscheduler.jobs.get", "cloudscheduler.jobs.pause"]
    assert role["role_id"] == "runonce_pausing_pauser"
    (address,) = roles
    granted = [role for _, role, _ in watchdog_grants(pausing)]
    assert f"${{google_project_iam_custom_role.{address}.name}}" in granted
    assert "roles/cloudscheduler.admin" not in granted
    assert example.resources("google_project_iam_custom_role") == {}
    assert CdktfTesting.to_have_resource_with_properties(
        pausing.json, "google_project_iam_custom_role", {"project": PAUSING.project}
    )


def test_the_stacks_iam_wait_waits_for_the_pausers_grant(pausing):
    settled = pausing.resources("time_sleep")["iam-settled"]
    waited = {address.rsplit("_", 1)[0] for address in settled["depends_on"]}
    assert "google_project_iam_member.watchdog_job-pauser" in waited


def resumer_grants(synth: Synthesized) -> dict[str, str]:
    """The role of each project grant to an operator, by operator, of the resumer grants only."""
    return {
        grant["member"]: grant["role"]
        for address, grant in synth.resources("google_project_iam_member").items()
        if address.rsplit("_", 1)[0].endswith("-job-resumer")
    }


def test_each_operator_of_a_team_that_may_pause_gets_a_resumer_role_with_exactly_get_and_enable(pausing):
    (address,) = [
        name for name in pausing.resources("google_project_iam_custom_role") if name.startswith("operators")
    ]
    role = pausing.resources("google_project_iam_custom_role")[address]
    assert role["permissions"] == ["cloudscheduler.jobs.get", "cloudscheduler.jobs.enable"]
    assert list(defaults.RESUMER_PERMISSIONS) == role["permissions"]
    assert role["role_id"] == "runonce_pausing_resumer"
    # As the watchdog's pauser role: created after the IAM API is enabled.
    assert any("google_project_service" in dependency for dependency in role["depends_on"])
    reference = f"${{google_project_iam_custom_role.{address}.name}}"
    assert resumer_grants(pausing) == dict.fromkeys(OPERATORS, reference)
    for operator in OPERATORS:
        assert CdktfTesting.to_have_resource_with_properties(
            pausing.json,
            "google_project_iam_member",
            {"project": PAUSING.project, "role": reference, "member": operator},
        )
    assert CdktfTesting.to_have_resource_with_properties(
        pausing.json,
        "google_project_iam_custom_role",
        {"role_id": "runonce_pausing_resumer", "project": PAUSING.project},
    )
    grants = pausing.resources("google_project_iam_member").values()
    assert not any("condition" in grant for grant in grants if grant["role"] == reference)


def test_operators_of_a_team_whose_jobs_are_never_paused_get_no_resumer_role(archive_dir):
    synth = synthesize(replace(PAUSING, jobs=[replace(PAUSING.jobs[0], pause_after_failures=0)]), archive_dir)
    assert synth.resources("google_project_iam_custom_role") == {}
    assert resumer_grants(synth) == {}
    assert not CdktfTesting.to_have_resource(synth.json, "google_project_iam_custom_role")


@pytest.mark.parametrize("kind", ["service", "app-engine"])
def test_a_pausable_service_or_app_engine_job_gives_the_operators_the_resumer_role(kind, archive_dir):
    if kind == "service":
        jobs = {
            "services": [Service(name="api")],
            "service_jobs": [
                ServiceJob(name="close", schedule="0 7 * * *", service="api", pause_after_failures=2)
            ],
        }
    else:
        jobs = {
            "app_engine_location": "europe-west2",
            "app_engine_jobs": [
                AppEngineJob(
                    name="close", schedule="0 7 * * *", relative_uri="/close", pause_after_failures=2
                )
            ],
        }
    team = replace(TEAM, jobs=[], operators=OPERATORS, **jobs)
    assert find_problems([team]) == []
    synth = synthesize(team, archive_dir)
    assert set(resumer_grants(synth)) == set(OPERATORS)
