"""The demo's proxied job: a scheduled Workflows target started through runonce's proxy, once per run.

functions/proxy/main.py runs unchanged on functions-framework instances (the same source file
the scheduled jobs use) with RUNONCE_TARGET set to a Workflows target and
RUNONCE_TARGET_BASE_URL pointing at the Google APIs stand-in (emulator/googleapis.py), against
the Firestore emulator. Offline, google.auth.default() has no credentials and would ask a
metadata server, so the instances get RUNONCE_LOCAL_ANONYMOUS_CREDENTIALS=1, which makes the
demo's source file (localscheduler/hosts/function_source.py, not the library) answer
google.auth.default() with anonymous credentials: no token, no network.

Each run is delivered Scheduler-style (the same headers, retried until a 2xx) with one fault:
two copies at once, a lost 2xx (the answer is thrown away and the run delivered again), the
stand-in starting the execution and dropping its answer, or the instance killed right after the
stand-in started the execution (before runonce writes the completion; the retry after the lease
finds the execution by its run-key label). The verdict reads the stand-in's recorded starts:
exactly one workflow execution per run, carrying the run key, and a 2xx for every run.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from emulator.googleapis import Fault, GoogleApisStandIn
from localscheduler.hosts.pool import InstancePool
from localscheduler.scheduler.delivery import Answer, both_at_once, post, retry_until_ok, scheduler_headers
from runonce import contract
from runonce.targets import ARGUMENT_FIELD as TOKEN
from runonce.targets import LABEL_KEY
from stacks.targets import TARGET_VARIABLE, Target, Workflow, target_json
from stacks.team import FUNCTIONS_DIR, PROXY_SOURCE, Job, Team

JOB_NAME = "proxied-workflow"
WORKFLOW = "projects/runonce-local/locations/europe-west1/workflows/nightly-etl"
FAULTS = ("none", "duplicate_delivery", "lost_response", "target_answer_dropped", "instance_killed")
LEASE_SECONDS = 4
"""The proxy's run lease (wall seconds): a killed attempt's retry takes over after it."""
RETRY_SECONDS = 0.5
DEADLINE_SECONDS = 10.0
MAX_ATTEMPTS = 40


@dataclass
class ProxyRun:
    """One run of the proxied job and what happened to it."""

    schedule_time: datetime
    fault: str
    answers: list[Answer] = field(default_factory=list)
    executions: list[dict] = field(default_factory=list)
    """Executions the stand-in started while the run was delivered."""


@dataclass
class ProxyResult:
    """Every run with its answers and the executions the stand-in started while it was delivered."""

    runs: list[ProxyRun]
    restarts: int
    calls: int
    """Requests the stand-in received (lists, starts, gets)."""

    @property
    def problems(self) -> list[str]:
        found = []
        for run in self.runs:
            where = f"run {run.schedule_time:%Y-%m-%d %H:%M}Z ({run.fault})"
            if not any(answer.ok for answer in run.answers):
                found.append(f"{where} never got a 2xx")
            if len(run.executions) != 1:
                found.append(f"{where} started {len(run.executions)} executions")
            labels = {json.dumps(e.get("labels", {}), sort_keys=True) for e in run.executions}
            if len(labels) != 1 or LABEL_KEY not in json.loads(labels.pop() if labels else "{}"):
                found.append(f"{where}: its executions do not carry one run-key label")
            if any(TOKEN not in json.loads(e.get("argument", "{}")) for e in run.executions):
                found.append(f"{where}: an execution's argument lacks {TOKEN}")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self) -> str:
        """The table, its fault line and its verdict lines."""
        count = Counter(run.fault for run in self.runs)
        answers = [answer for run in self.runs for answer in run.answers]
        started = sum(len(run.executions) for run in self.runs)
        header = (
            f"{'proxied job':<26}{'runs':>6}{'deliveries':>12}{'API calls':>11}{'executions':>12}"
            f"{'dup. skipped':>14}{'409s':>6}{'verdict':>9}"
        )
        line = (
            f"{'example/' + JOB_NAME:<26}{len(self.runs):>6}{len(answers):>12}{self.calls:>11}{started:>12}"
            f"{sum(a.outcome == 'duplicate' for a in answers):>14}{sum(a.status == 409 for a in answers):>6}"
            f"{'ok' if self.ok else 'FAIL':>9}"
        )
        faults = ", ".join(f"{name} {count[name]}" for name in FAULTS if name != "none" and count[name])
        lines = [
            header,
            "-" * len(header),
            line,
            f"faults injected: {faults}; instances replaced: {self.restarts}",
        ]
        if self.ok:
            lines.append(
                f"every run started exactly one workflow execution at the stand-in ({started} executions for "
                f"{len(self.runs)} runs), labelled with its run key, the key in its argument"
            )
        lines.extend(f"  FAIL {problem}" for problem in self.problems)
        return "\n".join(lines)


def proxy_env(target: Target, stand_in: GoogleApisStandIn) -> dict[str, str]:
    """The proxy's settings for `target`, as the stack sets them, pointed at the running stand-in,
    with anonymous credentials (see function_source): what every local proxy instance gets."""
    return {
        TARGET_VARIABLE: target_json(target),
        contract.TARGET_BASE_URL_VARIABLE: stand_in.url,
        "RUNONCE_LOCAL_ANONYMOUS_CREDENTIALS": "1",
    }


class ProxyHarness:
    """The stand-in and the proxy's instances; run() plays the runs, stop() ends everything."""

    def __init__(self, project: str, emulator_host: str, log_dir: Path, runs: int, seed: int):
        self.team = Team(name="example", project=project, region="europe-west1", jobs=[])
        self.job = Job(name=JOB_NAME, schedule="* * * * *", target=Workflow(WORKFLOW, {"table": "orders"}))
        self.stand_in = GoogleApisStandIn()
        self.runs = runs
        self.seed = seed
        self.log_dir = log_dir
        self.project = project
        self.emulator_host = emulator_host
        self.pool: InstancePool | None = None

    def start(self) -> None:
        self.stand_in.start()
        assert self.job.target is not None
        env = {
            contract.PROJECT_VARIABLE: self.project,
            "FIRESTORE_EMULATOR_HOST": self.emulator_host,
            contract.LEASE_VARIABLE: str(LEASE_SECONDS),
            contract.TARGET_TIMEOUT_VARIABLE: "2",
            **proxy_env(self.job.target, self.stand_in),
        }
        self.pool = InstancePool(
            "example-" + JOB_NAME, PROXY_SOURCE_DIR / "main.py", "handle", 2, env, self.log_dir
        )
        self.pool.start()

    def run(self) -> ProxyResult:
        """Deliver every run in turn, with its fault, until it gets a 2xx; count its executions."""
        assert self.pool is not None, "start() first"
        faults = [FAULTS[n % len(FAULTS)] for n in range(self.runs)]
        random.Random(self.seed).shuffle(faults)
        # The instances keep the real clock: the runs are the last minutes' (older ones are too_old).
        first = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=self.runs)
        runs = [ProxyRun(first + timedelta(minutes=n), fault) for n, fault in enumerate(faults)]
        for run in runs:
            before = {e["name"] for e in self.stand_in.resources("executions")}
            self._deliver(run)
            run.executions = [e for e in self.stand_in.resources("executions") if e["name"] not in before]
        return ProxyResult(runs, self.pool.restarts, len(self.stand_in.calls))

    def _send(self, run: ProxyRun) -> Answer:
        assert self.pool is not None
        headers = scheduler_headers(self.team, self.job, run.schedule_time)
        return self.pool.post("", headers, DEADLINE_SECONDS, DEADLINE_SECONDS)

    def _deliver(self, run: ProxyRun) -> None:
        if run.fault == "duplicate_delivery":
            run.answers.extend(both_at_once(lambda: self._send(run)))
        elif run.fault == "target_answer_dropped":
            self.stand_in.inject(Fault("drop", path_contains="/executions"))
            run.answers.append(self._send(run))
        elif run.fault == "instance_killed":
            run.answers.append(self._killed_after_start(run))
        else:
            run.answers.append(self._send(run))
        # A lost response: the 2xx never reaches Scheduler, which retries at least once.
        lost = run.fault == "lost_response"
        retry_until_ok(run.answers, lambda: self._send(run), lost, RETRY_SECONDS, MAX_ATTEMPTS)

    def _killed_after_start(self, run: ProxyRun) -> Answer:
        """Deliver, and SIGKILL the serving instance as soon as the stand-in has started the
        execution, while the stand-in holds its answer: runonce never writes the completion."""
        assert self.pool is not None
        started = threading.Event()

        def on_start(resource: dict) -> None:
            started.set()
            time.sleep(1.0)

        headers = scheduler_headers(self.team, self.job, run.schedule_time)
        with self.pool.acquire(DEADLINE_SECONDS) as instance:
            if instance is None:
                return Answer(None, error="no_instance")
            process = instance.process
            answers: list[Answer] = []
            self.stand_in.on_start = on_start
            try:
                sender = threading.Thread(
                    target=lambda: answers.append(post(instance.url, headers, b"", DEADLINE_SECONDS))
                )
                sender.start()
                if started.wait(DEADLINE_SECONDS):
                    self.pool.kill(instance)
                sender.join()
            finally:
                self.stand_in.on_start = None
            self.pool.died(instance, process)
            return answers[0] if answers else Answer(None, error="connection")

    def pids(self) -> list[int]:
        return self.pool.pids() if self.pool is not None else []

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()
        self.stand_in.stop()


PROXY_SOURCE_DIR = FUNCTIONS_DIR / PROXY_SOURCE
