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

from operate import backfill, clients, dead_letters, paused, release, replay, resume, runs, show
from operate import team as team_file
from operate.keys import SHORT_KEY, resolve_key, short_keys
from operate.rerun import (
    SCHEDULER_API,
    SCHEDULER_URL_VARIABLE,
    NotDispatched,
    Refused,
    SchedulerApi,
    Target,
    Unreadable,
    answer_failure,
    find_job,
    next_run,
    rerun,
)
from operate.team import BadInput, EventJob, ScheduledJob, TeamView, resolve
from runonce import _clock as clock
from runonce._instant import parse_instant
from runonce.contract import STORE_VARIABLE
from runonce.core.errors import RunonceError, StoreError, StoreUnavailable
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


def _print_table(table: Table) -> None:
    """Print `table` on stdout: as wide as the terminal, or $COLUMNS; piped without $COLUMNS, wide
    enough not to fold a row. Narrower than its unfoldable (`no_wrap`) columns, rich would drop or
    cut them: the table is then printed as wide as they need, and the terminal wraps its lines."""
    console = Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=200)
    needed = Measurement.get(console, console.options.update(max_width=10_000), table).minimum
    if needed > console.width:
        console = Console(width=_uncut_width(table, needed))
    console.print(table)


def _uncut_width(table: Table, width: int) -> int:
    """The least width from `width` at which rich gives every column its `min_width` (or all its
    text, if shorter). rich's measured minimum may leave a folding column narrower than its
    `min_width` and the columns' widths wider than the console, and rich then cuts every line at
    the console's width (rich 15: "upstream said 400" printed as "upstream said 4";
    tests/operate/test_runs.py)."""
    console = Console(width=width)
    options = console.options.update_width(width)
    wants = [
        min(column.min_width or 0, table._measure_column(console, options, column).maximum)
        for column in table.columns
    ]  # measured once: no width from `width` on changes what min_width asks of a column
    for wider in range(width, width + 200):
        console = Console(width=wider)
        options = console.options.update_width(wider)
        widths = table._calculate_column_widths(console, options)  # rich's own layout of the columns
        fits = sum(widths) + table._extra_width <= wider  # else rich cuts every line at `wider`
        if fits and all(got >= want for got, want in zip(widths, wants, strict=True)):
            return wider
    return width + 200


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else ""


team_option = click.option(
    "--team", "team_name", required=True, help="The team: its name or its file in teams/."
)
by_option = click.option(
    "--by", help="Who you are, for the record (default: the credentials' account; $USER on the emulators)."
)


@click.group(name="runonce")
@click.option(
    "--store",
    envvar=STORE_VARIABLE,
    help="The team's run store, as its functions' RUNONCE_STORE names it: firestore (the default) or "
    "the Valkey server's URL (default: $RUNONCE_STORE).",
)
def runonce(store: str | None) -> None:
    """Operate runonce teams: their runs, stuck claims and dead letters (docs/operate.md)."""


runonce.add_command(rerun)


def _window(
    since: timedelta | None, start_text: str | None, end_text: str | None
) -> tuple[datetime, datetime]:
    """The backfill's window (start, end] from --since, or --from (inclusive) and --to (default now)."""
    now = clock.now()
    if since is not None and start_text is not None:
        raise BadInput("--since", "give either --since or --from, not both")
    if since is None and start_text is None:
        raise BadInput("--since", "give the window: --since 2d, or --from TIME [--to TIME] (RFC 3339)")
    end = _instant("--to", end_text) if end_text else now
    start = (
        now - since if since is not None else _instant("--from", start_text or "") - timedelta(microseconds=1)
    )
    if end > now:
        raise BadInput("--to", f"{end.isoformat()} is in the future: only past runs are backfilled")
    if start >= end:
        raise BadInput("--from", "the window is empty: --from must be before --to")
    if end - start > MAX_SINCE:
        raise BadInput("--from", f"the window is longer than {MAX_SINCE.days}d: give a shorter one")
    return start, end


def _instant(option: str, text: str) -> datetime:
    try:
        return parse_instant(text).utc
    except ValueError as exc:
        raise BadInput(option, f"{exc} (e.g. 2026-11-29T03:00:00Z)") from None


