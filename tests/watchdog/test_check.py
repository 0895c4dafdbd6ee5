"""The watchdog's check (runonce.scheduler.watchdog) on a team's ledger: which expected runs past
their grace it reports, in which state, and that each is reported once however many ticks run.
Every test runs on the in-memory stores (fast tier) and on the Firestore emulator."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runonce._instant import Instant
from runonce.contract import MissedRun
from runonce.core.store import Claim, StoredResult, waiting_note
from runonce.scheduler.delivery import Delivery
from runonce.scheduler.expected import scheduled_key
from runonce.scheduler.keys import run_key
from runonce.scheduler.watchdog import MISSED_PREFIX, Watch, WatchedJob, check, missed_runs
from tests.watchdog.conftest import LEDGER_LEASE, WATCHDOG_LEASE, watchdog_lines

PROJECT, LOCATION, TEAM = "acme-prod", "europe-west1", "orders"
GRACE = timedelta(minutes=20)
T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)
SYNC = WatchedJob(
    job="sync",
    scheduler_job="orders-sync",
    schedule="*/10 * * * *",
    time_zone="Etc/UTC",
    grace=GRACE,
    lookback=timedelta(hours=2),
    since=T0 - timedelta(minutes=1),  # deployed just before the first run the tests deliver
)


def watch(*jobs: WatchedJob) -> Watch:
    return Watch(TEAM, PROJECT, LOCATION, jobs or (SYNC,))


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def key(time: datetime, job: WatchedJob = SYNC) -> str:
    return scheduled_key(job.scheduler_job, time, PROJECT, LOCATION)


def claim(store, run: str, clock, when: datetime) -> Claim:
    clock.current = when
    claimed = store.claim(run, {"job": "orders-sync"})
    assert isinstance(claimed, Claim), claimed
    return claimed


def completed(store, run: str, clock, when: datetime) -> None:
    assert store.complete(claim(store, run, clock, when), StoredResult.of({"ok": True})) is not None


def ticked(stores, clock, when: datetime, capsys) -> tuple[dict, list[dict]]:
    """One tick at `when`: its summary and the lines it wrote."""
    clock.current = when
    summary = check(watch(), stores.ledger, stores.claims)
    return summary, watchdog_lines(capsys.readouterr().out)


def times(lines: list[dict]) -> list[str]:
    return [line["schedule_time"] for line in lines]


def test_a_gap_in_the_ledger_is_reported_as_never_delivered(stores, clock, capsys):
    for minute in range(10, 130, 10):
        if minute not in (40, 90):
            completed(stores.ledger, key(at(minute)), clock, at(minute) + timedelta(seconds=3))
    summary, lines = ticked(stores, clock, at(125), capsys)
    # (now - 2 h, now - 20 min] = (00:05, 01:45]: ten expected runs, two without a record.
    assert times(lines) == ["2026-11-29T00:40:00Z", "2026-11-29T01:30:00Z"]
    assert {line["missed_run"] for line in lines} == {MissedRun.NEVER_DELIVERED.value}
    assert summary == {"jobs": 1, "missed": 2, "reported": 2}


def test_a_job_in_a_region_of_its_own_is_judged_by_the_keys_of_that_region(stores, clock, capsys):
    # An App Engine job's Scheduler job is in the application's region, which its run keys hash.
    london = replace(SYNC, location="europe-west2")
    for minute in (0, 10, 20):
        run = scheduled_key(SYNC.scheduler_job, at(minute), PROJECT, "europe-west2")
        completed(stores.ledger, run, clock, at(minute) + timedelta(seconds=3))
    completed(stores.ledger, key(at(30)), clock, at(30) + timedelta(seconds=3))  # the team's region
    clock.current = at(55)
    summary = check(watch(london), stores.ledger, stores.claims)
    lines = watchdog_lines(capsys.readouterr().out)
    assert times(lines) == ["2026-11-29T00:30:00Z"]
    assert lines[0]["run_key"] == scheduled_key(SYNC.scheduler_job, at(30), PROJECT, "europe-west2")
    assert summary == {"jobs": 1, "missed": 1, "reported": 1}


def test_a_run_that_waited_for_the_run_before_it_until_its_retries_ran_out_is_waited_out(
    stores, clock, capsys
):
    for minute in range(10, 130, 10):
        if minute not in (40, 90):
            completed(stores.ledger, key(at(minute)), clock, at(minute) + timedelta(seconds=3))
    waited = key(at(40))  # a wait job's run answered 409 while 00:30 held the job: a note, no record
    stores.ledger.note(waiting_note(waited), {"waiting_run": waited, "waiting_for": key(at(30))})
    _, lines = ticked(stores, clock, at(125), capsys)
    found = {line["schedule_time"]: line["missed_run"] for line in lines}
    assert found == {
        "2026-11-29T00:40:00Z": MissedRun.WAITED_OUT.value,
        "2026-11-29T01:30:00Z": MissedRun.NEVER_DELIVERED.value,
    }


def test_the_line_has_the_shape_the_monitoring_metric_reads(stores, clock, capsys):
    clock.current = at(35)
    check(watch(replace(SYNC, since=at(5))), stores.ledger, stores.claims)  # expects 00:10 only
    [line] = watchdog_lines(capsys.readouterr().out)
    assert set(line) == {
        "severity",
        "message",
        "logger",
        "runonce_version",
        "missed_run",
        "job",
        "scheduler_job",
        "schedule_time",
        "run_key",
        "command",
    }
    assert line["severity"] == "ERROR"
    assert line["logger"] == "runonce.watchdog"
    assert line["job"] == "sync" and line["scheduler_job"] == "orders-sync"
    assert line["run_key"] == key(datetime.fromisoformat(line["schedule_time"]))
    assert line["command"] == f"runonce show --team orders --job sync --time {line['schedule_time']}"


def test_a_forced_run_does_not_stand_for_the_scheduled_run(stores, clock, capsys):
    forced = Delivery("orders-sync", Instant(at(10), 0), PROJECT, LOCATION, forced=True)
    completed(stores.ledger, run_key(forced), clock, at(10))
    completed(stores.ledger, key(at(20)), clock, at(20))
    _, lines = ticked(stores, clock, at(45), capsys)  # (-75 min, 25 min]: 00:00, 00:10, 00:20
    assert times(lines) == ["2026-11-29T00:00:00Z", "2026-11-29T00:10:00Z"]


def test_a_claim_with_a_live_lease_past_the_grace_is_still_held(stores, clock, capsys):
    held = claim(stores.ledger, key(at(10)), clock, at(10))
    assert stores.ledger.hold(held, 3600, "outcome unknown")
    completed(stores.ledger, key(at(0)), clock, at(0))
    _, [line] = ticked(stores, clock, at(35), capsys)
    assert line["missed_run"] == MissedRun.STILL_HELD.value
    assert line["schedule_time"] == "2026-11-29T00:10:00Z"


def test_a_claim_left_behind_with_its_lease_run_out_is_retried_out(stores, clock, capsys):
    claim(stores.ledger, key(at(10)), clock, at(10))  # the attempt dies; no retry takes it over
    completed(stores.ledger, key(at(0)), clock, at(0))
    assert at(10) + LEDGER_LEASE < at(35)
    _, [line] = ticked(stores, clock, at(35), capsys)
    assert line["missed_run"] == MissedRun.RETRIED_OUT.value


def test_a_failed_run_is_finished(stores, clock, capsys):
    assert stores.ledger.fail(claim(stores.ledger, key(at(0)), clock, at(0)), "no source")
    completed(stores.ledger, key(at(10)), clock, at(10))
    _, lines = ticked(stores, clock, at(35), capsys)
    assert lines == []


def test_a_run_that_finishes_after_its_grace_is_not_missed_once_it_has(stores, clock, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    late = claim(stores.ledger, key(at(10)), clock, at(10))
    clock.current = at(10) + GRACE + timedelta(minutes=4)
    assert stores.ledger.complete(late, StoredResult.of(1)) is not None
    _, lines = ticked(stores, clock, at(35), capsys)
    assert lines == []


def test_a_run_still_within_its_grace_is_not_judged(stores, clock, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    claim(stores.ledger, key(at(10)), clock, at(10))
    _, lines = ticked(stores, clock, at(29), capsys)  # 00:10 + 20 min grace is 00:30
    assert lines == []


def test_no_run_is_expected_before_the_job_existed(stores, clock, capsys):
    added = replace(SYNC, since=at(42))  # deployed mid-window
    clock.current = at(125)
    summary = check(watch(added), stores.ledger, stores.claims)
    lines = watchdog_lines(capsys.readouterr().out)
    assert times(lines) == [
        f"2026-11-29T{h:02d}:{m:02d}:00Z" for h, m in [(0, 50), (1, 0), (1, 10), (1, 20), (1, 30), (1, 40)]
    ]
    assert summary["missed"] == 6


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        # Spring forward in Berlin on 29 March 2026: 02:30 local does not exist that day, and
        # cronsim fires once as the gap ends, at 03:00 local (01:00 UTC).
        (
            "2026-03-27T12:00:00Z",
            "2026-03-31T12:00:00Z",
            ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"],
        ),
        # Fall back on 25 October 2026: 02:30 local happens twice, the run comes once (the first).
        (
            "2026-10-24T12:00:00Z",
            "2026-10-26T12:00:00Z",
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        ),
    ],
)
def test_dst_transitions_expect_the_runs_scheduler_makes(stores, clock, capsys, start, end, expected):
    nightly = WatchedJob(
        job="settle",
        scheduler_job="orders-settle",
        schedule="30 2 * * *",
        time_zone="Europe/Berlin",
        grace=GRACE,
        lookback=timedelta(days=4),
        since=datetime.fromisoformat(start),
    )
    clock.current = datetime.fromisoformat(end) + GRACE
    check(watch(nightly), stores.ledger, stores.claims)
    assert times(watchdog_lines(capsys.readouterr().out)) == expected


def test_overlapping_ticks_report_each_missed_run_once(stores, clock, capsys):
    reported: list[str] = []
    for minute in range(35, 200, 10):  # a tick every 10 minutes; each window overlaps the last
        _, lines = ticked(stores, clock, at(minute), capsys)
        reported += times(lines)
    assert len(reported) == len(set(reported))
    expected = [(at(0) + timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M:%SZ") for m in range(0, 180, 10)]
    assert reported == expected


def test_concurrent_ticks_report_each_missed_run_once(stores, clock, capsys):
    clock.current = at(125)
    summaries: list[dict] = []
    ticks = [
        threading.Thread(target=lambda: summaries.append(check(watch(), stores.ledger, stores.claims)))
        for _ in range(6)
    ]
    for tick in ticks:
        tick.start()
    for tick in ticks:
        tick.join()
    lines = watchdog_lines(capsys.readouterr().out)
    assert sorted(times(lines)) == sorted(set(times(lines)))
    assert len(lines) == 10  # (00:05, 01:45], none delivered
    assert sum(summary["reported"] for summary in summaries) == 10
    assert all(summary["missed"] == 10 for summary in summaries)


def test_a_tick_that_died_after_claiming_a_report_is_taken_over_after_the_lease(stores, clock, capsys):
    completed(stores.ledger, key(at(0)), clock, at(0))
    claim(stores.claims, MISSED_PREFIX + key(at(10)), clock, at(35))  # claimed; its line never written
    _, lines = ticked(stores, clock, at(36), capsys)
    assert lines == []  # another tick is (as far as this one can tell) reporting it
    _, [line] = ticked(stores, clock, at(35) + WATCHDOG_LEASE + timedelta(seconds=1), capsys)
    assert line["schedule_time"] == "2026-11-29T00:10:00Z"


def test_missed_runs_reads_one_record_per_expected_run_and_the_waiting_note_of_each_unrecorded_one(
    stores, clock
):
    reads: list[str] = []
    ledger = stores.ledger
    original = ledger.read

    def counted(run: str):
        reads.append(run)
        return original(run)

    ledger.read = counted  # type: ignore[method-assign]
    completed(ledger, key(at(10)), clock, at(10))
    reads.clear()
    assert len(list(missed_runs(watch(), ledger, at(125)))) == 9
    unrecorded = [key(at(m)) for m in range(20, 110, 10)]
    assert sorted(reads) == sorted([key(at(10)), *unrecorded, *(waiting_note(run) for run in unrecorded)])


def test_a_tick_reads_its_records_several_at_a_time(stores, clock):
    # A day of a job every two minutes is 720 reads: one at a time, a large team's tick would
    # outlast its timeout. Each read here waits (up to 2 s) until four are in flight.
    lock, enough = threading.Lock(), threading.Event()
    in_flight: list[int] = [0, 0]  # now, most
    original = stores.ledger.read

    def slow(run: str):
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
            if in_flight[0] >= 4:
                enough.set()
        enough.wait(2)
        try:
            return original(run)
        finally:
            with lock:
                in_flight[0] -= 1

    stores.ledger.read = slow  # type: ignore[method-assign]
    assert len(list(missed_runs(watch(), stores.ledger, at(125)))) == 10
    assert in_flight[1] >= 4
