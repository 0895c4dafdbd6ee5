"""`python -m policy [--checkov PATH] [TARGET ...]`: the least-privilege pack (and checkov) on
synthesized stacks. TARGET is a cdktf output folder (default cdktf.out) or a `*.tf.json` file.
Prints every finding with its resource path (an acknowledged one with its team's reason, and
an acknowledgement that matches nothing as a warning); exits 1 if any error was not acknowledged."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policy.acknowledgements import Acknowledgements
from policy.checkov import run_checkov
from policy.runner import Finding, check_files, stack_files


def _unused_acknowledgements(files: dict[str, Path], findings: list[Finding]) -> list[str]:
    """A warning for every acknowledgement of a stack that matches none of its findings."""
    return [
        f"WARNING acknowledgement {key!r} [{name}] matches no finding: remove it from the team's "
        "`acknowledge`"
        for name, file in files.items()
        for key in Acknowledgements.of(json.loads(file.read_text())).unused(
            (finding.rule.id, finding.resource.address) for finding in findings if finding.stack == name
        )
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the pack (and checkov when given) on every target's stacks; 1 on any error."""
    parser = argparse.ArgumentParser(prog="python -m policy", description=__doc__)
    parser.add_argument("targets", nargs="*", type=Path, default=[Path("cdktf.out")])
    parser.add_argument("--checkov", type=Path, help="path to the checkov executable; skip checkov if absent")
    args = parser.parse_args(argv)
    files = {name: file for target in args.targets for name, file in stack_files(target).items()}
    findings = check_files(files)
    failures = (
        [failure for name, file in files.items() for failure in run_checkov(args.checkov, name, file)]
        if (args.checkov)
        else []
    )
    for problem in [*findings, *failures, *_unused_acknowledgements(files, findings)]:
        print(problem)
    errors = [finding for finding in findings if finding.fails] + failures
    acknowledged = sum(1 for finding in findings if finding.acknowledged)
    checked = "rule pack" + (" and checkov" if args.checkov else "")
    counts = f"{len(errors)} error(s)" + (f", {acknowledged} acknowledged" if acknowledged else "")
    print(f"{checked}: {len(files)} stack(s), {counts}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
