"""Least-privilege policy for the synthesized stacks: a cdk-nag-style rule pack plus checkov.

`rules` holds the rules by family (one pure function each, over a resource and its stack, read
through `synthesized`), `pack` gives each its id, severity and explanation, `runner` applies the
pack to every resource of a synthesized stack and marks the findings its team acknowledges
(`acknowledgements`), and `checkov` runs checkov offline on the same files. `python -m policy
cdktf.out` runs it all.
"""
