"""The demo's services: runonce in Cloud Run services, not functions. gunicorn serving a Flask app
and a Django app, uvicorn serving a FastAPI app (`async def` job), each app from
localscheduler/hosts/apps on real server processes (`localscheduler.hosts.service`), two
instances each, against the Firestore emulator, on the real clock. With `installed_python` (as
`make demo` runs them) the servers import runonce from its wheel installed in a fresh venv, not
from the source tree; each effect records where runonce came from.

Each run is delivered Scheduler-style (the same headers, retried until a 2xx) with one fault of
`FAULTS`: two copies at once, a lost 2xx (the run delivered again), an attempt deadline shorter
than the job (Scheduler gives up, retries while the body still runs), the instance killed
mid-run holding the claim (`pool.KILL_HEADER`), or killed right after the effect, before runonce
writes the completion. The verdict counts each run's effects where the job wrote them (documents
of the service's outbox carrying the run key, localscheduler/hosts/apps/job.py): exactly one
effect per run, and a 2xx for every run.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from google.cloud import firestore

from localscheduler.hosts.apps.job import DIE_AFTER_EFFECT_HEADER, RUN_KEY_FIELD, RUNONCE_FIELD, WORK_HEADER
from localscheduler.hosts.pool import KILL_HEADER
from localscheduler.hosts.service import Service
from localscheduler.scheduler.delivery import Answer, both_at_once, retry_until_ok, scheduler_headers
from localscheduler.side_by_side import side_by_side
from runonce import contract
from runonce._instant import Instant
from runonce.scheduler.delivery import Delivery
from runonce.scheduler.keys import run_key
from stacks.naming import scheduler_job_name
from stacks.team import Job, Team

FAULTS = (
    "none",
    "duplicate_delivery",
    "lost_response",
    "short_deadline",
    "instance_killed",
    "killed_after_effect",
)
LEASE_SECONDS = 3
"""The services' run lease (wall seconds): a killed attempt's retry takes over after it."""
WORK_SECONDS = 0.2
SHORT_WORK_SECONDS = 1.5
"""The job's duration on a run with a short deadline, longer than SHORT_DEADLINE_SECONDS."""
SHORT_DEADLINE_SECONDS = 0.5
RETRY_SECONDS = 0.5
DEADLINE_SECONDS = 10.0
MAX_ATTEMPTS = 40
LEDGER = "services_runs"


@dataclass
class ServiceRun:
    """One run of a service's job and what happened to it."""

    schedule_time: datetime
    fault: str
    key: str
    answers: list[Answer] = field(default_factory=list)
    effects: int = 0
    """Documents in the service's outbox carrying this run's key."""


@dataclass
class ServiceResult:
    """A service's runs, with their answers and effects."""

    service: str
    runs: list[ServiceRun]
    restarts: int
    imported_from: set[str] = field(default_factory=set)
    """Where the instances that wrote the effects imported runonce from."""

    @property
    def problems(self) -> list[str]:
        found = []
        for run in self.runs:
            where = f"{self.service} run {run.schedule_time:%H:%M}Z ({run.fault})"
            if not any(answer.ok for answer in run.answers):
                found.append(f"{where} never got a 2xx")
            if run.effects != 1:
                found.append(f"{where} had {run.effects} effects")
        return found

    @property
    def ok(self) -> bool:
        return not self.problems

    def row(self) -> str:
        answers = [answer for run in self.runs for answer in run.answers]
        effects = sum(run.effects for run in self.runs)
        return (
            f"{self.service:<26}{len(self.runs):>6}{len(answers):>12}{effects:>9}"
            f"{sum(a.outcome == 'duplicate' for a in answers):>14}{sum(a.status == 409 for a in answers):>6}"
            f"{self.restarts:>10}{'ok' if self.ok else 'FAIL':>9}"
        )


HEADER = (
    f"{'service':<26}{'runs':>6}{'deliveries':>12}{'effects':>9}{'dup. skipped':>14}{'409s':>6}"
    f"{'replaced':>10}{'verdict':>9}"
)


