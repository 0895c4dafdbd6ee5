"""`python -m policy [--checkov PATH] [TARGET ...]`: the least-privilege pack (and checkov) on
synthesized stacks. TARGET is a cdktf output folder (default cdktf.out) or a `*.tf.json` file.
Prints every finding with its resource path; exits 1 if any error was found."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policy.checkov import run_checkov
from policy.runner import check_files, stack_files


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
    for problem in [*findings, *failures]:
        print(problem)
    errors = [finding for finding in findings if finding.rule.severity == "error"] + failures
    checked = "rule pack" + (" and checkov" if args.checkov else "")
    print(f"{checked}: {len(files)} stack(s), {len(errors)} error(s)", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
