"""Play one simulation for a test module: start its instances, play the schedule, stop them
whatever happens, and print the table and the verdict in words (shown with `pytest -s`)."""

from __future__ import annotations

from localscheduler.demos.simulation import Result, Simulation
from localscheduler.verdicts.scheduled import guarantee_summary, render


def play(sim: Simulation) -> Result:
    """The result of playing `sim` once; its instances are stopped on the way out."""
    try:
        sim.start_instances()
        result = sim.run()
    finally:
        sim.stop()
    print()
    print(render(result.rows))
    print("\n".join(guarantee_summary(result.verdicts)))
    return result
