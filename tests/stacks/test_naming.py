"""Derived resource names: prefixed by team, within each resource's limits, stable."""

from __future__ import annotations

from stacks import naming


def test_short_account_ids_read_team_job_role():
    assert naming.account_id("example", "report", "run") == "example-report-run"


def test_long_account_ids_are_shortened_stably_and_stay_distinct():
    long_job = "a-very-long-job-name-for-testing-limits"
    ids = {naming.account_id("payments", f"{long_job}-{n}", "build") for n in range(20)}
    assert len(ids) == 20
    assert all(naming.MIN_ACCOUNT_ID <= len(id) <= naming.MAX_ACCOUNT_ID for id in ids)
    assert all(naming.DNS_LABEL.match(id) and id.endswith("-build") for id in ids)
    assert naming.account_id("payments", long_job, "build") == naming.account_id(
        "payments", long_job, "build"
    )


def test_function_and_scheduler_names_are_prefixed_by_the_team():
    assert naming.function_name("payments", "settle") == "payments-settle"
    assert naming.scheduler_job_name("payments", "settle") == "payments-settle"
