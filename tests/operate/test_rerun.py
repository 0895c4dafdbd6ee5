"""`runonce rerun` end to end (docs/rerun.md): the command against the real Firestore emulator and
the Google API stand-in (its `jobs.run`), and a decorated job served by Flask that receives what
Scheduler would deliver: the forced delivery `jobs.run` dispatches, its retries, real forced runs.

The stand-in plays Scheduler: when the command calls `jobs.run`, it delivers a forced request
(ScheduleTime = the job's next scheduled time) to the served job, before answering.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import flask
import pytest
from click.testing import CliRunner, Result

import runonce
from emulator.googleapis import Fault, GoogleApisStandIn
from operate.rerun import SCHEDULER_URL_VARIABLE, rerun
from runonce.contract import ACTIONS_FIELD, HISTORY_FIELD
from runonce.core.store import REQUEST_STATE_FIELD, RERUN_OF_FIELD, Store
from runonce.scheduler.expected import forced_key, scheduled_key
from runonce.scheduler.keys import rerun_slot
from runonce.store.firestore import LedgerStore
from tests.conftest import PROJECT, SCHEDULED, ManualClock
from tests.operate.conftest import LEASE, ON_BOTH_STORES, team_ledgers

TEAM = "acme"
JOB = "nightly"
SCHEDULER_JOB = f"{TEAM}-{JOB}"
REGION = "europe-west1"
DATABASE = "runonce-rerun"
T = SCHEDULED
"""The run re-run: the job's 03:00 UTC run of 29 November 2026."""
NEXT = SCHEDULED + timedelta(days=1)
"""The job's next scheduled time while the tests run: what a forced delivery carries."""
RUN_KEY = scheduled_key(SCHEDULER_JOB, T, PROJECT, REGION)
FORCED_KEY = forced_key(SCHEDULER_JOB, NEXT, PROJECT, REGION)
SLOT = rerun_slot(PROJECT, REGION, SCHEDULER_JOB)
TEAM_FILE = """
from stacks.team import Job, Team

team = Team(
    name="acme",
    project="{project}",
    region="{region}",
    database="{database}",
    collection="{collection}",
    jobs=[Job(name="nightly", description="Nightly report", schedule="0 3 * * *", source="report")],
)
"""


def headers(moment: datetime) -> dict[str, str]:
    """A Scheduler delivery of the job carrying ScheduleTime `moment`."""
    return {
        "User-Agent": "Google-Cloud-Scheduler",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": SCHEDULER_JOB,
        "X-CloudScheduler-ScheduleTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "X-Runonce-Project": PROJECT,
        "X-Runonce-Location": REGION,
    }


class Job:
    """The job body: records every run it executes; `behaviour` says how it ends."""

    def __init__(self) -> None:
        self.runs: list[runonce.Run] = []
        self.behaviour: Callable[[], object] = lambda: {"rows": 42}
        self._lock = threading.Lock()

    def __call__(self, request: flask.Request) -> object:
        with self._lock:
            run = runonce.current_run()
            assert isinstance(run, runonce.Run)
            self.runs.append(run)
        return self.behaviour()

    def keys(self) -> list[str]:
        """The run key of every execution, in order."""
        return [run.key for run in self.runs]


@pytest.fixture
def collection() -> str:
    return f"rerun_{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=ON_BOTH_STORES)
def ledger_kind(request) -> str:
    """Every test here runs on a team on Firestore and on a team on Valkey."""
    return request.param


@pytest.fixture
def ledgers(ledger_kind, request, collection, monkeypatch, clock) -> Callable[[timedelta], Store]:
    """`open(lease)`: the team's ledger, claiming under `lease`."""
    return team_ledgers(ledger_kind, request, DATABASE, collection, monkeypatch, clock)


@pytest.fixture
def ledger(ledgers) -> Store:
    return ledgers(LEASE)


@pytest.fixture
def job() -> Job:
    return Job()


@pytest.fixture
def function(ledger, collection, job) -> flask.testing.FlaskClient:
    """The job under @deduplicated on the team's ledger, served by Flask."""
    client = ledger.ledger._client if isinstance(ledger, LedgerStore) else None  # Valkey: RUNONCE_STORE
    handler = runonce.deduplicated(collection=collection, client=client, lease=120)(job)
    app = flask.Flask(f"rerun-{uuid.uuid4().hex[:6]}")
    app.add_url_rule("/", "handle", lambda: handler(flask.request._get_current_object()), methods=["POST"])
    return app.test_client()


