"""Moving a deployed team from per-job accounts to the team's shared ones without losing a run.

The stacks as the previous release synthesized them (tests/stacks/fixtures/migration) are applied
with Terraform to a local state, modelled as `terraform_data` (tests/stacks/terraform_model.py),
then the migration is planned and its apply graph read: which resource waits for which. A Scheduler
job must never sign with an account, or call a function, that is already gone, nor switch to an
invoker whose grant is not yet there. Skipped where no `terraform` binary is installed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from stacks.team import TEAMS_DIR, load_team_file
from tests.stacks.conftest import synthesize
from tests.stacks.terraform_model import TERRAFORM, Plan, Workspace
from tests.stacks.test_snapshot import normalized

pytestmark = pytest.mark.skipif(TERRAFORM is None, reason="terraform is not installed (not on PATH)")

BEFORE = Path(__file__).parent / "fixtures" / "migration"
GRANT = "google_cloud_run_v2_service_iam_member"
SCHEDULER = "google_cloud_scheduler_job"
FUNCTION = "google_cloudfunctions2_function"
ACCOUNT = "google_service_account"


def before(name: str) -> dict:
    """A stack as the release with per-job accounts synthesized it."""
    return json.loads((BEFORE / name).read_text())


def example(twins: bool = False, **changes):
    """The example team; with twins, two more jobs with report's settings (they will share its
    function once sharing is on, and had functions of their own before)."""
    # The recorded state is of the example before it had an event job, a watchdog, services, an
    # App Engine job or its incremental job (catalog-sync); the migration concerns only the
    # accounts of the function jobs it had, so the team is compared without them.
    example = load_team_file(TEAMS_DIR / "example.py")
    team = replace(
        example,
        jobs=[job for job in example.jobs if job.name != "catalog-sync"],
        event_jobs=[],
        watchdog=False,
        services=[],
        service_jobs=[],
        app_engine_jobs=[],
        app_engine_location="",
    )
    if twins:
        report = team.jobs[0]
        team = replace(
            team, jobs=[*team.jobs, replace(report, name="report-eu"), replace(report, name="report-us")]
        )
    return replace(team, **changes)


def after(team, archive_dir) -> dict:
    """The team's stack as this release synthesizes it, source digests replaced as in the
    fixtures (the code did not change, only the layout)."""
    return normalized(synthesize(team, archive_dir).document)


def of(plan: Plan, kind: str) -> set[str]:
    """Every address of this type that the plan changes."""
    return {address for address in plan.actions if address.startswith(kind + ".")}


@pytest.fixture
def workspace(tmp_path):
    return Workspace(tmp_path)


def test_moving_in_one_apply_is_a_dependency_cycle(workspace, archive_dir):
    workspace.apply(before("example.json"))
    plan = workspace.plan(after(example(), archive_dir))
    # Terraform destroys a removed resource before it updates what referred to it (the old
    # invoker account before the Scheduler job leaves it), and create_before_destroy on the
    # replaced invoker grant requires the opposite: the plan cannot be applied.
    assert "Cycle" in plan.cycle
    assert "invoker-account" in plan.cycle


def test_step_one_repoints_every_job_before_its_old_grant_goes_and_deletes_no_account(workspace, archive_dir):
    workspace.apply(before("example.json"))
    plan = workspace.plan(after(example(keep_per_job_accounts=True), archive_dir))
    assert plan.cycle == ""
    # The API wait is made again: the stack enables Cloud Logging and Cloud Monitoring too.
    assert plan.changed("delete") == of(plan, GRANT) | {
        "time_sleep.iam-settled",
        "time_sleep.apis_settled_A8D1471E",
    }
    # The three invoker grants are replaced where they were (their member changes), new first.
    assert all(plan.actions[grant] == ["create", "delete"] for grant in of(plan, GRANT))
    assert plan.changed("update") >= of(plan, SCHEDULER) | of(plan, FUNCTION)
    assert not of(plan, FUNCTION) & plan.changed("delete")
    settled = "time_sleep.invoker-settled"
    for job in of(plan, SCHEDULER):
        (update,) = plan.nodes(job)
        grant = f"{GRANT}.{job.split('.')[1].replace('_job_', '_invoker_').rsplit('_', 1)[0]}"
        (created,) = [
            node for address in of(plan, GRANT) if address.startswith(grant) for node in plan.nodes(address)
        ]
        assert plan.waits_for(update, created), f"{job} switches before its new grant exists"
        assert plan.waits_for(update, plan.nodes(settled)[0]), f"{job} switches before the grant settled"
        for address in of(plan, GRANT):
            for old in plan.nodes(address, " (destroy deposed"):
                assert plan.waits_for(old, update), f"{address}'s old grant goes before {job} moved"


def test_step_two_removes_the_old_accounts_and_merged_functions_once_nothing_uses_them(
    workspace, archive_dir
):
    workspace.apply(before("example-with-twins.json"))
    workspace.apply(after(example(twins=True, keep_per_job_accounts=True), archive_dir))
    plan = workspace.plan(after(example(twins=True), archive_dir))
    assert plan.cycle == ""
    deleted = plan.changed("delete")
    retired = {address.split(".")[1] for address in of(plan, ACCOUNT) if address in deleted}
    runtimes = {name for name in retired if name.endswith("-identity-runtime-account")}
    # Each job's old build and invoker account, and the twins' runtime accounts (they run as
    # report's function's now).
    assert len(retired - runtimes) == 2 * 5
    assert runtimes == {"report-eu-identity-runtime-account", "report-us-identity-runtime-account"}
    assert {address.split(".")[1].split("-function")[0] for address in of(plan, FUNCTION) & deleted} == {
        "report-eu",
        "report-us",
    }
    for twin in ("report-eu", "report-us"):
        (job,) = [
            address for address in of(plan, SCHEDULER) if address.split(".")[1].startswith(f"{twin}-schedule")
        ]
        (function,) = [address for address in of(plan, FUNCTION) if address.split(".")[1].startswith(twin)]
        (update,) = plan.nodes(job)
        for removal in plan.nodes(function, " (destroy"):
            # The twin's own function stays until its Scheduler job calls report's function:
            # create_before_destroy, recorded in state by step one, orders it so.
            assert plan.waits_for(removal, update)


def test_the_direct_move_of_a_team_whose_jobs_merge_is_a_cycle_too(workspace, archive_dir):
    workspace.apply(before("example-with-twins.json"))
    assert "Cycle" in workspace.plan(after(example(twins=True), archive_dir)).cycle


def test_the_whole_example_stack_plans_on_the_model_from_an_empty_state(workspace, example):
    """Every resource of today's example, its App Engine job included (which waits for a data
    source: the model drops that wait, as it reads data sources as constants), plans as one first
    apply with no cycle; the model used to refuse the stack ("Invalid depends_on reference")."""
    plan = workspace.plan(example.document)
    assert not plan.cycle
    assert plan.changed("create") == {
        f"{kind}.{name}" for kind, group in example.document["resource"].items() for name in group
    }
    jobs = {address for address in plan.actions if address.startswith("google_cloud_scheduler_job.")}
    assert any("sweep" in address for address in jobs)
