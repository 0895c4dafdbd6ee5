"""The operators' read of the watchdog's pause records in the policy pack (policy/rules/operators.py):
in a stack whose watchdog may pause a job and keeps its records in Firestore, each operator holds,
and may hold (RO-OPS-1, RO-OPS-2), `roles/datastore.viewer` conditioned on the watchdog's own
database; the grant unconditioned, on another database, as datastore.user, or in a stack that
pauses nothing is flagged. (A Valkey stack's case: tests/stacks/test_pause_records.py.)"""

from __future__ import annotations

import copy

import pytest

from policy.pack import LEAST_PRIVILEGE
from policy.synthesized import Stack
from policy.verdict import Verdict
from tests.policy.test_pause_rules import without_pausing
from tests.policy.test_rules import config, drop_grants, verdicts
from tests.policy.test_watchdog_rules import PACK, grant_address

RECORDS = "operators_group-ops-example-com-watchdog-records"
OTHER_RECORDS = "operators_user-alex-example-com-watchdog-records"
OTHER_LEDGER = "operators_user-alex-example-com-ledger"


def test_each_operators_read_of_the_pause_records_passes_the_whole_pack(pausing):
    stack = Stack(pausing)
    for prefix in (RECORDS, OTHER_RECORDS):
        address = grant_address(pausing, prefix)
        (grant,) = [resource for resource in stack.resources() if resource.address == address]
        found = {rule.id: rule.check(grant, stack) for rule in LEAST_PRIVILEGE}
        assert Verdict.NON_COMPLIANT not in found.values(), found
        assert found["RO-OPS-1"] is Verdict.COMPLIANT and found["RO-OPS-2"] is Verdict.COMPLIANT
        assert found["RO-IAM-3"] is Verdict.COMPLIANT


def test_an_operator_without_the_read_is_flagged_on_each_of_their_grants(pausing):
    document = copy.deepcopy(pausing)
    drop_grants(OTHER_RECORDS)(document)
    found = verdicts(PACK["RO-OPS-2"], document)
    assert found[grant_address(document, OTHER_LEDGER)] is Verdict.NON_COMPLIANT
    assert found[grant_address(document, RECORDS)] is Verdict.COMPLIANT


def changed(document, key: str, value) -> str:
    """The first operator's read grant with `key` set to `value` (None: removed); its address."""
    grant = config(document, "google_project_iam_member", RECORDS)
    if value is None:
        del grant[key]
    else:
        grant[key] = value
    return grant_address(document, RECORDS)


@pytest.mark.parametrize(
    ("key", "value", "rules"),
    [
        ("condition", None, ("RO-OPS-1", "RO-IAM-3")),
        ("role", "roles/datastore.user", ("RO-OPS-1",)),
        ("role", "roles/datastore.owner", ("RO-OPS-1",)),
        (
            "condition",
            {"title": "t", "expression": 'resource.name == "projects/acme-prod-1/databases/runonce"'},
            ("RO-OPS-1",),
        ),
        (
            "condition",
            {"title": "t", "expression": 'resource.name == "projects/acme-prod-1/databases/elsewhere"'},
            ("RO-OPS-1",),
        ),
    ],
    ids=["unconditioned", "user-not-viewer", "owner", "on-the-ledger", "on-another-database"],
)
def test_the_read_beyond_the_watchdogs_database_or_beyond_viewer_is_flagged(pausing, key, value, rules):
    document = copy.deepcopy(pausing)
    address = changed(document, key, value)
    for rule in rules:
        # The change alone makes the verdict: the grant as the stack makes it passes.
        assert verdicts(PACK[rule], pausing)[address] is Verdict.COMPLIANT, rule
        assert verdicts(PACK[rule], document)[address] is Verdict.NON_COMPLIANT, rule


def test_the_ledger_the_condition_of_the_flagged_case_names_is_the_stacks_ledger(pausing):
    # The "on-the-ledger" case above names the ledger the watchdog reads, not a database made up.
    grant = config(pausing, "google_project_iam_member", "operators_group-ops-example-com-ledger")
    assert grant["condition"]["expression"] == 'resource.name == "projects/acme-prod-1/databases/runonce"'


def test_the_read_in_a_stack_that_pauses_nothing_is_flagged(pausing):
    document = copy.deepcopy(pausing)
    without_pausing(document)
    assert verdicts(PACK["RO-OPS-1"], pausing)[grant_address(pausing, RECORDS)] is Verdict.COMPLIANT
    found = verdicts(PACK["RO-OPS-1"], document)
    assert found[grant_address(document, RECORDS)] is Verdict.NON_COMPLIANT
    assert found[grant_address(document, OTHER_RECORDS)] is Verdict.NON_COMPLIANT


def test_a_stack_that_pauses_nothing_needs_no_read_of_the_watchdogs_database(pausing):
    document = copy.deepcopy(pausing)
    without_pausing(document)
    drop_grants(RECORDS)(document)
    drop_grants(OTHER_RECORDS)(document)
    drop_grants("operators_group-ops-example-com-job-resumer")(document)
    drop_grants("operators_user-alex-example-com-job-resumer")(document)
    found = verdicts(PACK["RO-OPS-2"], document)
    assert found[grant_address(document, OTHER_LEDGER)] is Verdict.COMPLIANT
