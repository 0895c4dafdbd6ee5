"""`current_run().previous` black box (docs/schedules/previous.md): real functions-framework
instances (localscheduler's pool) serving tests/hosts/apps/previous_job.py, an incremental job
that notes what it read and returns its cursor with an id of the execution; deliveries shaped as
Cloud Scheduler sends them, sent concurrently, lost to the attempt deadline, or killing the
instance after the effect; `runonce rerun` and `runonce backfill` run as an operator runs them,
with the Google API stand-in's `jobs.run` sending the forced delivery to the instances. Every
test runs with the runs on the Firestore emulator and on the session's Valkey server, but the
completion's own answer lost, on Valkey only: a proxy between the instances and the server
(tests/store/valkey_server.ReplyDropper) drops it.

What a run read is what its body noted (`started` lines), not what runonce says; `effect` lines
end each execution, so the notes tell which executions ran at the same time.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from emulator.googleapis import GoogleApisStandIn
from localscheduler.hosts.pool import InstancePool
from localscheduler.scheduler.delivery import Answer
from operate.cli import runonce as command_group
from operate.rerun import SCHEDULER_URL_VARIABLE
from runonce.contract import OVERLAP_HEADER, STORE_VARIABLE
from runonce.scheduler.expected import expected_times, next_time, scheduled_key
from stacks.naming import scheduler_job_name
from tests.conftest import PROJECT, clear_of_the_next_tick
from tests.operate.conftest import ON_BOTH_STORES
from tests.operate.test_backfill import JOB as HOURLY
from tests.operate.test_backfill import REGION, SCHEDULE, write_team_file
from tests.store.valkey_server import ReplyDropper

SOURCE = Path(__file__).resolve().parents[1] / "hosts" / "apps" / "previous_job.py"
DATABASE = "runonce-previous"
INSTANCES = 4


@dataclass
class Setup:
    """The instances, the file their job notes in, and the store they keep runs in."""

    pool: InstancePool
    notes_file: Path
    collection: str
    store_url: str | None
    """RUNONCE_STORE of the instances and the command: None on Firestore."""
    proxy: ReplyDropper | None
    """On Valkey, the proxy every store call goes through, which can lose an answer."""

    def notes(self, keys: set[str]) -> list[dict[str, Any]]:
        """The notes of the runs `keys`, in the order they were written."""
        lines = [json.loads(line) for line in self.notes_file.read_text().splitlines()]
        return [note for note in lines if note["run"] in keys]

    def started(self, keys: set[str]) -> list[dict[str, Any]]:
        """Each execution of the runs `keys` as it started (what it read), in start order."""
        return sorted(
            (note for note in self.notes(keys) if note["event"] == "started"), key=lambda n: n["at"]
        )

    def send(self, headers: dict[str, str], deadline: float = 30.0) -> Answer:
        """One attempt, as Scheduler sends it, to an idle instance."""
        return self.pool.post("", headers, deadline, wait=60.0)

    def until_2xx(self, headers: dict[str, str], deadline: float = 30.0) -> list[Answer]:
        """Scheduler's retries: the attempt again every 0.3 s until one is answered 2xx."""
        answers = [self.send(headers, deadline)]
        while not answers[-1].ok and len(answers) < 150:
            time.sleep(0.3)
            answers.append(self.send(headers, deadline))
        assert answers[-1].ok, [answer.outcome for answer in answers]
        return answers


