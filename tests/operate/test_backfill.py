"""`runonce backfill` end to end (docs/schedules/backfill.md), black box: the command (in this process, or two
of it at once as processes) against the real Firestore emulator and the Google API stand-in, whose
`jobs.run` has a forced delivery sent, as Cloud Scheduler does, to a pool of real
functions-framework instances serving a decorated job that records every execution of its body.

Each test has a team of its own with an hourly job on the real clock; its last six hours hold
runs that completed, failed, were retried out (left in progress under an ended lease) or were
never delivered.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner, Result

from emulator.googleapis import Fault, GoogleApisStandIn
from localscheduler.hosts.pool import InstancePool
from operate.cli import runonce as command_group
from operate.rerun import SCHEDULER_URL_VARIABLE
from runonce.contract import ACTIONS_FIELD, STORE_VARIABLE
from runonce.core.store import (
    CAUSE_BY_FIELD,
    CAUSE_FIELD,
    CAUSE_REQUEST_FIELD,
    REQUEST_STATE_FIELD,
    Claim,
    Store,
    StoredResult,
)
from runonce.scheduler.expected import expected_times, next_time, scheduled_key
from runonce.scheduler.keys import rerun_slot
from stacks.naming import scheduler_job_name
from stacks.team import REPO_ROOT
from tests.conftest import PROJECT, clear_of_the_next_tick
from tests.operate.conftest import ON_BOTH_STORES

REGION = "europe-west1"
DATABASE = "runonce-backfill"
SCHEDULE = "0 * * * *"
JOB = "hourly"
SOURCE = Path(__file__).with_name("backfill_job") / "main.py"
TEAM_FILE = """
from stacks.team import Job, Team

team = Team(
    name="{team}",
    project="{project}",
    region="{region}",
    database="{database}",
    collection="{collection}",
    jobs=[Job(name="hourly", description="Hourly report", schedule="0 * * * *", source="report")],
)
"""


@dataclass
class Setup:
    """What every test shares: the run store (Firestore's ledger collection, or a Valkey server's
    records under that name), the executions collection and the instances."""

    collection: str
    executions: str
    pool: InstancePool
    client: Any
    store_url: str | None
    """RUNONCE_STORE of the instances and the command: None on Firestore."""
    answers: list[Any] = field(default_factory=list)


@pytest.fixture(scope="module", params=ON_BOTH_STORES)
def setup(request, firestore_emulator, tmp_path_factory) -> Iterator[Setup]:
    """Every test here runs with the team's runs on Firestore and on Valkey (the instances and the
    command given RUNONCE_STORE, as a team's functions and operators are)."""
    from google.cloud import firestore

    collection, executions = f"backfill_{uuid.uuid4().hex[:10]}", f"executions_{uuid.uuid4().hex[:10]}"
    env = {
        "FIRESTORE_EMULATOR_HOST": firestore_emulator.host,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "RUNONCE_DATABASE": DATABASE,
        "RUNONCE_COLLECTION": collection,
        "BACKFILL_EXECUTIONS": executions,
    }
    url = None
    if request.param == "valkey":
        url = f"valkey://127.0.0.1:{request.getfixturevalue('valkey_server').port}"
        env[STORE_VARIABLE] = url
    pool = InstancePool("backfill", SOURCE, "handle", 2, env, tmp_path_factory.mktemp("instances"))
    pool.start()
    yield Setup(collection, executions, pool, firestore.Client(project=PROJECT, database=DATABASE), url)
    pool.stop()


