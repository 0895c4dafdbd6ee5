#!/usr/bin/env python
"""The CDKTF app: one stack per team file in teams/ (run by `npx cdktf synth`, see cdktf.json).

Every team file is read and validated before anything is built; all problems, in every file,
are printed together and the app exits 1, without a traceback. RUNONCE_TEAMS_DIR points it at
another folder of team files (the tests use it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from stacks.config.problem import InvalidConfig
from stacks.config.team import TEAMS_DIR
from stacks.config.team_files import read_team_folder
from stacks.stack_names import TEAMS_DIR_ENV
from stacks.validate import find_problems


def main() -> int:
    """Validate every team, then synthesize one stack per team into cdktf.out/ (each stack says
    which of its jobs share a function, as an info annotation)."""
    folder = read_team_folder(Path(os.environ.get(TEAMS_DIR_ENV) or TEAMS_DIR))
    problems = folder.problems + find_problems(folder.teams, [file.shown for file in folder.files])
    if problems:
        # Grouped by file (stable: each file's problems keep their team and job order).
        print(InvalidConfig(sorted(problems, key=lambda problem: problem.file)), file=sys.stderr)
        return 1
    # Imported only now: loading cdktf and the provider bindings takes seconds a failing run
    # does not need.
    from stacks.team_stack import TeamStack
    from stacks.toolchain import App

    app = App()
    for team in folder.teams:
        TeamStack(app, team)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