@runonce.command(name="backfill")
@team_option
@click.option("--job", "job_name", required=True, help="The scheduled job, as the team file names it.")
@click.option("--since", type=Duration(), help="The window: this long before now (2d, 6h).")
@click.option("--from", "start_text", help="The window's first schedule time (RFC 3339), instead of --since.")
@click.option("--to", "end_text", help="The window's last schedule time (RFC 3339; default: now).")
@click.option("--include-failed", is_flag=True, help="Run failed runs again too.")
@click.option("--include-skipped", is_flag=True, help="Run the runs the overlap policy skipped too.")
@click.option("--dry-run", is_flag=True, help="List the runs it would start; change nothing.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, backfill.MAX_RUNS),
    help="Start at most this many.",
)
@click.option(
    "--wait",
    "wait_seconds",
    default=300,
    show_default=True,
    type=click.IntRange(1, 3600),
    help="Seconds to wait for each run's delivery and end before giving up.",
)
@by_option
def backfill_command(
    team_name: str,
    job_name: str,
    since: timedelta | None,
    start_text: str | None,
    end_text: str | None,
    include_failed: bool,
    include_skipped: bool,
    dry_run: bool,
    limit: int,
    wait_seconds: int,
    by: str | None,
) -> None:
    """Run every missed run of a window once, oldest first, through Cloud Scheduler
    (docs/schedules/backfill.md).

    Missed: never delivered, retried out (left in progress under an ended lease), failed with
    --include-failed, skipped by the overlap policy with --include-skipped. Exit 2: refused or
    bad input, nothing changed; exit 1: Scheduler did not run the job, or a run did not get going
    within --wait (what started before stays started).
    """
    try:
        team = team_file.load(team_name)
        target = Target.of(team, find_job(team, job_name))
        start, end = _window(since, start_text, end_text)
        next_run(target, end)  # the team file's schedule and time zone evaluate, or BadInput
        api = SchedulerApi(os.environ.get(SCHEDULER_URL_VARIABLE) or SCHEDULER_API)
        refusal = backfill.schedule_refusal(backfill.updated_at(api.job(target)), start)
        if refusal is not None:
            raise Refused(refusal)
        store = clients.store(team)
        missed = backfill.missed_runs(store, target, start, end, include_failed, clock.now(), include_skipped)
        chosen = missed[:limit]
        title = f"missed runs of {target.job} in ({_when(start)}, {_when(end)}] UTC"
        excluded = backfill.excluded_ticks(target, start, end)
        if excluded:
            click.echo(
                f"{len(excluded)} ticks in the window are excluded by the job's calendar and never "
                f"started: {', '.join(f'{_when(moment)} ({why.value})' for moment, why in excluded[:5])}"
                + (" ..." if len(excluded) > 5 else "")
            )
        if dry_run:
            click.echo(f"{title}: {len(missed)} missed; would start {len(chosen)} (dry run, nothing changed)")
            _print_missed(chosen)
            return
        who = clients.operator(by)
        filler = backfill.Backfill(
            store, target, who, api.run, wait_seconds, log=backfill.logged(target, who)
        )
        done = filler.run(chosen)
    except (BadInput, Refused, NotDispatched, StoreError) as exc:
        answer_failure("backfill", exc, "; the runs started before it stay started")
    except backfill.NotDelivered as exc:
        click.echo(f"runonce backfill: {exc}", err=True)
        raise click.exceptions.Exit(FAILED) from None
    except Unreadable as exc:
        click.echo(f"runonce backfill: {exc} (nothing changed)", err=True)
        raise click.exceptions.Exit(FAILED) from None
    started = sum(1 for each in done if each.request_id is not None)
    click.echo(f"{title}: {len(missed)} missed, {started} started, {len(done) - started} skipped")
    if not done:
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("time (UTC)", "was", "now", "key"):
        table.add_column(column, no_wrap=True)
    table.add_column("note", overflow="fold", ratio=1)
    for each in done:
        table.add_row(
            _when(each.missed.schedule_time),
            each.missed.state,
            each.outcome,
            each.missed.key[:SHORT_KEY],
            each.note,
        )
    _print_table(table)


