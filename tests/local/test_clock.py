"""The accelerated clock that the scheduler and every instance share."""

import time
from datetime import UTC, datetime

from localscheduler.clock import AcceleratedClock

START = datetime(2026, 3, 29, tzinfo=UTC)


def test_simulated_time_runs_rate_times_faster_than_the_wall_clock():
    clock = AcceleratedClock(START, wall_start=1000.0, rate=60)
    assert clock.at_wall(1001.0) == datetime(2026, 3, 29, 0, 1, tzinfo=UTC)
    assert clock.wall_at(datetime(2026, 3, 29, 1, 0, tzinfo=UTC)) == 1060.0


def test_a_clock_rebuilt_from_its_spec_reads_the_same_time():
    clock = AcceleratedClock.starting_now(START, rate=120)
    wall = time.time()
    assert AcceleratedClock.from_spec(clock.spec()).at_wall(wall) == clock.at_wall(wall)
