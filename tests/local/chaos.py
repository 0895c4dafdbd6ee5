"""What the chaos suites share: the teams and jobs they schedule (`chaos_teams`, `chaos_jobs`,
`unkeyed_team`), one simulation (`simulate`), and the properties of the guarantee, as
docs/library.md states it, asserted on one simulation's outcome wherever its instances ran and
whichever store they kept their runs in: tests/local/test_chaos.py (functions-framework on the
Firestore emulator), tests/local/test_valkey_chaos.py (functions-framework on a Valkey server) and
tests/hosts/test_chaos.py (gunicorn Flask and Django, uvicorn FastAPI) collect these tests by
subclassing `ChaosProperties`, each giving the fixtures they read: `chaos` (the `Result` and its
ledger records by key) for jobs whose effect is keyed by the run key, and `unkeyed` (a `Result`)
for a job whose effect is not.

At most one attempt holds a run at a time, a job body starts again only after an attempt died or
failed retryably, and a keyed effect happens exactly once; without the key, the kill after the
effect gives a run two effects.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from google.cloud import firestore

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.scheduler.faults import Fault, FaultMix
from localscheduler.store import FirestoreLedger, Ledger
from localscheduler.verdicts.scheduled import RunVerdict, fault_summary, guarantee_summary, render
from stacks.team import Job, Retry, Team
from tests.conftest import PROJECT

# Retries at 1, 3, 7, 15, 25 s: a killed attempt's run is taken over well inside its minute.
FAST_RETRY = Retry(retry_count=5, min_backoff_seconds=1, max_backoff_seconds=10, max_doublings=3)


def chaos_job(name: str, schedule: str, time_zone: str, retry: Retry = FAST_RETRY, **env: str) -> Job:
    """A job of the example's code (functions/report, or a service's `close`), fast to retry."""
    return Job(
        name=name,
        schedule=schedule,
        time_zone=time_zone,
        source="report",
        timeout_seconds=30,
        attempt_deadline_seconds=15,
        retry=retry,
        env=env,
    )


def chaos_jobs() -> list[Job]:
    """Three jobs in three time zones (one across Europe/Berlin's switch to summer time), every
    minute, every two and every three: the longer intervals leave room for forced runs."""
    return [
        chaos_job("every-minute", "* * * * *", "Etc/UTC"),
        chaos_job(
            "berlin-even",
            "*/2 * * * *",
            "Europe/Berlin",
            Retry(retry_count=5, min_backoff_seconds=5, max_backoff_seconds=60),
        ),
        chaos_job("new-york-third", "*/3 * * * *", "America/New_York", Retry()),
    ]


def chaos_teams(suffix: str = "") -> list[Team]:
    """The chaos jobs in one project, and a job of the same id in another project and region: a
    run of its own, never a duplicate of the first's. A suite that shares the Firestore emulator
    with another gives its projects a `suffix`: other projects, other run keys, other effects."""
    return [
        Team(name="chaos", project=f"runonce-chaos{suffix}", region="europe-west1", jobs=chaos_jobs()),
        Team(
            name="chaos-west",
            project=f"runonce-chaos-west{suffix}",
            region="us-central1",
            jobs=[chaos_job("every-minute", "* * * * *", "America/Los_Angeles")],
        ),
    ]


# The example job (loaded from EXAMPLE, which `unkeyed_team` sets) with its effect appended,
# `add()`, instead of created on the run key.
UNKEYED_JOB = """
import importlib.util

_spec = importlib.util.spec_from_file_location("report_job", EXAMPLE)
report_job = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_job)


def _append(run):
    outbox = report_job._client().collection(report_job.OUTBOX)
    outbox.add({"run_key": run.key, "job": run.job, "attempt_id": run.attempt_id})
    return True


report_job.publish = _append
handle = report_job.handle
"""


def unkeyed_team(source: Path, suffix: str = "") -> Team:
    """A team whose one job is the example's with its effect not keyed by the run key, written
    to the folder `source`; its project ends with `suffix` (see `chaos_teams`)."""
    example = Job(name="report", schedule="* * * * *", source="report").source_dir / "main.py"
    (source / "main.py").write_text(f"EXAMPLE = {str(example)!r}\n" + UNKEYED_JOB)
    (source / "local_demo.toml").write_text((example.parent / "local_demo.toml").read_text())
    job = Job(
        name="unkeyed",
        schedule="* * * * *",
        source=str(source),
        timeout_seconds=30,
        attempt_deadline_seconds=15,
        retry=FAST_RETRY,
    )
    return Team(name="unkeyed", project=f"runonce-unkeyed{suffix}", region="europe-west1", jobs=[job])


def simulate(
    teams: list[Team],
    start: datetime,
    span: timedelta,
    rate: float,
    mix: FaultMix,
    log_dir: Path,
    emulator_host: str,
    store: str | None = None,
) -> Result:
    """Serve the teams' jobs with three instances each, their runs kept in `store` (a Valkey
    server's URL; None: the Firestore emulator), and play `span` of schedule from `start` with `mix`."""
    sim = Simulation(
        teams, start, span, rate, mix, log_dir, PROJECT, emulator_host, instances_per_job=3, store=store
    )
    try:
        sim.start_instances()
        return sim.run()
    finally:
        sim.stop()


def failing(result: Result, *fragments: str) -> list:
    """The runs whose verdict names a problem containing one of `fragments`."""
    return [
        (v.trigger.run.job.name, v.trigger.run.schedule_time.isoformat(), v.trigger.forced, problem)
        for v in result.verdicts
        for problem in v.problems
        if any(fragment in problem for fragment in fragments)
    ]


