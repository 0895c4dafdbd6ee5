"""`make demo` serves the example event job and every push event job of the team files, each from
its own folder with the faults that need nothing from it; an Eventarc job is not served; a bad
local_demo.toml stops the demo before anything starts."""

import pytest

from localscheduler.demo import EVENT_JOB, _event_harnesses
from localscheduler.demos.events import (
    DEMO_MIX,
    EXAMPLE,
    GENERIC_FAULTS,
    TEAM_CONFIG,
    TEAM_MIX,
    EventConfig,
    EventFunction,
    EventHarness,
)
from localscheduler.folder_file import FolderFileError
from localscheduler.pubsub.topology import PushPolicy
from stacks.team import EVENTARC, FUNCTIONS_DIR, EventJob, Team, load_teams


def _team(*event_jobs: EventJob) -> Team:
    return Team(
        name="others", project="runonce-others", region="europe-west1", jobs=[], event_jobs=list(event_jobs)
    )


def test_the_demo_serves_the_example_and_the_example_team_s_orders_job(tmp_path):
    harnesses = _event_harnesses(load_teams(), 7, tmp_path)
    assert [h.name for h in harnesses] == [EVENT_JOB, "example/orders"]
    example, orders = harnesses
    assert example.function == EXAMPLE
    assert orders.function == EventFunction(FUNCTIONS_DIR / "orders_events", "handle", {})
    assert (orders.mix, orders.config) == (TEAM_MIX, TEAM_CONFIG)
    assert set(TEAM_MIX) == set(GENERIC_FAULTS) and sum(TEAM_MIX.values()) == 20


def test_a_team_job_is_served_from_its_own_folder_entry_point_and_env(tmp_path):
    (tmp_path / "main.py").write_text("")
    job = EventJob(name="ship", source=str(tmp_path), entry_point="ship", env={"PARCELS": "parcels"})
    [_, harness] = _event_harnesses([_team(job)], 7, tmp_path / "logs")
    assert (harness.name, harness.pool.source, harness.pool.target) == (
        "others/ship",
        tmp_path / "main.py",
        "ship",
    )
    assert harness.pool.env == {"PARCELS": "parcels"}


def test_an_eventarc_job_is_not_served(tmp_path, capsys):
    job = EventJob(name="uploads", source="orders_events", trigger=EVENTARC)
    assert [h.name for h in _event_harnesses([_team(job)], 7, tmp_path)] == [EVENT_JOB]
    assert "others/uploads: not served (eventarc trigger" in capsys.readouterr().out


def test_a_bad_events_table_stops_the_demo_before_anything_starts(tmp_path):
    (tmp_path / "local_demo.toml").write_text("[events]\ndata = 3\n")
    with pytest.raises(FolderFileError, match=r"local_demo.toml: \[events\] data must be a non-empty string"):
        _event_harnesses([_team(EventJob(name="bad", source=str(tmp_path)))], 7, tmp_path / "logs")


@pytest.mark.fast
def test_the_demo_s_event_timing_leaves_every_planned_end_room_on_a_loaded_machine():
    assert EventConfig().margin_problems(DEMO_MIX) == []
    assert TEAM_CONFIG.margin_problems(TEAM_MIX) == []


@pytest.mark.fast
def test_a_timing_whose_planned_ends_depend_on_the_machine_s_speed_is_refused(tmp_path):
    tight = EventConfig(
        lease_seconds=13,
        policy=PushPolicy(max_delivery_attempts=12),
        exhausted_policy=PushPolicy(max_delivery_attempts=12),
    )
    assert tight.margin_problems(DEMO_MIX) == [
        "a slow job (11 s) must end within the lease (13 s) with 3.75 s to spare",
        "12 delivery attempts can run out within a 13 s lease: allow at least 15",
        "12 delivery attempts can take 94.5 s on a loaded machine, past the maximum event age (40 s)",
        "settle_seconds (150 s) must outlast the last planned end, a request timeout and an ack deadline "
        "on a loaded machine, then 4 s of quiet: allow at least 158.5",
    ]
    with pytest.raises(ValueError, match=r"^events-example: a slow job"):
        EventHarness("events-example", EXAMPLE, DEMO_MIX, 7, "p", tmp_path, tight)