@dataclass
class Team:
    """One test's team: its name, Scheduler job, ledger store and the six hours of runs."""

    name: str
    scheduler_job: str
    folder: Path
    store: Any
    ticks: list[datetime]
    store_url: str | None
    """RUNONCE_STORE naming its Valkey server; None on Firestore."""

    def key(self, moment: datetime) -> str:
        return scheduled_key(self.scheduler_job, moment, PROJECT, REGION)

    @property
    def window(self) -> tuple[str, ...]:
        """`--from` and `--to` naming exactly the six ticks (`--since` would move with the clock)."""
        first, last = (moment.strftime("%Y-%m-%dT%H:%M:%SZ") for moment in (self.ticks[0], self.ticks[-1]))
        return ("--from", first, "--to", last)

    @property
    def slot(self) -> str:
        return rerun_slot(PROJECT, REGION, self.scheduler_job)


def write_team_file(tmp_path: Path, collection: str, database: str = DATABASE) -> tuple[str, Path]:
    """A new team's name and the folder holding its team file (`TEAM_FILE`, its runs in `database`
    and `collection`)."""
    name = f"t{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "teams"
    folder.mkdir()
    (folder / f"{name}.py").write_text(
        TEAM_FILE.format(team=name, project=PROJECT, region=REGION, database=database, collection=collection)
    )
    return name, folder


@pytest.fixture
def team(setup, tmp_path) -> Team:
    from runonce.store.firestore import Ledger, LedgerStore
    from runonce.store.valkey import connect

    name, folder = write_team_file(tmp_path, setup.collection)
    lease, retention = timedelta(seconds=1), timedelta(days=7)
    clear_of_the_next_tick(SCHEDULE, "UTC", timedelta(minutes=4))  # its forced deliveries
    if setup.store_url is None:
        store: Store = LedgerStore(Ledger(setup.client, setup.collection, lease, retention))
    else:
        store = connect(setup.store_url, setup.collection, lease, retention)
    now = datetime.now(UTC)
    return Team(
        name,
        scheduler_job_name(name, JOB),
        folder,
        store,
        expected_times(SCHEDULE, "UTC", now - timedelta(hours=6), now),
        setup.store_url,
    )


@pytest.fixture
def scheduler(setup, team) -> Iterator[GoogleApisStandIn]:
    """Cloud Scheduler's API: the job resource (`jobs.get`), and `jobs.run`, which has the forced
    delivery (ScheduleTime: the job's next scheduled time) sent to the instances in the
    background, as Scheduler dispatches it after answering."""
    stand_in = GoogleApisStandIn().start()
    job_name = f"projects/{PROJECT}/locations/{REGION}/jobs/{team.scheduler_job}"
    stand_in._store(
        {
            "name": job_name,
            "schedule": SCHEDULE,
            "state": "ENABLED",  # as Scheduler answers every job's `jobs.get`
            "userUpdateTime": "2026-01-01T00:00:00.123456Z",
        }
    )

    def deliver() -> None:
        moment = next_time(SCHEDULE, "UTC", datetime.now(UTC))
        headers = {
            "User-Agent": "Google-Cloud-Scheduler",
            "X-CloudScheduler": "true",
            "X-CloudScheduler-JobName": team.scheduler_job,
            "X-CloudScheduler-ScheduleTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "X-Runonce-Project": PROJECT,
            "X-Runonce-Location": REGION,
        }
        setup.answers.append(setup.pool.post("", headers, deadline=60, wait=60))

    stand_in.on_start = lambda operation: threading.Thread(target=deliver, daemon=True).start()
    stand_in.deliver = deliver  # type: ignore[attr-defined]  # for a test that delivers before answering
    yield stand_in
    stand_in.stop()


def _environment(team: Team, scheduler: GoogleApisStandIn) -> dict[str, str | None]:
    """The command's variables: RUNONCE_STORE as the team's instances have it (unset on Firestore)."""
    return {
        SCHEDULER_URL_VARIABLE: scheduler.url,
        "RUNONCE_TEAMS_DIR": str(team.folder),
        STORE_VARIABLE: team.store_url,
    }


@pytest.fixture
def backfill(team, scheduler) -> Callable[..., Result]:
    """`runonce backfill --team T --job hourly ...` in this process."""

    def invoke(*extra: str) -> Result:
        arguments = ["backfill", "--team", team.name, "--job", JOB, "--by", "ops@example.com", *extra]
        return CliRunner().invoke(command_group, arguments, env=_environment(team, scheduler))

    return invoke


