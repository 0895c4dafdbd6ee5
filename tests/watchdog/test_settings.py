"""The watchdog's settings as the stack writes them into its environment: every variable missing
or wrong is a ConfigError naming it, the job and the field."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from runonce.core.errors import ConfigError
from runonce.scheduler.watchdog import WatchedJob, parse_jobs, watch_settings

pytestmark = pytest.mark.fast

JOB = {
    "job": "close",
    "scheduler_job": "orders-close",
    "schedule": "0 * * * *",
    "time_zone": "Europe/Berlin",
    "grace_seconds": 1200,
    "lookback_seconds": 86400,
    "since": "2026-11-29T00:55:07Z",
}
ENVIRON = {
    "GOOGLE_CLOUD_PROJECT": "acme-prod",
    "RUNONCE_WATCHDOG_TEAM": "orders",
    "RUNONCE_WATCHDOG_LOCATION": "europe-west1",
    "RUNONCE_WATCHDOG_LEDGER_DATABASE": "runonce",
    "RUNONCE_WATCHDOG_LEDGER_COLLECTION": "scheduler_runs",
    "RUNONCE_WATCHDOG_JOBS": json.dumps([JOB]),
}


def test_the_stacks_settings_read_as_a_watch():
    settings = watch_settings(ENVIRON)
    assert settings.ledger_database == "runonce" and settings.ledger_collection == "scheduler_runs"
    assert (settings.watch.team, settings.watch.project, settings.watch.location) == (
        "orders",
        "acme-prod",
        "europe-west1",
    )
    assert settings.watch.jobs == (
        WatchedJob(
            job="close",
            scheduler_job="orders-close",
            schedule="0 * * * *",
            time_zone="Europe/Berlin",
            grace=timedelta(seconds=1200),
            lookback=timedelta(days=1),
            since=datetime(2026, 11, 29, 0, 55, 7, tzinfo=UTC),
        ),
    )


def test_a_job_in_a_region_of_its_own_names_it():
    environ = {**ENVIRON, "RUNONCE_WATCHDOG_JOBS": json.dumps([{**JOB, "location": "europe-west2"}])}
    watch = watch_settings(environ).watch
    (job,) = watch.jobs
    assert (job.location, watch.location_of(job)) == ("europe-west2", "europe-west2")
    assert watch.scheduler_job(job) == "projects/acme-prod/locations/europe-west2/jobs/orders-close"


def test_every_missing_variable_is_named():
    environ = {k: v for k, v in ENVIRON.items() if k not in ("RUNONCE_WATCHDOG_TEAM", "GOOGLE_CLOUD_PROJECT")}
    with pytest.raises(ConfigError, match="RUNONCE_WATCHDOG_TEAM, GOOGLE_CLOUD_PROJECT set"):
        watch_settings(environ)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", r"RUNONCE_WATCHDOG_JOBS is not JSON"),
        ('{"job": "close"}', r"must be a JSON list of jobs, not dict"),
        ("[3]", r"RUNONCE_WATCHDOG_JOBS\[0\] must be an object"),
        (json.dumps([{"job": "close"}]), r"\[0\] lacks scheduler_job, schedule, time_zone"),
        (json.dumps([{**JOB, "schedule": ""}]), r"job 'close'\): schedule must be a non-empty string"),
        (json.dumps([{**JOB, "grace_seconds": "1200"}]), r"grace_seconds must be a whole number"),
        (json.dumps([{**JOB, "lookback_seconds": -1}]), r"lookback_seconds must be a whole number"),
        (json.dumps([{**JOB, "grace_seconds": True}]), r"grace_seconds must be a whole number"),
        (json.dumps([{**JOB, "since": "yesterday"}]), r"since: 'yesterday' is not an RFC 3339"),
        (json.dumps([{**JOB, "schedule": "61 * * * *"}]), r"schedule '61 \* \* \* \*' is not a cron"),
        (json.dumps([{**JOB, "time_zone": "Mars/Olympus"}]), r"time_zone 'Mars/Olympus' is not an IANA"),
        (json.dumps([{**JOB, "time_zone": "../etc"}]), r"time_zone '../etc' is not an IANA"),
        (json.dumps([{**JOB, "location": ""}]), r"job 'close'\): location, when given, must be a non-empty"),
        (json.dumps([{**JOB, "location": 2}]), r"job 'close'\): location, when given, must be a non-empty"),
    ],
)
def test_a_wrong_job_entry_names_the_job_and_the_field(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_jobs(text, "RUNONCE_WATCHDOG_JOBS")


def test_the_check_imports_no_google_library():
    def google_modules(statement: str) -> str:
        code = f"import sys; {statement}; print(sorted(m for m in sys.modules if m.startswith('google')))"
        shown = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd="functions", check=True
        )
        return shown.stdout.strip()

    # The interpreter starts with the `google` namespace packages of installed .pth files loaded.
    assert google_modules("import runonce.scheduler.watchdog") == google_modules("pass")
    assert google_modules("import runonce.store.firestore") != google_modules("pass")