@pytest.fixture(scope="module", params=ON_BOTH_STORES)
def setup(request, firestore_emulator, tmp_path_factory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("previous")
    notes = folder / "notes.jsonl"
    notes.touch()
    collection = f"previous_{uuid.uuid4().hex[:10]}"
    env = {
        "FIRESTORE_EMULATOR_HOST": firestore_emulator.host,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "RUNONCE_DATABASE": DATABASE,
        "RUNONCE_COLLECTION": collection,
        "PREVIOUS_TEST_NOTES": str(notes),
    }
    url, proxy = None, None
    if request.param == "valkey":
        proxy = ReplyDropper(request.getfixturevalue("valkey_server").port)
        url = f"valkey://127.0.0.1:{proxy.port}"
        env[STORE_VARIABLE] = url
    pool = InstancePool("previous", SOURCE, "handle", INSTANCES, env, folder / "instances")
    pool.start()
    yield Setup(pool, notes, collection, url, proxy)
    pool.stop()
    if proxy is not None:
        proxy.close()


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Job:
    """A Scheduler job of its own for one test: its deliveries and the run keys of its ticks."""

    name: str
    ticks: list[datetime]

    def key(self, moment: datetime) -> str:
        return scheduled_key(self.name, moment, PROJECT, REGION)

    @property
    def keys(self) -> set[str]:
        return {self.key(moment) for moment in self.ticks}

    def headers(self, moment: datetime, **extra: str) -> dict[str, str]:
        """A delivery of the run at `moment`, as Scheduler and the stack send it."""
        return {
            "User-Agent": "Google-Cloud-Scheduler",
            "X-CloudScheduler": "true",
            "X-CloudScheduler-JobName": self.name,
            "X-CloudScheduler-ScheduleTime": _rfc3339(moment),
            "X-Runonce-Project": PROJECT,
            "X-Runonce-Location": REGION,
            **extra,
        }


@pytest.fixture
def job(setup) -> Job:
    """Six consecutive minutes of a job, all past (scheduled, not forced)."""
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    return Job(f"sync-{uuid.uuid4().hex[:8]}", [start + timedelta(minutes=n) for n in range(6)])


def _at_once(*sends: Callable[[], object]) -> None:
    """Start every send at the same moment; wait for all."""
    threads = [threading.Thread(target=send) for send in sends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


def _assert_serial_and_each_reads_the_run_completed_before_it(started: list[dict], effects: dict) -> None:
    """No two executions ran at the same time (each ended before the next started), and each read
    the run, of those executed before it, with the latest schedule time before its own, with that
    execution's result."""
    for earlier, later in itertools.pairwise(started):
        assert effects[earlier["execution"]] < later["at"], (earlier, later)
    for index, execution in enumerate(started):
        before = [done for done in started[:index] if done["schedule_time"] < execution["schedule_time"]]
        expected = max(before, key=lambda done: done["schedule_time"], default=None)
        if expected is None:
            assert execution["previous"] is None, execution
        else:
            assert execution["previous"] == expected["run"], (execution, expected)
            assert execution["previous_result"] == {
                "until": expected["schedule_time"],
                "execution": expected["execution"],
            }


def _effects(setup: Setup, keys: set[str]) -> dict[str, float]:
    """When each execution's effect was noted, by execution id."""
    return {note["execution"]: note["at"] for note in setup.notes(keys) if note["event"] == "effect"}


def test_a_skip_jobs_runs_delivered_in_concurrent_pairs_never_run_together_and_read_the_run_before(
    setup, job
):
    headers = [job.headers(moment, **{OVERLAP_HEADER: "skip", "X-Test-Hold": "1.5"}) for moment in job.ticks]
    outcomes: list[str] = []
    for first, second in zip(headers[::2], headers[1::2], strict=True):
        _at_once(*(lambda h=h: outcomes.append(setup.until_2xx(h)[-1].outcome) for h in (first, second)))
    started = setup.started(job.keys)
    assert outcomes.count("skipped") >= 1 and len(started) == outcomes.count("completed") >= 2, outcomes
    assert len({execution["run"] for execution in started}) == len(started)  # each run once
    _assert_serial_and_each_reads_the_run_completed_before_it(started, _effects(setup, job.keys))


def test_a_wait_jobs_runs_delivered_at_once_run_one_at_a_time_each_reading_the_run_completed_before(
    setup, job
):
    ticks = job.ticks[:4]
    headers = [job.headers(moment, **{OVERLAP_HEADER: "wait", "X-Test-Hold": "1"}) for moment in ticks]
    answers: list[list[Answer]] = []
    _at_once(*(lambda h=h: answers.append(setup.until_2xx(h)) for h in headers))
    assert sorted(run[-1].outcome for run in answers) == ["completed"] * 4
    assert any(answer.outcome == "waiting" for run in answers for answer in run)
    started = setup.started(job.keys)
    assert sorted(execution["run"] for execution in started) == sorted(job.key(moment) for moment in ticks)
    _assert_serial_and_each_reads_the_run_completed_before_it(started, _effects(setup, job.keys))


def test_a_wait_jobs_older_run_retried_after_a_newer_one_reads_the_same_previous_as_the_newer_one(setup, job):
    """Scheduler retries each waiting run on its own backoff: when the newer run's retry takes the
    job first, the older run, run after it, reads the run before its own time, as the newer one
    did (docs/library.md: what `wait` promises and what it does not)."""
    first, older, newer = job.ticks[:3]
    wait = {OVERLAP_HEADER: "wait"}
    holder: list[Answer] = []
    thread = threading.Thread(
        target=lambda: holder.append(setup.send(job.headers(first, **wait, **{"X-Test-Hold": "3"})))
    )
    thread.start()
    deadline = time.monotonic() + 60
    while not setup.started({job.key(first)}):
        assert time.monotonic() < deadline, "the first run never started"
        time.sleep(0.05)
    assert setup.send(job.headers(older, **wait)).outcome == "waiting"
    assert setup.send(job.headers(newer, **wait)).outcome == "waiting"
    thread.join(60)
    assert holder[0].outcome == "completed"
    assert setup.until_2xx(job.headers(newer, **wait))[-1].outcome == "completed"
    assert setup.until_2xx(job.headers(older, **wait))[-1].outcome == "completed"
    started = {execution["run"]: execution for execution in setup.started(job.keys)}
    assert started[job.key(newer)]["previous"] == started[job.key(older)]["previous"] == job.key(first)


def test_a_skip_jobs_older_run_delivered_after_a_newer_one_reads_the_same_previous_as_the_newer_one(
    setup, job
):
    """A late delivery (a retry after a 5xx, a slow network) of a run whose newer sibling already
    completed: the job is free, so the older run runs, and reads the run before its own time."""
    first, older, newer = job.ticks[:3]
    for moment in (first, newer, older):
        assert setup.send(job.headers(moment, **{OVERLAP_HEADER: "skip"})).outcome == "completed"
    started = {execution["run"]: execution for execution in setup.started(job.keys)}
    assert started[job.key(newer)]["previous"] == started[job.key(older)]["previous"] == job.key(first)


def test_allow_jobs_runs_in_flight_together_read_the_same_previous(setup, job):
    older, base, one, two = job.ticks[:4]
    for moment in (older, base):
        assert setup.send(job.headers(moment)).outcome == "completed"
    answers: list[Answer] = []
    _at_once(
        *(lambda m=m: answers.append(setup.send(job.headers(m, **{"X-Test-Hold": "2"}))) for m in (one, two))
    )
    assert [answer.outcome for answer in answers] == ["completed", "completed"]
    started = setup.started(job.keys)
    [base_run] = [execution for execution in started if execution["run"] == job.key(base)]
    both = [execution for execution in started if execution["run"] in (job.key(one), job.key(two))]
    assert len(both) == 2
    effects = _effects(setup, job.keys)
    assert all(execution["at"] < min(effects[other["execution"]] for other in both) for execution in both)
    assert [execution["previous"] for execution in both] == [job.key(base)] * 2
    assert {execution["previous_result"]["execution"] for execution in both} == {base_run["execution"]}


def test_a_completion_whose_answer_was_lost_is_read_once_with_its_result_by_the_next_run(setup, job):
    lost, following, last = job.ticks[:3]
    # The body outlasts the attempt deadline: the run completes, its 2xx never reaches Scheduler.
    assert setup.send(job.headers(lost, **{"X-Test-Hold": "2"}), deadline=1).error == "deadline"
    retries = setup.until_2xx(job.headers(lost))
    assert retries[-1].outcome == "duplicate", [answer.outcome for answer in retries]
    assert setup.send(job.headers(following)).outcome == "completed"
    assert setup.send(job.headers(last)).outcome == "completed"
    started = setup.started(job.keys)
    assert [execution["run"] for execution in started] == [
        job.key(moment) for moment in (lost, following, last)
    ]
    lost_run, following_run, last_run = started
    assert following_run["previous"] == job.key(lost)
    assert following_run["previous_result"] == {"until": _rfc3339(lost), "execution": lost_run["execution"]}
    assert retries[-1].body["result"] == following_run["previous_result"]  # what Scheduler's retry was told
    assert last_run["previous"] == job.key(following)


def test_a_completion_whose_store_answer_was_lost_is_read_once_with_its_result_by_the_next_run(setup, job):
    if setup.proxy is None:
        pytest.skip(
            "Firestore's answers are lost on the in-process wire tap only: tests/hosts/test_faults.py "
            "and tests/store/test_conformance_previous.py lose the completion's Commit answer"
        )
    lost, following = job.ticks[:2]
    finishes = setup.proxy.calls["finish"]
    setup.proxy.lose_next_answer("finish")  # the completion lands, its answer does not
    answer = setup.send(job.headers(lost))
    assert (answer.outcome, answer.body["recorded"]) == ("completed", True)
    assert setup.proxy.calls["finish"] == finishes + 2  # the one that landed, its retry
    assert setup.send(job.headers(following)).outcome == "completed"
    started = setup.started(job.keys)
    assert [execution["run"] for execution in started] == [job.key(lost), job.key(following)]
    assert started[1]["previous"] == job.key(lost)
    assert (
        started[1]["previous_result"]
        == answer.body["result"]
        == {
            "until": _rfc3339(lost),
            "execution": started[0]["execution"],
        }
    )


def test_a_takeover_of_an_attempt_killed_after_its_effect_reads_what_the_killed_attempt_read(setup, job):
    base, killed, last = job.ticks[:3]
    short = {"X-Test-Short-Lease": "1"}
    assert setup.send(job.headers(base)).outcome == "completed"
    dying = job.headers(killed, **short, **{"X-Test-Die-After-Effect": job.key(killed)})
    assert setup.send(dying).error == "connection"
    answers = setup.until_2xx(job.headers(killed, **short))
    assert answers[-1].outcome == "completed", [answer.outcome for answer in answers]
    assert setup.send(job.headers(last)).outcome == "completed"
    started = setup.started(job.keys)
    attempts = [execution for execution in started if execution["run"] == job.key(killed)]
    assert [execution["attempt"] for execution in attempts] == [1, 2]
    effects = _effects(setup, job.keys)
    assert all(execution["execution"] in effects for execution in attempts)  # both reached the effect
    assert [execution["previous"] for execution in attempts] == [job.key(base)] * 2
    assert attempts[0]["previous_result"] == attempts[1]["previous_result"]
    [last_run] = [execution for execution in started if execution["run"] == job.key(last)]
    # The killed attempt's result was never written: the next run reads the takeover's.
    assert last_run["previous_result"] == {"until": _rfc3339(killed), "execution": attempts[1]["execution"]}


@dataclass
class Team:
    """A team of one hourly job for one test, its last five ticks, and Scheduler's API stand-in
    whose `jobs.run` sends the forced delivery to the instances in the background."""

    name: str
    folder: Path
    job: Job
    scheduler: GoogleApisStandIn
    dispatched: list[threading.Thread] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)

    def command(self, setup: Setup, *arguments: str) -> Result:
        """`runonce ARGUMENTS --team T --job hourly --by ...` with the variables an operator sets."""
        env = {
            SCHEDULER_URL_VARIABLE: self.scheduler.url,
            "RUNONCE_TEAMS_DIR": str(self.folder),
            STORE_VARIABLE: setup.store_url,
        }
        full = [*arguments, "--team", self.name, "--job", HOURLY, "--by", "ops@example.com"]
        return CliRunner().invoke(command_group, full, env=env)

    def delivered(self) -> list[Answer]:
        """The forced deliveries' answers, once every dispatched delivery has been answered."""
        for thread in self.dispatched:
            thread.join(120)
        return self.answers


@pytest.fixture
def team(setup, tmp_path) -> Iterator[Team]:
    name, folder = write_team_file(tmp_path, setup.collection, DATABASE)
    clear_of_the_next_tick(SCHEDULE, "UTC", timedelta(minutes=4))  # the forced deliveries
    now = datetime.now(UTC)
    job = Job(
        scheduler_job_name(name, HOURLY), expected_times(SCHEDULE, "UTC", now - timedelta(hours=5), now)
    )
    stand_in = GoogleApisStandIn().start()
    path = f"projects/{PROJECT}/locations/{REGION}/jobs/{job.name}"
    stand_in._store({"name": path, "schedule": SCHEDULE, "userUpdateTime": "2026-01-01T00:00:00Z"})
    made = Team(name, folder, job, stand_in)

    def force() -> None:
        moment = next_time(SCHEDULE, "UTC", datetime.now(UTC))
        made.answers.append(setup.send(job.headers(moment), deadline=60))

    def dispatch(operation: dict[str, Any]) -> None:
        thread = threading.Thread(target=force, daemon=True)
        made.dispatched.append(thread)
        thread.start()

    stand_in.on_start = dispatch
    yield made
    stand_in.stop()


def test_a_rerun_reads_the_run_before_its_run_and_its_result_replaces_the_runs_entry(setup, team):
    first, rerun, after = team.job.ticks[:3]
    for moment in (first, rerun):
        assert setup.send(team.job.headers(moment)).outcome == "completed"
    result = team.command(setup, "rerun", "--time", _rfc3339(rerun), "--insist", "--wait", "60")
    assert result.exit_code == 0, result.output
    [forced] = team.delivered()
    assert (forced.outcome, forced.body["run_key"]) == ("completed", team.job.key(rerun))
    assert setup.send(team.job.headers(after)).outcome == "completed"
    started = setup.started(team.job.keys)
    assert [execution["run"] for execution in started] == [
        team.job.key(m) for m in (first, rerun, rerun, after)
    ]
    original, again = started[1], started[2]
    assert original["previous"] == again["previous"] == team.job.key(first)  # not itself, not a later run
    assert original["previous_result"] == again["previous_result"]
    assert started[3]["previous"] == team.job.key(rerun)
    assert started[3]["previous_result"] == {"until": _rfc3339(rerun), "execution": again["execution"]}


def test_a_backfilled_older_run_reads_the_run_before_it_and_never_moves_a_later_runs_previous_back(
    setup, team
):
    ticks = team.job.ticks
    assert len(ticks) == 5
    missed = [ticks[0], ticks[2]]
    for moment in (ticks[1], ticks[3]):
        assert setup.send(team.job.headers(moment)).outcome == "completed"
    window = ("--from", _rfc3339(ticks[0]), "--to", _rfc3339(ticks[3]))
    result = team.command(setup, "backfill", *window, "--wait", "60")
    assert result.exit_code == 0, result.output
    assert [answer.outcome for answer in team.delivered()] == ["completed", "completed"]
    assert setup.send(team.job.headers(ticks[4])).outcome == "completed"
    started = {execution["run"]: execution for execution in setup.started(team.job.keys)}
    assert set(started) == {team.job.key(moment) for moment in ticks}
    read = {moment: started[team.job.key(moment)]["previous"] for moment in ticks}
    assert read[missed[0]] is None  # nothing completed before the oldest
    assert read[missed[1]] == team.job.key(ticks[1])  # the run before its own time, not the newest
    assert read[ticks[4]] == team.job.key(ticks[3])  # the backfills, completed later, did not move it back
    latest = started[team.job.key(ticks[3])]["execution"]
    assert started[team.job.key(ticks[4])]["previous_result"] == {
        "until": _rfc3339(ticks[3]),
        "execution": latest,
    }