def _print_missed(missed: list[backfill.Missed]) -> None:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("time (UTC)", "missed", "key"):
        table.add_column(column, no_wrap=True)
    for each in missed:
        table.add_row(_when(each.schedule_time), each.state, each.key[:SHORT_KEY])
    _print_table(table)


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
                rows += runs.event_rows(store, team, job, start, end)
        rows = [row for row in rows if not statuses or row.status in statuses]
        states = paused.job_states(team, jobs)
    lines = [state.line for state in states.values() if state.line]
    if as_json:
        for line in lines:  # stdout stays one JSON object per run; each row carries its job's state
            click.echo(line, err=True)
        for row in rows:
            state = states.get(row.job)
            click.echo(json.dumps({**row.json(), "scheduler_job_state": state.json() if state else None}))
        return
    for line in lines:
        click.echo(line)
    print_runs(f"runs of team {team.name} since {_when(start)} UTC", rows)


def print_runs(title: str, rows: list[runs.Row]) -> None:
    """The `runonce runs` table of `rows` under `title`, on stdout."""
    # A key's shortest unique prefix (`show` and `release` take it); a run with no record has
    # none to look up: it is shown by --job and --time.
    short = short_keys(row.key for row in rows if row.status not in runs.NO_RECORD)
    # One line per run in 120 columns: the claim time and end are in `--json` and `show`. In a
    # narrower terminal the job and the outcome fold; the time, status and key, which the other
    # verbs take, are never cut.
    cells = [
        (
            row.job,
            _when(row.time) if row.event_id is None else f"{_when(row.time)} (event {row.event_id})",
            row.cause,  # forced, or what started the run (rerun, backfill, catch_up)
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
    for column in ("time (UTC)", "cause", "status", "tries", "took", "key"):
        table.add_column(column, no_wrap=True)
    table.add_column("outcome or error", overflow="fold", ratio=1, min_width=24)
    for line in cells:
        table.add_row(*line)
    _print_table(table)


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
        shown = show.detail(
            team, store, key, record, clients.subscriber, clock.now(), asked, paused.job_states
        )
    if (shown["scheduler_job_state"] or {}).get("line"):
        click.echo(shown["scheduler_job_state"]["line"], err=True)  # stdout stays one JSON document
    _dump(shown)


def _key(
    team: TeamView, key: str | None, job_name: str | None, schedule_time: str | None
) -> tuple[str, tuple[ScheduledJob, str] | None]:
    """The run key `show` is asked for, and the job and schedule time it was named by (if it was)."""
    if key:
        if job_name or schedule_time:
            raise BadInput("KEY", "give either KEY or --job with --time, not both")
        return resolve_key(clients.key_lookup(team), key), None
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
    return scheduled_key(job.scheduler_job, instant.utc, team.project, job.location), (job, instant.rfc3339())


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
            clients.store(team), resolve_key(clients.key_lookup(team), key), who, force
        )
    click.echo(released.message, err=not released.done)
    if not released.done:
        sys.exit(REFUSED)  # every refusal of a release changes nothing


@runonce.command(name="resume")
@team_option
@click.option("--job", "job_name", required=True, help="The scheduled job, as the team file names it.")
@click.option("--why", default="", help="Why it may run again (the fix), for the record.")
@by_option
def resume_command(team_name: str, job_name: str, why: str, by: str | None) -> None:
    """Resume a job the watchdog paused after it kept failing (docs/schedules/pause.md), recording
    who and why.

    Exit 2: the job is not paused, or bad input, nothing changed; exit 1: Scheduler refused the
    resume, or the job was resumed and its record not written (the message says which).
    """
    try:
        team = team_file.load(team_name)
        target = Target.of(team, find_job(team, job_name))
        api = SchedulerApi(os.environ.get(SCHEDULER_URL_VARIABLE) or SCHEDULER_API)
        done = resume.resume(api, clients.store(team), target, clients.operator(by), why, clock.now())
    except (BadInput, Refused, StoreError) as exc:
        answer_failure("resume", exc, "")
    except (NotDispatched, Unreadable) as exc:
        click.echo(f"runonce resume: {exc} (the job stays paused)", err=True)
        raise click.exceptions.Exit(FAILED) from None
    click.echo(
        f"resumed {target.scheduler_job} (paused since {done.paused_since or 'unknown'}): {done.state}; "
        f"recorded as {done.key}"
    )


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
    _print_table(table)


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
