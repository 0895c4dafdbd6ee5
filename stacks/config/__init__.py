"""The team config: the typed team file (`team`, `targets`, `state`), the fixed choices every
stack makes (`defaults`), reading the `teams/` folder (`team_files`), which jobs
share a function (`sharing`) and the `Problem` every check reports. Plain data: nothing here
imports cdktf, so the local scheduler reads the same jobs the stacks deploy."""
