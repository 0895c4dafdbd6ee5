"""The team file's alert settings, validated at synth time (stacks/validate/alerts.py): each
mistake is reported with the team, the field and the fix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stacks.config.team_files import read_team_file
from stacks.team import AlertThresholds, EventJob, Job, Team
from stacks.validate import find_problems
from stacks.validate.alerts import MAX_FUNCTIONS

TEAM = Team(
    name="acme",
    project="acme-prod-1",
    region="europe-west1",
    jobs=[Job(name="report", schedule="0 3 * * *", source="report")],
    event_jobs=[EventJob(name="orders", source="orders_events", timeout_seconds=60)],
    alert_emails=["oncall@example.com"],
)


def problems(**changes) -> list[tuple[str, str, str]]:
    return [(p.field, p.message, p.fix) for p in find_problems([replace(TEAM, **changes)])]


def test_a_team_with_an_email_or_a_channel_is_valid():
    assert problems() == []
    assert problems(alert_emails=[], notification_channels=["acme on-call (PagerDuty)"]) == []


def test_a_team_whose_alerts_reach_no_one_is_refused_with_the_fix():
    ((field, message, fix),) = problems(alert_emails=[])
    assert field == "alerts"
    assert "notify no one" in message
    assert "alert_emails=" in fix and "notification_channels=" in fix and "alerts=False" in fix


def test_alerts_false_on_purpose_needs_no_channel():
    assert problems(alert_emails=[], alerts=False) == []


def test_channels_given_with_alerts_false_are_refused():
    ((field, message, _),) = problems(alerts=False)
    assert field == "alerts" and "nothing would notify them" in message


def test_a_channel_given_by_its_full_name_is_refused_with_the_command_that_prints_its_display_name():
    name = "projects/acme-prod-1/notificationChannels/123"
    ((field, message, fix),) = problems(notification_channels=[name])
    assert field == "notification_channels[0]"
    assert "full name" in message and "display name" in message
    assert f"gcloud beta monitoring channels describe {name}" in fix


@pytest.mark.parametrize("display_name", ["", "  ", 'the "on-call" channel', "a\\b", "two\nlines", "x" * 513])
def test_a_display_name_the_channel_lookup_cannot_filter_by_is_refused(display_name):
    ((field, message, _),) = problems(notification_channels=[display_name])
    assert field == "notification_channels[0]" and "cannot name a channel" in message


def test_an_entry_that_is_not_one_address_is_refused():
    ((field, message, _),) = problems(alert_emails=["a@example.com, b@example.com"])
    assert field == "alert_emails[0]" and "not one e-mail address" in message
    ((field, _, _),) = problems(alert_emails=["oncall"])
    assert field == "alert_emails[0]"


def test_a_repeated_address_is_refused():
    ((field, message, fix),) = problems(alert_emails=["oncall@example.com", "oncall@example.com"])
    assert (field, fix) == ("alert_emails", "list each one once")
    assert "listed twice" in message


def test_thresholds_must_be_whole_minutes_in_range():
    found = problems(alert_thresholds=AlertThresholds(sustained_seconds=90, notification_period_seconds=0))
    assert [field for field, _, _ in found] == [
        "alert_thresholds.sustained_seconds",
        "alert_thresholds.notification_period_seconds",
    ]
    assert "multiple of 60" in found[0][2]
    assert problems(alert_thresholds=AlertThresholds(sustained_seconds=7200)) != []
    assert (
        problems(alert_thresholds=AlertThresholds(sustained_seconds=3600, notification_period_seconds=86400))
        == []
    )


def test_a_threshold_of_the_wrong_type_is_named_in_the_team_file(tmp_path: Path):
    path = tmp_path / "acme.py"
    path.write_text(
        "from stacks.team import AlertThresholds, Job, Team\n"
        "team = Team(name='acme', project='acme-prod-1', region='europe-west1',\n"
        "    jobs=[Job(name='report', schedule='0 3 * * *', source='report')],\n"
        "    alert_emails=['oncall@example.com'],\n"
        "    alert_thresholds=AlertThresholds(sustained_seconds='300'))\n"
    )
    _, found = read_team_file(path)
    (problem,) = found
    assert problem.field == "alert_thresholds.sustained_seconds"
    assert "'300' is a str" in problem.message


def test_a_team_whose_log_filters_would_pass_cloud_loggings_limit_is_refused():
    jobs = [
        Job(name=f"job-{n:03d}", schedule=f"{n % 60} * * * *", source="report") for n in range(MAX_FUNCTIONS)
    ]
    quotas = {"service_accounts": 1000}
    assert "jobs" not in [
        field for field, _, _ in problems(jobs=jobs[:-1], share_functions=False, quotas=quotas)
    ]
    found = problems(jobs=jobs, share_functions=False, quotas=quotas)
    ((_, message, fix),) = [problem for problem in found if problem[0] == "jobs"]
    assert f"{MAX_FUNCTIONS + 1} functions" in message and "20000 characters" in message
    assert "share_functions=True" in fix
