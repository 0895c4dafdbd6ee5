"""The watchdog's policy rules (policy/rules/watchdog.py) on the every-feature stack: its account
may read the ledger and write only its own database, and that database is not the ledger; only
because a job it watches has a catch-up window (`report`), it may also write the ledger and run
Scheduler jobs, and then it must."""

from __future__ import annotations

import copy
import json

import pytest

from policy.pack import LEAST_PRIVILEGE
from policy.synthesized import Stack
from policy.verdict import Verdict
from stacks.contract import WATCHDOG_JOBS_VARIABLE
from tests.policy.test_rules import config, named, verdicts

PACK = {rule.id: rule for rule in LEAST_PRIVILEGE}
READER = "watchdog_ledger-reader"
OWN = "watchdog_watchdog-runtime-ledger"
WRITER = "watchdog_ledger-writer"
RUNNER = "watchdog_job-runner"


def grant_address(document, prefix: str) -> str:
    return f"google_project_iam_member.{named(document, 'google_project_iam_member', prefix)}"


def function_address(document) -> str:
    kind = "google_cloudfunctions2_function"
    return f"{kind}.{named(document, kind, 'watchdog_function')}"


def without_catch_up(document) -> None:
    """Every watched job's catch-up window set to 0 in the watchdog's configuration."""
    env = config(document, "google_cloudfunctions2_function", "watchdog_function")["service_config"][
        "environment_variables"
    ]
    jobs = json.loads(env[WATCHDOG_JOBS_VARIABLE])
    assert any(job["catch_up_seconds"] for job in jobs)
    env[WATCHDOG_JOBS_VARIABLE] = json.dumps([{**job, "catch_up_seconds": 0} for job in jobs])


def flagged_once_changed(document, prefix: str, key: str, value) -> bool:
    """Whether RO-WDG-1 flags the grant `prefix` once its `key` is set to `value` (None: removed)."""
    grant = config(document, "google_project_iam_member", prefix)
    if value is None:
        del grant[key]
    else:
        grant[key] = value
    return verdicts(PACK["RO-WDG-1"], document)[grant_address(document, prefix)] is Verdict.NON_COMPLIANT


def test_the_watchdogs_four_grants_are_compliant_and_no_other_grant_is_its_concern(every):
    found = verdicts(PACK["RO-WDG-1"], every)
    mine = {grant_address(every, prefix) for prefix in (READER, OWN, WRITER, RUNNER)}
    assert {found[address] for address in mine} == {Verdict.COMPLIANT}
    judged = {address for address, verdict in found.items() if verdict is not Verdict.NOT_APPLICABLE}
    assert judged == mine


def test_the_catch_up_grants_are_flagged_once_no_job_catches_up(every):
    document = copy.deepcopy(every)
    without_catch_up(document)
    found = verdicts(PACK["RO-WDG-1"], document)
    assert found[grant_address(document, WRITER)] is Verdict.NON_COMPLIANT
    assert found[grant_address(document, RUNNER)] is Verdict.NON_COMPLIANT
    assert found[grant_address(document, READER)] is Verdict.COMPLIANT
    assert verdicts(PACK["RO-IAM-3"], document)[grant_address(document, RUNNER)] is Verdict.NON_COMPLIANT
    assert verdicts(PACK["RO-WDG-3"], document)[function_address(document)] is Verdict.NOT_APPLICABLE


def test_the_watchdogs_job_runner_is_accepted_at_project_level_only_while_it_catches_up(every):
    assert verdicts(PACK["RO-IAM-3"], every)[grant_address(every, RUNNER)] is Verdict.COMPLIANT


@pytest.mark.parametrize(
    ("prefix", "key", "value"),
    [
        (WRITER, "condition", {"title": "t", "expression": 'resource.name == "projects/p/databases/other"'}),
        (WRITER, "condition", None),  # every database of the project
        (WRITER, "role", "roles/datastore.owner"),
        (RUNNER, "role", "roles/cloudscheduler.admin"),
        (
            RUNNER,
            "condition",
            {"title": "t", "expression": 'resource.name == "projects/p/databases/runonce"'},
        ),
    ],
)
def test_a_catch_up_grant_broader_or_other_than_a_catch_up_needs_is_flagged(every, prefix, key, value):
    assert flagged_once_changed(copy.deepcopy(every), prefix, key, value)


