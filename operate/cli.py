"""The `runonce` command (click), its tables (rich) and its exit codes.

Exit 0: done. Exit 1: failed (a store or an API refused a call or did not answer): the message
says what, and whether a change may have landed all the same. Exit 2: refused (a live lease, a
second replay, a run in progress) or bad input (an unknown team, job or key, a malformed time):
the message names the reason or the option and the fix, and nothing changed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from google.api_core import exceptions as gexc
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from operate import clients, dead_letters, release, replay, runs, show
from operate.keys import resolve_key, short_keys
from operate.rerun import rerun
from operate.team import BadInput, EventJob, ScheduledJob, TeamView, resolve
from runonce import _clock as clock
from runonce._instant import parse_instant
from runonce.core.errors import RunonceError, StoreUnavailable
from runonce.scheduler.expected import scheduled_key

_DURATION = re.compile(r"([0-9]+)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SINCE = timedelta(days=400)
"""How far back a listing reaches at most: a year and more, and far from the calendar's ends."""
FAILED = 1
"""A store or API failed: the message says what, and whether a change may have landed."""
REFUSED = 2
"""Refused (a live lease, a second replay, a run in progress) or bad input: nothing changed."""


class Duration(click.ParamType):
    """A length of time like 90m, 6h, 2d or 1d12h."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> timedelta:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip()
        parts = _DURATION.findall(text)
        if not parts or "".join(number + unit for number, unit in parts) != text:
            self.fail(f"{value!r} is not a duration like 90m, 6h, 2d or 1d12h", param, ctx)
        # Summed as whole seconds first: a timedelta of 10000000000d overflows (OverflowError).
        seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
        if seconds > MAX_SINCE.total_seconds():
            self.fail(f"{value!r} is more than {MAX_SINCE.days}d, the longest window listed", param, ctx)
        return timedelta(seconds=seconds)


@contextmanager
def _answers(changing: str = "") -> Iterator[None]:
    """Bad input becomes a usage error (exit 2); a store or API failure exits 1 with its reason.

    `changing`: for a verb that writes, how to tell whether a write whose answer never came landed.
    """
    try:
        yield
    except BadInput as exc:
        raise click.UsageError(str(exc)) from None
    except StoreUnavailable as exc:
        unknown = f"; a change may have been written all the same: {changing}" if changing else ""
        click.echo(f"Error: {exc}{unknown}", err=True)
        sys.exit(FAILED)
    except (RunonceError, clients.Unavailable, OSError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(FAILED)
    except (gexc.GoogleAPICallError, gexc.RetryError) as exc:  # its message says what the service refused
        click.echo(f"Error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(FAILED)


def _dump(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=_json_value))


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _console() -> Console:
    # A terminal's width, or $COLUMNS; piped without $COLUMNS, wide enough not to fold a row.
    return Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=200)


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else ""


team_option = click.option(
    "--team", "team_name", required=True, help="The team: its name or its file in teams/."
)
by_option = click.option(
    "--by", help="Who you are, for the record (default: the credentials' account; $USER on the emulators)."
)


@click.group(name="runonce")
def runonce() -> None:
    """Operate runonce teams: their runs, stuck claims and dead letters (docs/operate.md)."""


runonce.add_command(rerun)


@runonce.command(name="runs")
@team_option
@click.option("--job", "job_name", help="One job (default: every job of the team).")
@click.option("--since", default="2d", type=Duration(), show_default=True, help="How far back.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(runs.STATUSES),
    help="Only runs in this state (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one per run, instead of a table.")
def runs_command(
    team_name: str, job_name: str | None, since: timedelta, statuses: tuple[str, ...], as_json: bool
) -> None:
    """One row per run in the window, and one per expected run with no record."""
    with _answers():
        team = resolve(team_name)
        jobs: list[ScheduledJob | EventJob] = (
            [team.job(job_name)] if job_name is not None else [*team.jobs, *team.event_jobs]
        )
        store = clients.store(team)
        end = clock.now()
        start = end - since
        rows: list[runs.Row] = []
        for job in jobs:
            if isinstance(job, ScheduledJob):
                rows += runs.scheduled_rows(store, team, job, start, end)
            else:
                rows += runs.event_rows(store, job, start, end)
        rows = [row for row in rows if not statuses or row.status in statuses]
    if as_json:
        for row in rows:
            click.echo(json.dumps(row.json()))
        return
    print_runs(f"runs of team {team.name} since {_when(start)} UTC", rows)


def print_runs(title: str, rows: list[runs.Row]) -> None:
    """The `runonce runs` table of `rows` under `title`, on stdout."""
    # A key's shortest unique prefix (`show` and `release` take it); a run with no record has
    # none to look up: it is shown by --job and --time.
    short = short_keys(row.key for row in rows if row.status != runs.MISSING)
    # One line per run in 120 columns: the claim time and end are in `--json` and `show`. In a
    # narrower terminal the job and the outcome fold; the time, status and key, which the other
    # verbs take, are never cut.
    cells = [
        (
            row.job,
            _when(row.time) if row.event_id is None else f"{_when(row.time)} (event {row.event_id})",
            "" if row.forced is None else ("forced" if row.forced else ""),
            row.status,
            "" if row.attempts is None else str(row.attempts),
            "" if row.duration_seconds is None else f"{row.duration_seconds:.1f} s",
            short.get(row.key, ""),
            row.outcome,
        )
        for row in rows
    ]
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("job", overflow="fold", min_width=min(30, max([3, *(len(line[0]) for line in cells)])))
    for column in ("time (UTC)", "forced", "status", "tries", "took", "key"):
        table.add_column(column, no_wrap=True)
    table.add_column("outcome or error", overflow="fold", ratio=1, min_width=24)
    for line in cells:
        table.add_row(*line)
    console = _console()
    # Narrower than its unfoldable columns, rich would drop or cut them: print the table that wide
    # instead, and let the terminal wrap its lines.
    needed = Measurement.get(console, console.options.update(max_width=10_000), table).minimum
    if needed > console.width:
        console = Console(width=needed)
    console.print(table)


@runonce.command(name="show")
@click.argument("key", required=False)
@team_option
@click.option("--job", "job_name", help="With --time: the scheduled job whose run to show.")
@click.option(
    "--time", "schedule_time", help="With --job: the run's schedule time, RFC 3339 (2026-11-29T03:00:00Z)."
)
def show_command(key: str | None, team_name: str, job_name: str | None, schedule_time: str | None) -> None:
    """A run's whole record, its history and operator actions, its dead-letter copy, and what to do next."""
    with _answers():
        team = resolve(team_name)
        key, asked = _key(team, key, job_name, schedule_time)
        store = clients.store(team)
        record = store.read(key)
        _dump(show.detail(team, store, key, record, clients.subscriber, clock.now(), asked))