def render(results: list[ServiceResult]) -> str:
    """The table (a row per service), the faults played and the verdict lines."""
    lines = [HEADER, "-" * len(HEADER), *(result.row() for result in results)]
    count = Counter(run.fault for result in results for run in result.runs)
    faults = ", ".join(f"{name} {count[name]}" for name in FAULTS if name != "none" and count[name])
    runs = sum(len(result.runs) for result in results)
    lines.append(f"faults injected: {faults} (in {runs} runs); a kill's instance is replaced")
    imported = sorted({where for result in results for where in result.imported_from})
    lines.append(f"runonce imported from: {', '.join(imported)}")
    if all(result.ok for result in results):
        lines.append(f"every run of every service had exactly one effect and a 2xx ({runs} runs)")
    lines.extend(f"  FAIL {problem}" for result in results for problem in result.problems)
    return "\n".join(lines)


class ServiceHarness:
    """One service's instances; start(), play() its runs, judge() them, stop()."""

    def __init__(
        self, service: Service, project: str, emulator_host: str, log_dir: Path, runs: int, seed: int
    ):
        self.service = service
        self.team = Team(name="example", project=project, region="europe-west1", jobs=[])
        self.job = Job(name=f"{service.name}-close", schedule="* * * * *")
        self.runs = runs
        self.seed = seed
        self.project = project
        self.pool = service.pool(
            service.name,
            2,
            {
                contract.PROJECT_VARIABLE: project,
                "FIRESTORE_EMULATOR_HOST": emulator_host,
                contract.LEASE_VARIABLE: str(LEASE_SECONDS),
                contract.COLLECTION_VARIABLE: LEDGER,
            },
            log_dir / service.name,
        )
        self.played: list[ServiceRun] = []

    def start(self) -> None:
        self.pool.start()

    def play(self) -> None:
        """Deliver every run in turn, with its fault, until it gets a 2xx."""
        faults = [FAULTS[n % len(FAULTS)] for n in range(self.runs)]
        random.Random(self.seed).shuffle(faults)
        # The real clock: the runs are the last minutes' (older ones would be too old).
        first = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=self.runs)
        job = scheduler_job_name(self.team.name, self.job.name)
        for n, fault in enumerate(faults):
            moment = first + timedelta(minutes=n)
            run = ServiceRun(
                moment,
                fault,
                run_key(Delivery(job, Instant(utc=moment, nanos=0), self.project, self.team.region, False)),
            )
            self._deliver(run)
            self.played.append(run)

    def judge(self) -> ServiceResult:
        """Count each run's effects in the service's outbox, by the run key they carry."""
        client = firestore.Client(project=self.project)
        documents = [document.to_dict() or {} for document in client.collection(self.service.outbox).stream()]
        effects = Counter(document.get(RUN_KEY_FIELD) for document in documents)
        for run in self.played:
            run.effects = effects[run.key]
        imported = {str(document.get(RUNONCE_FIELD)) for document in documents}
        return ServiceResult(self.service.name, self.played, self.pool.restarts, imported)

    def _send(
        self, run: ServiceRun, deadline: float = DEADLINE_SECONDS, extra: dict[str, str] | None = None
    ) -> Answer:
        headers = {
            **scheduler_headers(self.team, self.job, run.schedule_time),
            WORK_HEADER: str(SHORT_WORK_SECONDS if run.fault == "short_deadline" else WORK_SECONDS),
            **(extra or {}),
        }
        return self.pool.post("", headers, deadline, DEADLINE_SECONDS)

    def _deliver(self, run: ServiceRun) -> None:
        if run.fault == "duplicate_delivery":
            run.answers.extend(both_at_once(lambda: self._send(run)))
        elif run.fault == "short_deadline":
            run.answers.append(self._send(run, SHORT_DEADLINE_SECONDS))
        elif run.fault == "instance_killed":
            run.answers.append(self._send(run, extra={KILL_HEADER: run.key}))
        elif run.fault == "killed_after_effect":
            run.answers.append(self._send(run, extra={DIE_AFTER_EFFECT_HEADER: run.key}))
        else:
            run.answers.append(self._send(run))
        # A lost response: the 2xx never reaches Scheduler, which retries at least once.
        lost = run.fault == "lost_response"
        retry_until_ok(run.answers, lambda: self._send(run), lost, RETRY_SECONDS, MAX_ATTEMPTS)

    def pids(self) -> list[int]:
        return self.pool.pids()

    def stop(self) -> None:
        self.pool.stop()


def play_services(harnesses: list[ServiceHarness]) -> list[ServiceResult]:
    """Start every service's instances, play them side by side, judge each."""
    for harness in harnesses:
        harness.start()
    side_by_side([harness.play for harness in harnesses])
    return [harness.judge() for harness in harnesses]