def test_a_watchdog_that_catches_up_holds_both_grants_it_needs(every):
    assert verdicts(PACK["RO-WDG-3"], every)[function_address(every)] is Verdict.COMPLIANT


@pytest.mark.parametrize("missing", [WRITER, RUNNER])
def test_a_watchdog_that_catches_up_without_a_grant_it_needs_is_flagged(every, missing):
    document = copy.deepcopy(every)
    del document["resource"]["google_project_iam_member"][
        named(document, "google_project_iam_member", missing)
    ]
    assert verdicts(PACK["RO-WDG-3"], document)[function_address(document)] is Verdict.NON_COMPLIANT


@pytest.mark.parametrize(
    ("prefix", "key", "value"),
    [
        (READER, "role", "roles/datastore.user"),  # write access to the ledger
        (READER, "role", "roles/datastore.owner"),
        (OWN, "condition", {"title": "t", "expression": 'resource.name == "projects/p/databases/runonce"'}),
        (READER, "condition", None),  # every database of the project
    ],
)
def test_a_watchdog_grant_that_could_change_the_ledger_is_flagged(every, prefix, key, value):
    document = copy.deepcopy(every)
    without_catch_up(document)
    assert flagged_once_changed(document, prefix, key, value)


def test_any_other_role_for_the_watchdogs_account_is_flagged(every):
    document = copy.deepcopy(every)
    reader = config(document, "google_project_iam_member", READER)
    document["resource"]["google_project_iam_member"]["extra"] = {
        "project": reader["project"],
        "role": "roles/pubsub.publisher",
        "member": reader["member"],
    }
    assert verdicts(PACK["RO-WDG-1"], document)["google_project_iam_member.extra"] is Verdict.NON_COMPLIANT


def test_the_watchdog_function_has_its_own_store_and_the_read_grant(every):
    assert verdicts(PACK["RO-WDG-2"], every)[function_address(every)] is Verdict.COMPLIANT


def test_a_watchdog_writing_the_ledgers_database_is_flagged_by_both_rules(every):
    document = copy.deepcopy(every)
    without_catch_up(document)
    function = config(document, "google_cloudfunctions2_function", "watchdog_function")
    env = function["service_config"]["environment_variables"]
    env["RUNONCE_DATABASE"] = env["RUNONCE_WATCHDOG_LEDGER_DATABASE"]
    assert verdicts(PACK["RO-WDG-2"], document)[function_address(document)] is Verdict.NON_COMPLIANT
    # Its grant on "its own" database is then a write grant on the ledger.
    own = config(document, "google_project_iam_member", OWN)
    own["condition"] = config(document, "google_project_iam_member", READER)["condition"]
    assert verdicts(PACK["RO-WDG-1"], document)[grant_address(document, OWN)] is Verdict.NON_COMPLIANT


def test_a_watchdog_without_the_read_grant_is_flagged(every):
    document = copy.deepcopy(every)
    del document["resource"]["google_project_iam_member"][
        named(document, "google_project_iam_member", READER)
    ]
    assert verdicts(PACK["RO-WDG-2"], document)[function_address(document)] is Verdict.NON_COMPLIANT


def test_a_stack_without_a_watchdog_is_not_their_concern(every):
    document = copy.deepcopy(every)
    functions = document["resource"]["google_cloudfunctions2_function"]
    del functions[named(document, "google_cloudfunctions2_function", "watchdog_function")]
    stack = Stack(document)
    for rule in ("RO-WDG-1", "RO-WDG-2"):
        assert {PACK[rule].check(resource, stack) for resource in stack.resources()} == {
            Verdict.NOT_APPLICABLE
        }
