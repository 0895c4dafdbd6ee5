#!/usr/bin/env python
"""The CDKTF app: one stack per team file in teams/ (run by `npx cdktf synth`, see cdktf.json).

Every team is validated before anything is built; all problems are reported together.
"""

from __future__ import annotations

import sys

from cdktf import App

from stacks.team import load_teams
from stacks.team_stack import TeamStack
from stacks.validation import InvalidConfig, validate


def main() -> int:
    """Validate every team, then synthesize one stack per team into cdktf.out/."""
    teams = load_teams()
    try:
        validate(teams)
    except InvalidConfig as problems:
        print(problems, file=sys.stderr)
        return 1
    app = App()
    for team in teams:
        TeamStack(app, team)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
