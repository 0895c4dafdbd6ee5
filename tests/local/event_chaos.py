"""The event chaos suites' properties of the event guarantee, asserted on one `EventHarness`
outcome wherever its instances ran: tests/local/test_event_chaos.py (functions-framework serving
functions/events_example) and tests/hosts/test_event_chaos.py (a Flask view on gunicorn, a FastAPI
route on uvicorn) collect these tests by subclassing `EventChaosProperties`, each giving the
fixture `outcome` (an `EventResult`).

Every published message has exactly one effect or exactly one dead letter with its reason, none
is lost, no body of a message starts again after one that ended normally nor while another one
runs, and each fault ends as it must. What each message was to end as is read from the outcome
(the fault and the fate planned for it when it was published), so a suite's mix is its own.
"""

from __future__ import annotations

from collections import Counter

from localscheduler.demos.events import EventResult
from localscheduler.verdicts.events import COMPLETED, event_summary, render_events


def published(outcome: EventResult) -> Counter[str]:
    """How many messages carried each fault."""
    return Counter(v.message.fault for v in outcome.verdicts)


def show(outcome: EventResult) -> None:
    """Print the table, the faults and the verdict."""
    print()
    print(render_events([outcome.row]))
    print(outcome.faults(), f"; {outcome.seconds:.0f} s")
    for line in event_summary(outcome.verdicts, outcome.strays):
        print(line)


class EventChaosProperties:
    """The properties as tests: a test module collects them by subclassing this as a `Test...`
    class and gives the fixture `outcome` (see the module docstring)."""

    def test_every_message_ended_before_the_timeout(self, outcome):
        assert outcome.settled

    def test_every_message_has_exactly_one_effect_or_one_dead_letter_and_none_ran_twice(self, outcome):
        bad = [
            f"{v.message.message_id} ({v.message.fault}): {'; '.join(v.problems)}"
            for v in outcome.verdicts
            if not v.ok
        ]
        assert bad == []

    def test_no_dead_letter_belongs_to_an_unpublished_message(self, outcome):
        assert outcome.strays == []

    def test_effects_and_dead_letters_add_up_to_the_published_messages(self, outcome):
        row = outcome.row
        assert row.effects + row.dead_lettered == row.published
        assert row.effects == sum(v.message.expected == COMPLETED for v in outcome.verdicts)

    def test_each_fault_ends_as_it_must(self, outcome):
        fates = Counter((v.message.fault, v.fate) for v in outcome.verdicts)
        assert fates == Counter((v.message.fault, v.message.expected) for v in outcome.verdicts)

    def test_a_body_run_again_after_a_kill_that_followed_the_effect_found_the_effect(self, outcome):
        killed = [v for v in outcome.verdicts if v.message.fault == "kill_after_effect"]
        assert killed
        assert [(v.effects, v.found) for v in killed] == [(1, 1)] * len(killed)

    def test_the_faults_really_happened(self, outcome):
        mix = published(outcome)
        pushes = Counter(p.outcome for p in outcome.pushes)
        assert pushes["lost_ack"] == mix["lost_ack"]  # each lost once, then answered duplicate
        assert pushes["duplicate"] >= mix["lost_ack"]
        assert pushes["instance_died"] >= mix["kill_before_effect"] + mix["kill_after_effect"]
        assert outcome.restarts >= mix["kill_before_effect"] + mix["kill_after_effect"]
        assert pushes["in_progress"] >= mix["slow"]  # the ack deadline passed while the slow jobs ran
        assert outcome.row.deliveries > outcome.row.published