def _key(
    team: TeamView, key: str | None, job_name: str | None, schedule_time: str | None
) -> tuple[str, tuple[ScheduledJob, str] | None]:
    """The run key `show` is asked for, and the job and schedule time it was named by (if it was)."""
    if key:
        if job_name or schedule_time:
            raise BadInput("KEY", "give either KEY or --job with --time, not both")
        return resolve_key(clients.collection(team), key), None
    if not (job_name and schedule_time):
        raise BadInput("KEY", "give the run's KEY, or --job and --time (its schedule time)")
    job = team.job(job_name)
    if isinstance(job, EventJob):
        raise BadInput(
            "--time",
            f"{job.name} is an event job, whose runs have no schedule time: give its KEY (runonce runs)",
        )
    try:
        instant = parse_instant(schedule_time)
    except ValueError as exc:
        raise BadInput("--time", str(exc)) from None
    return scheduled_key(job.scheduler_job, instant.utc, team.project, team.region), (job, instant.rfc3339())


@runonce.command(name="release")
@click.argument("key")
@team_option
@click.option(
    "--force", is_flag=True, help="Release even while the lease is live (the job may then run twice)."
)
@by_option
def release_command(key: str, team_name: str, force: bool, by: str | None) -> None:
    """Release the claim a dead attempt holds on run KEY, so its next delivery runs at once."""
    with _answers(changing=f"`runonce show {key} --team {team_name}` shows the record's operator_actions"):
        team = resolve(team_name)
        who = clients.operator(by)
        released = release.release(
            clients.store(team), resolve_key(clients.collection(team), key), who, force
        )
    click.echo(released.message, err=not released.done)
    if not released.done:
        sys.exit(REFUSED)  # every refusal of a release changes nothing


