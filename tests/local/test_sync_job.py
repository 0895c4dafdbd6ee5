"""The example's incremental job (functions/sync): where each run's window starts, read from the
previous completed run's result (`current_run().previous`), on the runonce `Run` it is handed."""

from __future__ import annotations

import importlib.util

import pytest

from runonce import PermanentError, Run
from runonce.core.store import Previous, StoredResult
from stacks.team import FUNCTIONS_DIR

pytestmark = pytest.mark.fast

_spec = importlib.util.spec_from_file_location("sync_main", FUNCTIONS_DIR / "sync" / "main.py")
assert _spec is not None and _spec.loader is not None
sync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync)


def run(previous: Previous | None) -> Run:
    return Run(
        "key", "example-catalog-sync", "2026-12-07T08:05:00Z", "p", "l", False, "a", 1, lambda: previous
    )


def test_the_first_run_starts_at_sync_start():
    assert sync.since(run(None)) == sync.START


def test_a_run_starts_where_the_previous_completed_run_ended():
    previous = Previous("k0", "2026-12-07T08:00:00Z", StoredResult.of({"until": "2026-12-07T08:00:00Z"}))
    assert sync.since(run(previous)) == "2026-12-07T08:00:00Z"


def test_a_previous_run_whose_result_was_not_kept_is_a_permanent_failure_naming_the_fix():
    previous = Previous("k0", "2026-12-07T08:00:00Z", StoredResult.not_stored("70000 bytes of JSON"))
    with pytest.raises(PermanentError, match=r"70000 bytes of JSON.*SYNC_START"):
        sync.since(run(previous))


def test_each_window_has_one_outbox_document_named_by_job_and_window():
    assert sync.window_id("example-catalog-sync", "a", "b") == "example-catalog-sync:a:b"
    assert sync.window_id("j", "a", "b") != sync.window_id("j", "a", "c")
