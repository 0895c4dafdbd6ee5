"""Least-privilege policy for the synthesized stacks: a cdk-nag-style rule pack plus checkov.

`rules` holds one small pure function per rule, `pack` groups them with their explanation and
severity, `runner` applies the pack to every resource of a synthesized stack, and `checkov`
runs checkov offline on the same files. `python -m policy cdktf.out` runs it all.
"""