def run_of(verdict: RunVerdict) -> tuple[str, str, datetime, bool]:
    """The journal's identity of a verdict's run: team, job, ScheduleTime, forced."""
    run = verdict.trigger.run
    return (run.team.name, run.job.name, run.schedule_time, verdict.trigger.forced)


def killed_after_effect(result: Result) -> list[RunVerdict]:
    """The verdicts of the runs whose instance died right after the job's effect."""
    killed = {
        (s.team, s.job, s.schedule_time, s.forced)
        for s in result.journal.sent()
        if s.fault == Fault.KILLED_AFTER_EFFECT.value and s.killed
    }
    return [v for v in result.verdicts if run_of(v) in killed]


def ledger_records(teams: list[Team], runs: Ledger | None = None) -> dict[str, dict]:
    """The ledger records of the teams' runs, by key, from `runs` (default: the Firestore emulator's)."""
    projects = {team.project for team in teams}
    records = (runs or FirestoreLedger(firestore.Client(project=PROJECT))).records()
    return {key: record for key, record in records.items() if record.get("project") in projects}


def show(result: Result, records: dict[str, dict]) -> None:
    """Print the simulation's table, faults, sizes and verdict, and every failing run."""
    print()
    print(render(result.rows))
    print(fault_summary(result.journal) + f"; instances replaced: {result.restarts}")
    print(
        f"runs: {sum(not t.forced for t in result.plan)} scheduled + "
        f"{sum(t.forced for t in result.plan)} forced; deliveries {len(result.journal.sent())}; "
        f"ledger records {len(records)}"
    )
    print("\n".join(guarantee_summary(result.verdicts)))
    for verdict in result.verdicts:
        if not verdict.ok:
            run = verdict.trigger.run
            print(f"  FAIL {run.team.name}/{run.job.name} {run.schedule_time:%H:%M} {verdict.problems}")


class ChaosProperties:
    """The properties as tests: a test module collects them by subclassing this as a `Test...`
    class and gives the fixtures `chaos` and `unkeyed` (see the module docstring)."""

    def test_every_fault_type_is_injected(self, chaos):
        result, _ = chaos
        sent = result.journal.sent()
        injected = Counter(s.fault for s in sent if s.attempt == 1 and not s.copy)
        missing = [fault.value for fault in Fault if fault is not Fault.NONE and injected[fault.value] == 0]
        assert not missing, f"faults never injected: {missing}"
        assert any(s.killed for s in sent), "no instance was killed mid-run"
        assert any(trigger.forced for trigger in result.plan), "no forced run"

    def test_every_run_passes_its_verdict(self, chaos):
        result, _ = chaos
        assert failing(result, "") == []

    def test_each_run_has_exactly_one_effect_or_one_recorded_permanent_failure_within_its_window(self, chaos):
        result, _ = chaos
        assert failing(result, "executed", "never", "retry window", "effect written by") == []
        assert all(v.effects + (v.status == "failed") == 1 for v in result.verdicts)

    def test_no_two_bodies_of_one_run_ever_ran_at_the_same_time(self, chaos):
        result, _ = chaos
        assert failing(result, "at the same time", "never ended") == []

    def test_a_run_is_finished_by_the_attempt_that_ran_its_last_body(self, chaos):
        result, _ = chaos
        assert failing(result, "finished by attempt") == []

    def test_a_body_ran_again_only_after_its_attempt_was_killed_or_failed_retryably(self, chaos):
        result, _ = chaos
        assert failing(result, "started again") == []
        assert sum(v.bodies > 1 for v in result.verdicts) > 0, (
            "no run needed a second body; faults did not bite"
        )

    def test_a_run_killed_after_its_effect_ran_its_body_again_and_still_has_one_effect(self, chaos):
        result, _ = chaos
        hit = killed_after_effect(result)
        assert len(hit) >= 3
        assert [(v.status, v.effects, v.bodies >= 2, v.found_effect) for v in hit] == [
            ("completed", 1, True, 1)
        ] * len(hit)

    def test_only_a_body_after_a_kill_after_the_effect_found_the_effect_already_written(self, chaos):
        result, _ = chaos
        assert failing(result, "which started no body") == []
        found = [v.trigger.key for v in result.verdicts if v.found_effect]
        assert found
        assert set(found) <= {v.trigger.key for v in killed_after_effect(result)}

    def test_forced_runs_do_not_swallow_the_scheduled_run_they_borrow_the_time_from(self, chaos):
        result, _ = chaos
        verdicts = {run_of(v): v for v in result.verdicts}
        borrowed = [key for key in verdicts if key[3]]
        assert borrowed
        for team, job, moment, _ in borrowed:
            scheduled = verdicts.get((team, job, moment, False))
            if scheduled is not None:
                assert scheduled.status in ("completed", "failed") and scheduled.ok

    def test_every_ledger_record_has_an_expiry(self, chaos):
        _, records = chaos
        assert records
        assert [key for key, record in records.items() if "expire_at" not in record] == []

    def test_without_the_run_key_a_kill_after_the_effect_gives_the_run_a_second_effect(self, unkeyed):
        rerun = [v for v in killed_after_effect(unkeyed) if v.bodies >= 2]
        assert len(rerun) >= 2
        assert {(v.status, v.effects) for v in rerun} == {("completed", 2)}
        assert all("executed 2 times" in v.problems for v in rerun)
