"""`make bench`'s overlap part (benchmarks/overlap.py) on the session's emulator: every policy's
happy path costs the two round trips of `allow` (two Commits), and each row's answer is the one
its policy gives."""

from __future__ import annotations

from benchmarks.overlap import HAPPY, PROJECT, measure, report
from emulator.wire import TappedClient, WireTap


def test_the_overlap_bench_counts_two_commits_on_every_policys_happy_path(firestore_emulator):
    tap = WireTap()
    rows = measure(tap, TappedClient(tap, project=PROJECT))
    assert {policy: dict(calls) for policy, (calls, _) in rows[HAPPY].items()} == {
        policy: {"Commit": 2} for policy in ("allow", "skip", "wait")
    }
    held = rows["new run while another run holds the job"]
    assert {policy: outcome for policy, (_, outcome) in held.items()} == {
        "allow": "completed",
        "skip": "skipped",
        "wait": "waiting",
    }
    lines, met = report(rows)
    assert met and lines[-1].startswith("verdict: target met")
