"""README's events status table says what the code does."""

from __future__ import annotations

from runonce import Outcome
from tests.core.test_readme import _table


def test_the_push_status_table_lists_every_outcome_with_its_status():
    rows = {(int(row[0]), row[1].strip("`")) for row in _table("### What Pub/Sub push is answered")}
    assert rows == {(outcome.status, outcome.label) for outcome in Outcome}


def test_every_acknowledging_answer_is_200_which_the_service_and_the_emulator_both_ack():
    assert {outcome.status for outcome in Outcome if outcome.status < 300} == {200}