def _event_jobs(team: TeamView, job_name: str | None) -> list[EventJob]:
    if job_name is not None:
        job = team.job(job_name)
        if not isinstance(job, EventJob):
            raise BadInput("--job", f"{job.name} is a scheduled job: only event jobs have dead letters")
        return [job]
    if not team.event_jobs:
        raise BadInput("--team", f"team {team.name} has no event jobs, so no dead letters")
    return list(team.event_jobs)


@runonce.command(name="dead-letters")
@team_option
@click.option("--job", "job_name", help="One event job (default: every event job of the team).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one per copy, instead of a table.")
def dead_letters_command(team_name: str, job_name: str | None, as_json: bool) -> None:
    """The copies in the dead-letter subscriptions, with their reasons; none is acknowledged."""
    with _answers():
        team = resolve(team_name)
        letters = dead_letters.listing(clients.subscriber(), _event_jobs(team, job_name))
    if as_json:
        for letter in letters:
            click.echo(json.dumps(letter.json()))
        return
    table = Table(title=f"dead letters of team {team.name}")
    for column in ("job", "copy id", "published", "by", "reason", "attempt", "error", "run key"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        attempt = letter.attempt or (f"{letter.delivery_count} deliveries" if letter.delivery_count else "")
        table.add_row(
            letter.job,
            letter.copy_id,
            letter.published,
            letter.kind,
            letter.reason,
            attempt,
            letter.error,
            letter.run_key,
        )
    _console().print(table)


@runonce.command(name="replay")
@click.argument("copy_id")
@team_option
@click.option("--job", "job_name", help="The event job whose dead letters hold the copy (default: any).")
@click.option("--again", is_flag=True, help="Publish even if the record says the event was replayed already.")
@by_option
def replay_command(copy_id: str, team_name: str, job_name: str | None, again: bool, by: str | None) -> None:
    """Publish the original of dead-letter copy COPY_ID to its topic once, then acknowledge the copy."""
    with _answers(
        changing="the record's operator_actions (runonce show RUN_KEY) tell how far the replay got"
    ):
        team = resolve(team_name)
        who = clients.operator(by)
        jobs = _event_jobs(team, job_name)
        subscriber = clients.subscriber()
        letter = dead_letters.take(subscriber, jobs, copy_id)
        if letter is None:
            raise BadInput(
                "COPY_ID",
                f"no copy {copy_id!r} in team {team.name}'s dead letters (or another reader holds it "
                f"for a minute); `runonce dead-letters --team {team.name}` lists them",
            )
        job = next(job for job in jobs if job.name == letter.job)
        if not job.topic:
            dead_letters.put_back(subscriber, letter.subscription, [letter.ack_id, *letter.note_ack_ids])
            raise BadInput(
                "COPY_ID", f"{job.name} is triggered by a Cloud Storage bucket: it has no topic to replay to"
            )
        answer = replay.replay(clients.store(team), clients.publisher(), subscriber, job, letter, who, again)
    click.echo(answer.message, err=not answer.changed)
    if not answer.changed:
        sys.exit(REFUSED if answer.outcome == "refused" else FAILED)
