"""The watchdog's pausing grant in the policy pack (policy/rules/watchdog.py): a watchdog whose
jobs have `pause_after_failures` may hold, and must hold (RO-WDG-4), a project custom role with
exactly `cloudscheduler.jobs.get` and `cloudscheduler.jobs.pause` (its case without the grant is
in tests/policy/test_rules.py); RO-WDG-1 flags that grant on a watchdog that pauses nothing, and a
role holding more. Its operators must hold, and only then may hold (RO-WDG-5), a project custom role
with exactly `cloudscheduler.jobs.get` and `cloudscheduler.jobs.enable` (`runonce resume`); the
whole pack passes a stack that pauses."""

from __future__ import annotations

import copy
import json

from policy.pack import LEAST_PRIVILEGE
from policy.synthesized import Stack
from policy.verdict import Verdict
from stacks.contract import WATCHDOG_JOBS_VARIABLE
from tests.policy.test_rules import config, drop_grants, verdicts
from tests.policy.test_watchdog_rules import PACK, function_address, grant_address

PAUSER = "watchdog_job-pauser"
RESUMER = "operators_group-ops-example-com-job-resumer"
OTHER_RESUMER = "operators_user-alex-example-com-job-resumer"


def test_the_pausers_grant_is_compliant_and_the_watchdog_can_pause(pausing):
    assert verdicts(PACK["RO-WDG-1"], pausing)[grant_address(pausing, PAUSER)] is Verdict.COMPLIANT
    assert verdicts(PACK["RO-WDG-4"], pausing)[function_address(pausing)] is Verdict.COMPLIANT


def test_a_pauser_role_holding_more_is_flagged(pausing):
    document = copy.deepcopy(pausing)
    role = config(document, "google_project_iam_custom_role", "watchdog_pauser-role")
    role["permissions"] = [*role["permissions"], "cloudscheduler.jobs.delete"]
    assert verdicts(PACK["RO-WDG-1"], document)[grant_address(document, PAUSER)] is Verdict.NON_COMPLIANT
    assert verdicts(PACK["RO-WDG-4"], document)[function_address(document)] is Verdict.NON_COMPLIANT


def test_the_pausers_grant_on_a_watchdog_that_pauses_nothing_is_flagged(pausing):
    document = copy.deepcopy(pausing)
    without_pausing(document)
    assert verdicts(PACK["RO-WDG-1"], document)[grant_address(document, PAUSER)] is Verdict.NON_COMPLIANT
    assert verdicts(PACK["RO-WDG-4"], document)[function_address(document)] is Verdict.NOT_APPLICABLE
    assert verdicts(PACK["RO-IAM-3"], document)[grant_address(document, PAUSER)] is Verdict.NON_COMPLIANT


def test_a_stack_that_pauses_passes_the_whole_pack(pausing):
    stack = Stack(pausing)
    failing = [
        (rule.id, resource.address)
        for rule in LEAST_PRIVILEGE
        for resource in stack.resources()
        if rule.check(resource, stack) is Verdict.NON_COMPLIANT
    ]
    assert failing == []


def without_pausing(document) -> None:
    """Every watched job's pause_after_failures set to 0 (the grants left as they were)."""
    env = config(document, "google_cloudfunctions2_function", "watchdog_function")["service_config"][
        "environment_variables"
    ]
    jobs = json.loads(env[WATCHDOG_JOBS_VARIABLE])
    env[WATCHDOG_JOBS_VARIABLE] = json.dumps([{**job, "pause_after_failures": 0} for job in jobs])


def test_the_operators_resumer_grants_are_compliant_and_the_operators_can_resume(pausing):
    for prefix in (RESUMER, OTHER_RESUMER):
        address = grant_address(pausing, prefix)
        for rule in ("RO-WDG-5", "RO-OPS-1", "RO-IAM-3"):
            assert verdicts(PACK[rule], pausing)[address] is Verdict.COMPLIANT, (rule, prefix)
    assert verdicts(PACK["RO-WDG-5"], pausing)[function_address(pausing)] is Verdict.COMPLIANT


def test_an_operator_without_the_resumer_grant_is_flagged_on_the_watchdog(pausing):
    document = copy.deepcopy(pausing)
    drop_grants(OTHER_RESUMER)(document)
    assert verdicts(PACK["RO-WDG-5"], document)[function_address(document)] is Verdict.NON_COMPLIANT


def test_a_resumer_role_holding_more_is_flagged(pausing):
    document = copy.deepcopy(pausing)
    role = config(document, "google_project_iam_custom_role", "operators_resumer-role")
    role["permissions"] = [*role["permissions"], "cloudscheduler.jobs.update"]
    found = verdicts(PACK["RO-WDG-5"], document)
    assert found[grant_address(document, RESUMER)] is Verdict.NON_COMPLIANT
    assert found[function_address(document)] is Verdict.NON_COMPLIANT
    assert verdicts(PACK["RO-OPS-1"], document)[grant_address(document, RESUMER)] is Verdict.NON_COMPLIANT
    assert verdicts(PACK["RO-IAM-3"], document)[grant_address(document, RESUMER)] is Verdict.NON_COMPLIANT


def test_the_resumer_grant_where_no_job_can_be_paused_is_flagged(pausing):
    document = copy.deepcopy(pausing)
    without_pausing(document)
    found = verdicts(PACK["RO-WDG-5"], document)
    assert found[grant_address(document, RESUMER)] is Verdict.NON_COMPLIANT
    assert found[grant_address(document, OTHER_RESUMER)] is Verdict.NON_COMPLIANT
    assert found[function_address(document)] is Verdict.NOT_APPLICABLE
    assert verdicts(PACK["RO-IAM-3"], document)[grant_address(document, RESUMER)] is Verdict.NON_COMPLIANT


def test_a_stack_that_pauses_nothing_and_grants_no_resumer_is_not_the_rules_concern(every):
    assert set(verdicts(PACK["RO-WDG-5"], every).values()) == {Verdict.NOT_APPLICABLE}
