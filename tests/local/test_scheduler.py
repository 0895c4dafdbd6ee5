"""The local scheduler's deliveries and retries, against a small HTTP server that records what
it receives and answers from a script (the scheduler's own contract; no store involved)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from localscheduler.clock import AcceleratedClock
from localscheduler.scheduler import cloud_scheduler as scheduler_module
from localscheduler.scheduler.cloud_scheduler import LocalScheduler, triggers
from localscheduler.scheduler.delivery import Answer, scheduler_headers
from localscheduler.scheduler.faults import AttemptShape, Fault, FaultMix
from localscheduler.scheduler.journal import Journal
from localscheduler.scheduler.plan import planned_runs
from stacks import naming
from stacks.team import Job, Retry, Team

RATE = 600.0
START = datetime(2026, 1, 1, tzinfo=UTC)


class Recorder(ThreadingHTTPServer):
    """Records each POST's headers and body; answers the scripted statuses, then 200."""

    def __init__(self, statuses: list[int]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.statuses = list(statuses)
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.received.append((dict(self.headers), body))
            status = self.server.statuses.pop(0) if self.server.statuses else 200
        payload = json.dumps({"outcome": "completed" if status == 200 else "retry"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@dataclass
class Endpoint:
    """Stands in for an instance pool: every request goes to the recorder."""

    url: str
    name: str = "recorder"

    @contextmanager
    def acquire(self, timeout):
        yield self


@pytest.fixture
def recorder(request):
    server = Recorder(getattr(request, "param", []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


# Retries stop at the next scheduled run. At RATE an every-2-minutes job leaves its retries 0.2 s
# of wall time, which a loaded machine spends on one attempt: tests that count retries use an
# hourly job (6 s of wall time for them).
HOURLY = "2 * * * *"


def _deliver(
    recorder: Recorder,
    mix: FaultMix,
    minutes: int = 2,
    retry: Retry | None = None,
    schedule: str = "*/2 * * * *",
) -> Journal:
    job = Job(
        name="sync",
        schedule=schedule,
        source="report",
        retry=retry or Retry(),
        body='{"region": "eu"}',
        attempt_deadline_seconds=60,
    )
    team = Team(name="team", project="proj-1", region="europe-west1", jobs=[job])
    runs = planned_runs(team, job, START, START + timedelta(minutes=minutes))
    journal = Journal()
    clock = AcceleratedClock.starting_now(START, RATE)
    endpoint = Endpoint(f"http://127.0.0.1:{recorder.server_address[1]}/")
    scheduler = LocalScheduler(
        clock, {("team", "sync"): endpoint}, {("team", "sync"): 45}, mix, None, journal
    )
    scheduler.run(triggers(runs, mix, forced_skew=60))
    return journal


def test_a_delivery_carries_the_scheduler_and_runonce_headers_and_the_jobs_body(recorder):
    _deliver(recorder, FaultMix())
    headers, body = recorder.received[0]
    assert headers["User-Agent"] == "Google-Cloud-Scheduler"
    assert headers["X-CloudScheduler"] == "true"
    assert headers["X-CloudScheduler-JobName"] == "team-sync"  # the deployed job's name: team-job
    assert headers["X-CloudScheduler-ScheduleTime"] == "2026-01-01T00:02:00Z"
    assert headers["X-Runonce-Project"] == "proj-1"
    assert headers["X-Runonce-Location"] == "europe-west1"
    assert json.loads(body) == {"region": "eu"}


def test_the_local_job_name_is_the_one_the_stacks_give_the_deployed_scheduler_job():
    team = Team(name="orders", project="p", region="europe-west1", jobs=[])
    job = Job(name="nightly", schedule="0 3 * * *", time_zone="Etc/UTC", source="report")
    sent = scheduler_headers(team, job, START)["X-CloudScheduler-JobName"]
    assert sent == naming.scheduler_job_name("orders", "nightly") == "orders-nightly"


@pytest.mark.parametrize("recorder", [[500, 409]], indirect=True)
def test_non_2xx_answers_are_retried_until_a_2xx(recorder):
    journal = _deliver(recorder, FaultMix(), schedule=HOURLY)
    assert [sent.status for sent in journal.sent()] == [500, 409, 200]
    assert [sent.attempt for sent in journal.sent()] == [1, 2, 3]


@pytest.mark.parametrize("recorder", [[500] * 10], indirect=True)
def test_scheduler_gives_up_when_the_retries_are_used_up(recorder):
    journal = _deliver(
        recorder, FaultMix(), retry=Retry(retry_count=2, min_backoff_seconds=5), schedule=HOURLY
    )
    assert len(journal.sent()) == 3
    assert [gave_up.attempts for gave_up in journal.gave_up()] == [3]


def test_a_lost_response_is_retried_although_the_handler_answered_2xx(recorder):
    journal = _deliver(recorder, FaultMix(lost_response=1.0), schedule=HOURLY)
    assert [(sent.status, sent.acknowledged) for sent in journal.sent()] == [(200, False), (200, True)]


def test_a_duplicate_delivery_sends_two_copies_of_the_attempt(recorder):
    journal = _deliver(recorder, FaultMix(duplicate_delivery=1.0))
    assert sorted(sent.copy for sent in journal.sent()) == [False, True]
    assert (
        recorder.received[0][0]["X-CloudScheduler-ScheduleTime"]
        == recorder.received[1][0]["X-CloudScheduler-ScheduleTime"]
    )


def test_a_forced_run_carries_the_next_scheduled_time(recorder):
    journal = _deliver(recorder, FaultMix(forced_run=1.0), minutes=4)
    forced = [sent for sent in journal.sent() if sent.forced]
    assert [sent.schedule_time for sent in forced] == [START + timedelta(minutes=4)]
    assert forced[0].sent_at < START + timedelta(minutes=4)


def test_a_job_failure_fault_sets_the_example_jobs_knob(recorder):
    _deliver(recorder, FaultMix(permanent_failure=1.0))
    assert json.loads(recorder.received[0][1]) == {"region": "eu", "fail": "permanent"}


@dataclass
class DyingEndpoint(Endpoint):
    """An instance whose process ends on its own, as one whose job kills it after its effect."""

    process: subprocess.Popen | None = None


def _killed_after_its_deadline(monkeypatch, lives: float) -> list[tuple[str | None, bool]]:
    """Send one `killed_after_effect` attempt whose answer never comes before the attempt deadline
    (a loaded machine), to an instance whose process ends `lives` seconds later: (outcome, killed)."""
    monkeypatch.setattr(scheduler_module, "post", lambda *args: Answer(None, error="deadline"))
    job = Job(name="sync", schedule="*/2 * * * *", source="report", attempt_deadline_seconds=60)
    team = Team(name="team", project="proj-1", region="europe-west1", jobs=[job])
    runs = planned_runs(team, job, START, START + timedelta(minutes=2))
    process = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({lives})"])
    try:
        endpoint = DyingEndpoint("http://127.0.0.1:9/", process=process)
        journal = Journal()
        clock = AcceleratedClock.starting_now(START, RATE)
        scheduler = LocalScheduler(
            clock, {("team", "sync"): endpoint}, {("team", "sync"): 45}, FaultMix(), None, journal
        )
        [trigger] = triggers(runs, FaultMix(), forced_skew=60)
        attempt = AttemptShape(deadline=60, kill_after_effect=True)
        scheduler._send(trigger, 1, attempt, Fault.KILLED_AFTER_EFFECT, b"{}", False)
    finally:
        process.kill()
        process.wait()
    return [(sent.outcome, sent.killed) for sent in journal.sent()]


@pytest.mark.fast
def test_an_instance_that_dies_after_its_effect_once_the_attempt_deadline_passed_is_journaled_killed(
    monkeypatch,
):
    assert _killed_after_its_deadline(monkeypatch, lives=0.3) == [("deadline", True)]


@pytest.mark.fast
def test_an_instance_still_alive_a_lease_after_the_deadline_is_not_journaled_killed(monkeypatch):
    assert _killed_after_its_deadline(monkeypatch, lives=30) == [("deadline", False)]