@pytest.fixture
def teams_dir(tmp_path: Path, collection: str) -> Path:
    folder = tmp_path / "teams"
    folder.mkdir()
    (folder / f"{TEAM}.py").write_text(
        TEAM_FILE.format(project=PROJECT, region=REGION, database=DATABASE, collection=collection)
    )
    return folder


@pytest.fixture
def deliveries() -> list[Any]:
    """The answers (JSON) to every delivery a test sends, in order."""
    return []


@pytest.fixture
def deliver(function, deliveries) -> Callable[[datetime], Any]:
    """Send the served job a Scheduler delivery carrying `moment`; its JSON answer (also kept)."""

    def send(moment: datetime) -> Any:
        answer = function.post("/", headers=headers(moment))
        deliveries.append(answer.json)
        return answer.json

    return send


@pytest.fixture
def scheduler(deliver) -> Iterator[GoogleApisStandIn]:
    """The stand-in for Cloud Scheduler's API: `jobs.run` delivers the forced run, then answers."""
    stand_in = GoogleApisStandIn().start()
    stand_in.on_start = lambda operation: deliver(NEXT)
    yield stand_in
    stand_in.stop()


@pytest.fixture
def command(scheduler, teams_dir, monkeypatch) -> Callable[..., Result]:
    """`runonce rerun --team acme --job nightly --time T ...` as an operator types it."""

    def invoke(*extra: str, time: str = "2026-11-29T03:00:00Z", team: str = TEAM, job: str = JOB) -> Result:
        arguments = ["--team", team, "--job", job, "--time", time, "--by", "ops@example.com", "--wait", "0"]
        arguments += [*extra]
        env = {SCHEDULER_URL_VARIABLE: scheduler.url, "RUNONCE_TEAMS_DIR": str(teams_dir)}
        return CliRunner().invoke(rerun, arguments, env=env, catch_exceptions=False)

    return invoke


def record(ledger: Store, key: str) -> dict[str, Any] | None:
    return ledger.read(key)


def runs_of(scheduler: GoogleApisStandIn) -> list[str]:
    """The paths of the `jobs.run` calls the stand-in received."""
    return [call.path for call in scheduler.starts()]


@pytest.fixture
def failed_run(deliver, job, clock: ManualClock) -> None:
    """The run at T delivered and failed permanently; then the clock is seven hours later."""

    def refuse() -> object:
        raise runonce.PermanentError("upstream refused: 400")

    job.behaviour = refuse
    assert deliver(T)["outcome"] == "failed"
    job.behaviour = lambda: {"rows": 7}
    clock.advance(7 * 3600)


def test_a_rerun_of_a_failed_run_runs_it_once_more_and_keeps_its_history(
    command, failed_run, job, scheduler, ledger, deliveries
):
    result = command()
    assert result.exit_code == 0, result.output
    assert "delivered" in result.output
    assert runs_of(scheduler) == [f"/v1/projects/{PROJECT}/locations/{REGION}/jobs/{SCHEDULER_JOB}:run"]
    assert job.keys() == [RUN_KEY, RUN_KEY]
    rerun_run = job.runs[1]
    assert (rerun_run.schedule_time, rerun_run.forced, rerun_run.attempt) == (
        "2026-11-29T03:00:00Z",
        False,
        2,
    )
    answer = deliveries[-1]
    assert (answer["outcome"], answer["run_key"], answer["rerun_delivery"]) == (
        "completed",
        RUN_KEY,
        FORCED_KEY,
    )
    stored = record(ledger, RUN_KEY)
    assert (stored["status"], stored["result_json"], stored["attempts"]) == ("completed", '{"rows":7}', 2)
    [earlier] = stored[HISTORY_FIELD]
    assert (earlier["status"], earlier["error"]) == ("failed", "upstream refused: 400")
    [action] = stored[ACTIONS_FIELD]
    assert (action["action"], action["by"]) == ("rerun", "ops@example.com")
    assert record(ledger, FORCED_KEY)[RERUN_OF_FIELD] == RUN_KEY
    assert record(ledger, SLOT)[REQUEST_STATE_FIELD] == "consumed"


def test_a_retry_of_the_consuming_forced_delivery_does_not_run_the_run_twice(
    command, failed_run, job, deliver
):
    assert command().exit_code == 0
    again = deliver(NEXT)  # Scheduler's retry of the dispatch (its 2xx was lost)
    assert (again["outcome"], again["run_key"], again["rerun_delivery"]) == ("duplicate", RUN_KEY, FORCED_KEY)
    assert job.keys() == [RUN_KEY, RUN_KEY]