def _seed(team: Team) -> dict[str, str]:
    """The six ticks' runs: completed, retried out, never delivered, failed, never delivered,
    completed (oldest first); the state of each, by run key."""
    states = ["completed", "retried_out", "never_delivered", "failed", "never_delivered", "completed"]
    assert len(team.ticks) == len(states)
    for moment, state in zip(team.ticks, states, strict=True):
        if state == "never_delivered":
            continue
        claim = team.store.claim(team.key(moment), {"job": team.scheduler_job, "forced": False})
        assert isinstance(claim, Claim)
        if state == "completed":
            assert team.store.complete(claim, StoredResult.of({"seeded": True})) is not None
        elif state == "failed":
            assert team.store.fail(claim, "seeded failure")
    time.sleep(1.2)  # the retried-out run's 1 s lease ends
    return {team.key(moment): state for moment, state in zip(team.ticks, states, strict=True)}


def _executions(setup: Setup, team: Team) -> Counter[str]:
    """How many times each of the team's runs ran its body."""
    keys = {team.key(moment) for moment in team.ticks}
    found = Counter(doc.to_dict()["run_key"] for doc in setup.client.collection(setup.executions).stream())
    return Counter({key: count for key, count in found.items() if key in keys})


def _missing(states: dict[str, str], *kinds: str) -> set[str]:
    return {key for key, state in states.items() if state in kinds}


def test_a_backfill_runs_each_never_delivered_and_retried_out_run_once_oldest_first(
    setup, team, backfill, scheduler
):
    states = _seed(team)
    result = backfill(*team.window)
    assert result.exit_code == 0, result.output
    wanted = _missing(states, "never_delivered", "retried_out")
    assert _executions(setup, team) == Counter(dict.fromkeys(wanted, 1))
    assert len(scheduler.starts()) == 3
    ordered = [team.key(moment) for moment in team.ticks if team.key(moment) in wanted]
    started = sorted(wanted, key=lambda key: team.store.read(key)["claimed_at"])
    assert started == ordered
    for key in wanted:
        record = team.store.read(key)
        assert (record["status"], record[CAUSE_FIELD], record[CAUSE_BY_FIELD]) == (
            "completed",
            "backfill",
            "ops@example.com",
        )
        assert record[ACTIONS_FIELD][-1]["action"] == "backfill"
        assert record[CAUSE_REQUEST_FIELD] in record[ACTIONS_FIELD][-1]["detail"]
    failed = _missing(states, "failed").pop()
    assert team.store.read(failed)["status"] == "failed"  # not asked for


def test_a_second_backfill_of_the_same_window_starts_nothing(setup, team, backfill, scheduler):
    _seed(team)
    assert backfill(*team.window).exit_code == 0
    calls = len(scheduler.starts())
    again = backfill(*team.window)
    assert again.exit_code == 0, again.output
    assert "0 missed, 0 started" in again.output
    assert len(scheduler.starts()) == calls
    assert set(_executions(setup, team).values()) == {1}


def test_include_failed_runs_the_failed_run_again_once(setup, team, backfill):
    states = _seed(team)
    result = backfill(*team.window, "--include-failed")
    assert result.exit_code == 0, result.output
    wanted = _missing(states, "never_delivered", "retried_out", "failed")
    assert _executions(setup, team) == Counter(dict.fromkeys(wanted, 1))


