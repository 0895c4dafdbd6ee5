"""make bench's synth part synthesizes the example team and a generated team of 100 jobs; both
must pass validation, or the benchmark's child process stops with a traceback (it did once the
example gained a deployed service, whose runtime account the generated team's quota left out)."""

import pytest

from benchmarks.synth import generated_team
from stacks.validate import validate


@pytest.mark.parametrize("jobs", [1, 100])
def test_the_benchmarks_generated_team_passes_validation(jobs):
    validate([generated_team(jobs)])
