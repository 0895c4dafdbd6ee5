"""`make bench-synth` (and the second half of `make bench`): how long a stack takes to synthesize.

Each synth is a fresh Python process (imports are most of the cost, and a warm process would
hide them), timed from start to exit, and does what `main.py` does for a team: validate it
(every check, the quota count included), then build and synthesize its stack. In one run,
interleaved so every case sees the same load:

- the example team with our app (as cdktf.json runs it: `python -O`, provider submodules loaded
  on demand), against the same stack code in a plain cdktf app that imports the google provider
  package the usual way (its `__init__` loads all 1,474 submodules) and runs without -O;
- a generated team with 100 jobs, each on a function of its own (`share_functions=False`, a
  raised service account quota declared: the per-job cost as issue 7 measured it), against the
  same team with 1 job;
- a generated team with 300 jobs on 10 shared functions, within Google's default quotas (hourly
  jobs spread over the minutes; not a deployed team), against the same 1-job team.

Every child reads its bytecode from one private cache (PYTHONPYCACHEPREFIX), filled by an untimed
synth of each app first, as a machine that has synthesized once has it: our app runs with -O,
whose optimized bytecode a venv does not install and which PYTHONDONTWRITEBYTECODE (set on these
machines) would otherwise keep it from writing, so without the cache it alone would compile every
module it imports in every run (about 0.75 s of a 3.5 s synth), while the plain app reads the
installed bytecode.

Prints the medians and the ratios. Targets: our app at most 0.35x the plain app; 100 jobs at
most 1.5x one job; 300 jobs at most 2x one job. BENCH_SYNTH_RUNS sets the runs per case
(default 5: with 3, one disturbed run could move a median past a target).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

TARGET_APP_RATIO = 0.35
TARGET_JOBS_RATIO = 1.5
TARGET_300_RATIO = 2.0
SHARED_FUNCTIONS = 10
RUNS = int(os.environ.get("BENCH_SYNTH_RUNS", "5"))
REPO_ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "example, our app": ("ours", 0),
    "example, plain cdktf app": ("plain", 0),
    "1 job, our app": ("ours", 1),
    "100 jobs, our app": ("ours", 100),
    "300 jobs, our app": ("ours", 300),
}


def generated_team(jobs: int):
    """The example team with `jobs` generated jobs, all copies of its first job: 100 with a
    function each (as before functions were shared), 300 on 10 shared functions."""
    from stacks.config.team import TEAMS_DIR, load_team_file

    # Scheduled jobs only, as these cases have always measured (the example's event job is not
    # copied, and its account would not fit the declared quota).
    team = replace(load_team_file(TEAMS_DIR / "example.py"), event_jobs=[])
    template = team.jobs[0]
    if jobs == 300:
        # Function k serves jobs k, k+10, ...: hourly, each at its own minute, so no more of
        # them start at once than the function has instances.
        return replace(
            team,
            jobs=[
                replace(
                    template,
                    name=f"job-{n:03d}",
                    schedule=f"{(n // SHARED_FUNCTIONS) % 60} * * * *",
                    env={"REPORT_KIND": f"kind-{n % SHARED_FUNCTIONS}"},
                )
                for n in range(jobs)
            ],
        )
    return replace(
        team,
        jobs=[replace(template, name=f"job-{n:03d}") for n in range(jobs)],
        share_functions=False,
        # invoker, build, the watchdog, one per function and one per service the stack deploys
        quotas={"service_accounts": 3 + jobs + sum(1 for service in team.services if service.image)},
    )


def synthesize(mode: str, jobs: int, outdir: str) -> None:
    """Child process: validate and synthesize the example team (jobs == 0) or a generated team."""
    if mode == "plain":
        import cdktf_cdktf_provider_google  # noqa: F401  (the usual import: the whole package)
    from cdktf import App

    from stacks.config.team import TEAMS_DIR, load_team_file
    from stacks.team_stack import TeamStack
    from stacks.validate import validate

    team = generated_team(jobs) if jobs else load_team_file(TEAMS_DIR / "example.py")
    validate([team])
    app = App(outdir=outdir)
    TeamStack(app, team, archive_dir=Path(outdir) / "archives")
    app.synth()


def child_environment(cache: str) -> dict[str, str]:
    """The children's environment: bytecode read from and written to `cache`."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": cache}


def time_case(mode: str, jobs: int, env: dict[str, str]) -> float:
    """Seconds one child process takes to synthesize the case."""
    with tempfile.TemporaryDirectory(prefix="bench-synth-") as outdir:
        # Our app runs with -O as cdktf.json runs it (the bindings' typeguard checks are skipped).
        optimize = ["-O"] if mode == "ours" else []
        command = [sys.executable, *optimize, "-m", "benchmarks.synth", "--child", mode, str(jobs), outdir]
        started = time.perf_counter()
        subprocess.run(
            command, cwd=REPO_ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return time.perf_counter() - started


def main() -> int:
    """Time every case RUNS times, interleaved; print medians and ratios against the targets."""
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory(prefix="bench-synth-bytecode-") as cache:
        env = child_environment(cache)
        for mode in ("ours", "plain"):  # untimed: fills the bytecode cache (the example uses the most)
            time_case(mode, 0, env)
        for run in range(RUNS):
            for name, (mode, jobs) in CASES.items():
                samples[name].append(time_case(mode, jobs, env))
            print(
                f"run {run + 1}/{RUNS}: " + ", ".join(f"{n} {s[-1]:.1f}s" for n, s in samples.items()),
                flush=True,
            )
    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\nsynth time (validation included), median of {RUNS} fresh processes:")
    for name, value in median.items():
        print(f"  {name:<26} {value:6.2f} s")
    one, plain = median["1 job, our app"], median["example, plain cdktf app"]
    ratios = [
        ("our app / plain app", median["example, our app"] / plain, TARGET_APP_RATIO),
        ("100 jobs / 1 job", median["100 jobs, our app"] / one, TARGET_JOBS_RATIO),
        ("300 jobs / 1 job", median["300 jobs, our app"] / one, TARGET_300_RATIO),
    ]
    for label, ratio, target in ratios:
        print(f"  {label:<26} {ratio:6.2f}x  (target <= {target}x)")
    ok = all(ratio <= target for _, ratio, target in ratios)
    print("  targets met" if ok else "  TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        synthesize(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(main())
