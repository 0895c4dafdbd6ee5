"""`runonce`, the operators' command: see a team's runs and dead letters, release a stuck claim,
re-run a finished run, replay a dead-lettered event (docs/operate.md).

It runs on an operator's machine, never in a function: nothing here enters a function's source
archive, and the library never imports it. It reads a team's project, database, collection and
job names from the team file (`--team`), through the stacks' own loading and naming.
"""