def test_a_rerun_whose_attempt_asks_for_a_retry_is_retried_under_its_history(
    command, failed_run, job, deliver, ledger, clock
):
    def flaky() -> object:
        raise RuntimeError("the upstream timed out")

    job.behaviour = flaky
    assert command().exit_code == 0
    job.behaviour = lambda: {"rows": 8}
    retried = deliver(NEXT)  # Scheduler retries the forced delivery after the 500
    assert (retried["outcome"], retried["run_key"]) == ("completed", RUN_KEY)
    assert job.keys() == [RUN_KEY, RUN_KEY, RUN_KEY]
    stored = record(ledger, RUN_KEY)
    assert (stored["status"], stored["attempts"]) == ("completed", 3)
    assert [entry["status"] for entry in stored[HISTORY_FIELD]] == ["failed"]


def test_a_rerun_of_a_run_in_progress_is_refused_with_exit_2_and_nothing_changed(
    command, deliver, job, scheduler, ledgers, ledger, clock
):
    ledgers(timedelta(seconds=36000)).claim(RUN_KEY, {"job": SCHEDULER_JOB})
    before = record(ledger, RUN_KEY)
    clock.advance(3600)
    result = command()
    assert result.exit_code == 2
    assert "in progress" in result.output and "nothing changed" in result.output
    assert runs_of(scheduler) == []
    assert record(ledger, RUN_KEY) == before
    assert record(ledger, SLOT) is None


def test_a_completed_run_is_refused_without_insist_and_re_run_with_it(
    command, deliver, job, scheduler, ledger, clock
):
    assert deliver(T)["outcome"] == "completed"
    clock.advance(3600)
    refused = command()
    assert refused.exit_code == 2 and "--insist" in refused.output
    assert (runs_of(scheduler), record(ledger, SLOT)) == ([], None)
    insisted = command("--insist")
    assert insisted.exit_code == 0, insisted.output
    assert job.keys() == [RUN_KEY, RUN_KEY]
    assert [entry["status"] for entry in record(ledger, RUN_KEY)[HISTORY_FIELD]] == ["completed"]


def test_a_real_forced_run_arriving_during_the_reruns_delivery_is_merged_with_it_never_run_twice(
    command, failed_run, job, scheduler, deliver, deliveries
):
    """Both deliveries carry the same headers (the next scheduled time, nothing else): one consumes
    the request and runs the re-run once; the other is answered as that re-run."""
    started, release = threading.Event(), threading.Event()

    def slow() -> object:
        started.set()
        release.wait(30)
        return {"rows": 9}

    job.behaviour = slow
    real = threading.Thread(target=lambda: (started.wait(30), deliver(NEXT)))
    real.start()
    dispatched = threading.Thread(target=command)
    dispatched.start()
    real.join(60)  # the real forced run arrives while the re-run's attempt runs
    release.set()
    dispatched.join(60)
    assert job.keys() == [RUN_KEY, RUN_KEY]
    answers = sorted(
        (answer["outcome"], answer["run_key"], answer["rerun_delivery"]) for answer in deliveries[1:]
    )
    assert answers == [("completed", RUN_KEY, FORCED_KEY), ("in_progress", RUN_KEY, FORCED_KEY)]


def test_forced_and_scheduled_runs_after_the_rerun_run_as_themselves(
    command, failed_run, job, deliver, clock, ledger
):
    assert command().exit_code == 0
    clock.current = NEXT + timedelta(seconds=5)
    assert deliver(NEXT)["outcome"] == "completed"  # the scheduled run at NEXT
    following = deliver(NEXT + timedelta(days=1))  # a forced run before the day after
    assert (following["outcome"], "rerun_delivery" in following) == ("completed", False)
    assert job.keys() == [
        RUN_KEY,
        RUN_KEY,
        scheduled_key(SCHEDULER_JOB, NEXT, PROJECT, REGION),
        forced_key(SCHEDULER_JOB, NEXT + timedelta(days=1), PROJECT, REGION),
    ]


def test_a_scheduled_delivery_does_not_consume_a_pending_request(
    command, failed_run, job, scheduler, deliver, clock, ledger
):
    scheduler.on_start = None  # the dispatch never arrives
    assert command().exit_code == 0
    clock.current = NEXT + timedelta(seconds=5)
    assert deliver(NEXT)["outcome"] == "completed"
    assert job.keys() == [RUN_KEY, scheduled_key(SCHEDULER_JOB, NEXT, PROJECT, REGION)]
    assert record(ledger, SLOT)[REQUEST_STATE_FIELD] == "pending"