def test_two_backfills_at_once_run_each_missed_run_once(setup, team, scheduler):
    states = _seed(team)
    env = {
        **os.environ,
        **{name: value for name, value in _environment(team, scheduler).items() if value is not None},
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "functions")]),
    }
    arguments = ["backfill", "--team", team.name, "--job", JOB, *team.window, "--wait", "120"]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "operate", *arguments, "--by", who],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("ana@example.com", "bo@example.com")
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    wanted = _missing(states, "never_delivered", "retried_out")
    assert _executions(setup, team) == Counter(dict.fromkeys(wanted, 1))
    starters = {team.store.read(key)[CAUSE_BY_FIELD] for key in wanted}
    assert starters <= {"ana@example.com", "bo@example.com"}
    # Each lists what is missed when it starts (the other may have run some already): together
    # they started each missed run exactly once.
    started = [re.search(r"\d missed, (\d) started", out) for out, _ in outputs]
    assert all(started), outputs
    assert sum(int(found.group(1)) for found in started if found) == 3, outputs


def test_a_dry_run_lists_the_missed_runs_and_changes_nothing(setup, team, backfill, scheduler):
    states = _seed(team)
    before = {key: team.store.read(key) for key in states}
    result = backfill(*team.window, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "3 missed; would start 3" in result.output
    assert result.output.count("never_delivered") == 2 and result.output.count("retried_out") == 1
    assert scheduler.starts() == []
    assert {key: team.store.read(key) for key in states} == before
    assert team.store.read(team.slot) is None
    assert _executions(setup, team) == Counter()
    since = backfill("--since", "6h", "--dry-run")  # the window ends now: the same runs, or a new one
    assert since.exit_code == 0 and since.output.count("retried_out") == 1, since.output
    assert scheduler.starts() == [] and team.store.read(team.slot) is None


def test_limit_bounds_how_many_runs_it_starts(setup, team, backfill):
    states = _seed(team)
    result = backfill(*team.window, "--limit", "1")
    assert result.exit_code == 0, result.output
    [oldest] = [key for key in states if states[key] in ("never_delivered", "retried_out")][:1]
    assert _executions(setup, team) == Counter({oldest: 1})


def test_a_window_starting_before_the_jobs_last_update_is_refused_naming_the_from_to_use(
    team, backfill, scheduler
):
    _seed(team)
    updated = datetime.now(UTC) - timedelta(hours=2)
    job_name = f"projects/{PROJECT}/locations/{REGION}/jobs/{team.scheduler_job}"
    scheduler._store({"name": job_name, "userUpdateTime": updated.isoformat().replace("+00:00", "Z")})
    result = backfill(*team.window)
    assert result.exit_code == 2
    assert "userUpdateTime" in result.output and "--from " in result.output
    assert "nothing changed" in result.output
    assert scheduler.starts() == []
    assert team.store.read(team.slot) is None


def test_a_refused_jobs_run_withdraws_the_request_and_exits_1(setup, team, backfill, scheduler):
    _seed(team)
    scheduler.inject(Fault("fail", "POST", ":run", status=403))
    result = backfill(*team.window)
    assert result.exit_code == 1
    assert "withdrawn" in result.output
    assert team.store.read(team.slot)[REQUEST_STATE_FIELD] == "withdrawn"
    assert _executions(setup, team) == Counter()


@pytest.mark.parametrize(
    ("arguments", "fix"),
    [
        ((), "--since 2d, or --from"),
        (("--since", "2h", "--from", "2026-11-29T03:00:00Z"), "not both"),
        (("--from", "yesterday"), "--from"),
        (("--from", "2099-01-01T00:00:00Z"), "--from must be before --to"),
        (("--since", "2h", "--to", "2099-01-01T00:00:00Z"), "future"),
    ],
)
def test_bad_windows_exit_2_naming_the_option(backfill, scheduler, arguments, fix):
    result = backfill(*arguments)
    assert result.exit_code == 2
    assert fix in result.output
    assert scheduler.starts() == []


def test_runs_and_show_list_backfilled_runs_like_any_other_with_their_cause(team, backfill, scheduler):
    states = _seed(team)
    assert backfill(*team.window).exit_code == 0
    env = _environment(team, scheduler)
    listed = CliRunner().invoke(
        command_group, ["runs", "--team", team.name, "--job", JOB, "--since", "7h", "--json"], env=env
    )
    assert listed.exit_code == 0, listed.output
    rows = {row["key"]: row for row in map(json.loads, listed.output.splitlines())}
    for key, state in states.items():
        expected = "backfill" if state in ("never_delivered", "retried_out") else ""
        assert (rows[key]["cause"], rows[key]["status"]) == (expected, "completed" if expected else state)
    table = CliRunner().invoke(command_group, ["runs", "--team", team.name, "--since", "7h"], env=env)
    assert table.output.count("backfill") == 3
    moment = next(moment for moment in team.ticks if states[team.key(moment)] == "never_delivered")
    shown = CliRunner().invoke(
        command_group,
        ["show", "--team", team.name, "--job", JOB, "--time", moment.strftime("%Y-%m-%dT%H:%M:%SZ")],
        env=env,
    )
    assert shown.exit_code == 0, shown.output
    detail = json.loads(shown.output)
    assert detail["cause"] == "backfill"
    assert detail["operator_actions"][-1]["action"] == "backfill"


def test_a_scheduler_job_that_cannot_be_read_exits_1_and_changes_nothing(team, backfill, scheduler):
    _seed(team)
    scheduler.inject(Fault("fail", "GET", team.scheduler_job, status=403))
    result = backfill(*team.window)
    assert result.exit_code == 1, result.output
    assert "refused to read" in result.output and "nothing changed" in result.output
    assert scheduler.starts() == [] and team.store.read(team.slot) is None


def test_a_jobs_run_whose_answer_is_lost_after_its_delivery_consumed_the_request_goes_on(
    setup, team, backfill, scheduler
):
    states = _seed(team)
    scheduler.on_start = lambda operation: scheduler.deliver()  # delivered before the answer
    scheduler.inject(Fault("answer", "POST", ":run", status=503))  # then the answer is an error
    result = backfill(*team.window)
    assert result.exit_code == 0, result.output
    assert "3 missed, 3 started" in result.output
    wanted = _missing(states, "never_delivered", "retried_out")
    assert _executions(setup, team) == Counter(dict.fromkeys(wanted, 1))


def test_include_skipped_runs_a_run_the_overlap_policy_skipped_once_keeping_its_skip(setup, team, backfill):
    states = _seed(team)
    skipped = next(moment for moment in team.ticks if states[team.key(moment)] == "completed")
    key = team.key(skipped)
    skipped_record = {"status": "skipped", "attempt_id": "a-skipped", "skipped_for": "another"}
    if setup.store_url is None:
        setup.client.collection(setup.collection).document(key).set(
            {**skipped_record, "job": team.scheduler_job}
        )
    else:  # the completed record made skipped (its result fields stay: the backfill reads the status)
        team.store.amend(key, lambda record: skipped_record)
    assert "3 missed;" in backfill(*team.window, "--dry-run").output  # not without the flag
    assert "4 missed;" in backfill(*team.window, "--dry-run", "--include-skipped").output
    result = backfill(*team.window, "--include-skipped")
    assert result.exit_code == 0, result.output
    wanted = {*_missing(states, "never_delivered", "retried_out"), key}
    assert _executions(setup, team) == Counter(dict.fromkeys(wanted, 1))
    record = team.store.read(key)
    assert (record["status"], record[CAUSE_FIELD]) == ("completed", "backfill")
    assert [entry["status"] for entry in record["history"]] == ["skipped"]


def _zone_with_midnight_at(moment: datetime) -> str:
    """A zone with a whole-hour offset and no DST (Etc/GMT-N is UTC+N) in which `moment`, a whole
    hour, is midnight: the test puts a date boundary among the six ticks whatever the hour it runs."""
    offset = (11 - moment.hour) % 24 - 11  # -11 to +12 hours
    return "Etc/UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"


def _give_calendar(team: Team, time_zone: str, calendar: str) -> None:
    """The team file's hourly job in `time_zone`, with `calendar` (its `active=`/`exclude=` text)."""
    path = team.folder / f"{team.name}.py"
    text = path.read_text().replace(
        "from stacks.team import Job, Team",
        "from datetime import date\n\nfrom stacks.team import Calendar, Job, Team, Window",
    )
    path.write_text(
        text.replace('source="report")', f'source="report", time_zone="{time_zone}", {calendar})')
    )


def _local_date(moment: datetime, time_zone: str) -> str:
    return moment.astimezone(ZoneInfo(time_zone)).date().isoformat()


def test_a_backfill_never_starts_a_tick_the_jobs_calendar_excludes_and_its_dry_run_says_so(
    setup, team, backfill, scheduler
):
    states = _seed(team)
    # The job's zone puts midnight between the third and fourth ticks (between the fourth and
    # fifth when that midnight is UTC's, so the dates are never UTC's): excluding the third tick's
    # date there leaves the retried-out and the first never-delivered runs alone and starts the
    # second never-delivered one, whatever the hour the test runs.
    last = 2 if team.ticks[3].hour != 0 else 3
    zone = _zone_with_midnight_at(team.ticks[last + 1])
    holiday = _local_date(team.ticks[last], zone)
    _give_calendar(team, zone, f'exclude=Calendar(dates=[date.fromisoformat("{holiday}")])')
    excluded = team.ticks[: last + 1]
    assert holiday not in {_local_date(moment, zone) for moment in team.ticks[last + 1 :]}
    wanted = [team.key(team.ticks[4])]
    assert [states[team.key(moment)] for moment in excluded][1:3] == ["retried_out", "never_delivered"]
    dry = backfill(*team.window, "--dry-run")
    assert dry.exit_code == 0, dry.output
    listed = ", ".join(f"{moment:%Y-%m-%d %H:%M:%S} (excluded_date)" for moment in excluded)
    line = (
        f"{len(excluded)} ticks in the window are excluded by the job's calendar and never started: {listed}"
    )
    assert f"{line}\n" in dry.output
    assert "1 missed; would start 1" in dry.output
    done = backfill(*team.window)
    assert done.exit_code == 0, done.output
    assert _executions(setup, team) == Counter(dict.fromkeys(wanted, 1))
    assert all(
        team.store.read(team.key(moment)) is None
        for moment in excluded
        if states[team.key(moment)] == "never_delivered"
    )


def test_a_backfill_of_a_campaign_never_starts_a_tick_outside_its_runs_and_its_dry_run_says_so(
    setup, team, backfill, scheduler
):
    states = _seed(team)
    # Three runs from the date whose midnight, in the job's zone, is the second tick (Etc/UTC when
    # that is UTC's midnight): the first tick is before the window, the last two after its end.
    zone = _zone_with_midnight_at(team.ticks[1])
    _give_calendar(
        team, zone, f'active=Window(start=date.fromisoformat("{_local_date(team.ticks[1], zone)}"), runs=3)'
    )
    reasons = ["before_window", None, None, None, "after_window", "after_window"]
    dry = backfill(*team.window, "--dry-run")
    assert dry.exit_code == 0, dry.output
    listed = ", ".join(
        f"{moment:%Y-%m-%d %H:%M:%S} ({why})" for moment, why in zip(team.ticks, reasons, strict=True) if why
    )
    assert (
        f"3 ticks in the window are excluded by the job's calendar and never started: {listed}\n"
        in dry.output
    )
    # Inside: the retried-out and the first never-delivered runs; the second is after the end.
    assert "2 missed; would start 2" in dry.output
    done = backfill(*team.window)
    assert done.exit_code == 0, done.output
    assert _executions(setup, team) == Counter(
        dict.fromkeys([team.key(team.ticks[1]), team.key(team.ticks[2])], 1)
    )
    assert (
        states[team.key(team.ticks[4])] == "never_delivered"
        and team.store.read(team.key(team.ticks[4])) is None
    )