def test_an_expired_request_is_not_consumed_and_the_forced_run_runs_as_itself(
    command, failed_run, job, scheduler, deliver, clock, ledger
):
    scheduler.on_start = None  # the dispatch never arrives
    result = command()
    assert result.exit_code == 0 and "not delivered yet" in result.output
    before = record(ledger, RUN_KEY)
    clock.advance(600)
    forced = deliver(NEXT)
    assert (forced["outcome"], forced["run_key"], "rerun_delivery" in forced) == (
        "completed",
        FORCED_KEY,
        False,
    )
    assert job.keys() == [RUN_KEY, FORCED_KEY]
    assert record(ledger, RUN_KEY) == before
    assert record(ledger, SLOT)[REQUEST_STATE_FIELD] == "pending"


def test_a_refused_jobs_run_withdraws_the_request_and_exits_1(
    command, failed_run, job, scheduler, deliver, ledger
):
    scheduler.inject(Fault("fail", path_contains=":run", status=403))
    result = command()
    assert result.exit_code == 1
    assert "403" in result.output and "withdrawn" in result.output
    assert record(ledger, SLOT)[REQUEST_STATE_FIELD] == "withdrawn"
    forced = deliver(NEXT)
    assert (forced["run_key"], job.keys()) == (FORCED_KEY, [RUN_KEY, FORCED_KEY])


def test_a_lost_jobs_run_answer_whose_dispatch_consumed_the_request_is_not_withdrawn(
    command, failed_run, job, scheduler, ledger
):
    scheduler.inject(Fault("drop", path_contains=":run"))  # dispatched, the answer lost
    result = command()
    assert result.exit_code == 0, result.output
    assert "consumed the request meanwhile" in result.output
    assert job.keys() == [RUN_KEY, RUN_KEY]
    assert record(ledger, SLOT)[REQUEST_STATE_FIELD] == "consumed"


def test_a_second_request_while_one_is_pending_is_refused(command, failed_run, scheduler):
    scheduler.on_start = None
    assert command().exit_code == 0
    second = command()
    assert second.exit_code == 2 and "pending re-run request" in second.output
    assert len(runs_of(scheduler)) == 1


def test_a_rerun_while_a_forced_run_of_this_interval_is_recorded_is_refused(
    command, failed_run, job, scheduler, deliver, ledger
):
    assert deliver(NEXT)["run_key"] == FORCED_KEY  # someone pressed "Force run" earlier today
    result = command()
    assert result.exit_code == 2 and "already has a record" in result.output
    assert (runs_of(scheduler), record(ledger, SLOT)) == ([], None)


def test_a_rerun_within_the_skew_of_the_next_scheduled_time_is_refused(command, failed_run, clock, scheduler):
    clock.current = NEXT - timedelta(seconds=30)
    result = command()
    assert result.exit_code == 2 and "less than 60 s away" in result.output
    assert runs_of(scheduler) == []


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("team", "nobody", "no stack or team file is called 'nobody'"),
        ("job", "weekly", "no scheduled job 'weekly'"),
        ("time", "2026-11-29T03:30:00Z", "is not a past run"),
        ("time", "2026-11-29T03:00:00.500Z", "is not a past run"),
        ("time", "yesterday", "'yesterday' is not an RFC 3339 timestamp"),
        ("time", "2026-11-29T03:00:00", "'2026-11-29T03:00:00' is not an RFC 3339 timestamp"),
        ("time", "2026-11-29 03:00:00+00:00", "is not an RFC 3339 timestamp"),
        ("time", "2026-11-29T03:00:00+24:00", "impossible UTC offset"),
    ],
)
def test_bad_input_is_refused_with_exit_2_naming_it(
    command, failed_run, scheduler, ledger, option, value, message
):
    result = command(**{option: value})
    assert result.exit_code == 2
    assert message in result.output
    assert runs_of(scheduler) == []
    assert record(ledger, SLOT) is None


def test_the_alerts_job_label_the_scheduler_job_id_names_the_job_too(command, failed_run, job, deliveries):
    # The failed-run and missed-run alerts fill JOB from the log line's `job` field, the Scheduler
    # job's id (X-CloudScheduler-JobName); the command they print must be one rerun accepts.
    result = command(job=SCHEDULER_JOB)
    assert result.exit_code == 0, result.output
    assert job.keys() == [RUN_KEY, RUN_KEY] and deliveries[-1]["outcome"] == "completed"
