"""Reading the `teams/` folder so that no team file can stop the others from being checked.

Each file is parsed, executed and its `team` type-checked on its own; whatever goes wrong (a
syntax error, an exception, a misspelt or missing field, a value of the wrong type, no `team`)
becomes a `Problem` naming the file and line, and the next file is read. Misspelt and missing
fields are found in the syntax tree before the file runs, so each is named with its team and job
(Python itself would stop at the first one with a bare TypeError).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib.util
import traceback
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.config.problem import Problem
from stacks.config.targets import TARGET_CLASSES
from stacks.config.team import (
    REPO_ROOT,
    TEAMS_DIR,
    AlertThresholds,
    AppEngineJob,
    Calendar,
    EventJob,
    Job,
    PushRetry,
    Retry,
    Service,
    ServiceJob,
    Team,
    Window,
    team_file_paths,
)

CONFIG_CLASSES: dict[str, type] = {
    "Team": Team,
    "Job": Job,
    "Retry": Retry,
    "EventJob": EventJob,
    "Service": Service,
    "ServiceJob": ServiceJob,
    "AppEngineJob": AppEngineJob,
    "PushRetry": PushRetry,
    "AlertThresholds": AlertThresholds,
    "Window": Window,
    "Calendar": Calendar,
    **{target.__name__: target for target in TARGET_CLASSES},
}
"""The dataclasses a team file builds, by the name it calls them with."""
FIELD_PREFIX = {
    "Retry": "retry.",
    "PushRetry": "retry.",
    "AlertThresholds": "alert_thresholds.",
    "Window": "active.",
    "Calendar": "exclude.",
    **{target.__name__: "target." for target in TARGET_CLASSES},
}
"""How a field of a nested config is named in problems (`retry.retry_count`, `target.workflow`)."""
JOB_CLASSES = ("Job", "EventJob", "ServiceJob", "AppEngineJob", "Service")
"""The calls whose literal `name` names the job (or service) of the problems inside them."""


@dataclass(frozen=True)
class TeamFile:
    """One team file that loaded, with values of the right types."""

    path: Path
    """Where the file is."""
    team: Team
    """What it defines."""

    @property
    def shown(self) -> str:
        """The path as problems print it."""
        return shown_path(self.path)


@dataclass(frozen=True)
class TeamFolder:
    """What a folder of team files gave: the teams that loaded, and every problem on the way."""

    files: list[TeamFile]
    """The files that loaded with well-typed values, sorted by name."""
    problems: list[Problem]
    """Everything that went wrong while reading, file by file."""

    @property
    def teams(self) -> list[Team]:
        """The loaded teams, in file order."""
        return [file.team for file in self.files]


def read_team_folder(folder: Path = TEAMS_DIR) -> TeamFolder:
    """Read every team file in the folder; never raises for what a file contains."""
    files: list[TeamFile] = []
    problems: list[Problem] = []
    if not folder.is_dir():
        return TeamFolder(
            [],
            [
                _file_problem(
                    folder, "the teams folder does not exist", "create it or point at another folder"
                )
            ],
        )
    for path in team_file_paths(folder):
        team, found = read_team_file(path)
        problems.extend(found)
        if team is not None:
            files.append(TeamFile(path, team))
    return TeamFolder(files, problems)


def read_team_file(path: Path) -> tuple[Team | None, list[Problem]]:
    """The file's team if it loaded with well-typed values (else None), and its problems."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as error:
        return None, [
            _file_problem(path, f"does not parse: {error.msg}", "fix the syntax at that line", error.lineno)
        ]
    names = _literal_names(tree)
    problems = list(_field_name_problems(tree, path, names))
    try:
        module = _execute(path)
    except (Exception, SystemExit) as error:  # the team's own code: anything may escape it
        if problems and isinstance(error, TypeError):
            return None, problems  # the misspelt or missing fields above are what Python hit
        return None, [*problems, _raised(path, error, names.team)]
    team = getattr(module, "team", None)
    if not isinstance(team, Team):
        found = "no `team`" if team is None else f"`team` as a {type(team).__name__}, not a Team"
        return None, [
            *problems,
            _file_problem(
                path,
                f"the file defines {found}",
                "end it with `team = Team(...)` (copy teams/_template.py)",
                team=names.team,
                field="team",
            ),
        ]
    problems.extend(_type_problems(team, path))
    return (None if problems else team), problems


def shown_path(path: Path) -> str:
    """A path relative to the repository when it is inside it (as a user would type it)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


@dataclass
class _Names:
    """Team and job names written as literals in the file, to name problems found before it runs."""

    team: str = ""
    jobs: dict[int, str] = dataclasses.field(default_factory=dict)
    """Job name by the id() of its `Job(...)` call node."""


def _call_class(node: ast.AST) -> str | None:
    """ "Team", "Job", "Retry" or a target's class when the node calls one of them (also as
    `team.Job`)."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
    return name if name in CONFIG_CLASSES else None


def _literal_name(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    if call.args and isinstance(call.args[0], ast.Constant):
        return str(call.args[0].value)
    return ""


def _literal_names(tree: ast.Module) -> _Names:
    names = _Names()
    for node in ast.walk(tree):
        kind = _call_class(node)
        if kind == "Team" and isinstance(node, ast.Call):
            names.team = names.team or _literal_name(node)
        elif kind in JOB_CLASSES and isinstance(node, ast.Call):
            names.jobs[id(node)] = _literal_name(node)
    return names


def _field_name_problems(tree: ast.Module, path: Path, names: _Names) -> typing.Iterator[Problem]:
    """Misspelt and missing fields in every Team(...), Job(...) and Retry(...) call."""

    def visit(node: ast.AST, job: str | None) -> typing.Iterator[Problem]:
        kind = _call_class(node)
        if kind and isinstance(node, ast.Call):
            job = names.jobs.get(id(node), job) if kind in JOB_CLASSES else (None if kind == "Team" else job)
            yield from _call_problems(node, kind, path, names.team, job)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, job)

    yield from visit(tree, None)


def _call_problems(
    call: ast.Call, kind: str, path: Path, team: str, job: str | None
) -> typing.Iterator[Problem]:
    fields = [f for f in dataclasses.fields(CONFIG_CLASSES[kind]) if f.init]
    known = [f.name for f in fields]
    prefix = FIELD_PREFIX.get(kind, "")
    meant: set[str] = set()  # fields a misspelling stands for: not reported missing as well
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg in known:
            continue
        close = difflib.get_close_matches(keyword.arg, known, n=1)
        meant.update(close)
        yield Problem(
            team,
            job,
            prefix + keyword.arg,
            f"{kind} has no field {keyword.arg!r}",
            f"write {close[0]}= instead" if close else f"remove it ({kind}'s fields: {', '.join(known)})",
            shown_path(path),
            keyword.lineno,
        )
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords):
        return  # *args or **options: which fields are given is only known when it runs
    given = set(known[: len(call.args)]) | {k.arg for k in call.keywords}
    for field in fields:
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if required and field.name not in given | meant:
            yield Problem(
                team,
                job,
                prefix + field.name,
                f"{kind}(...) needs {field.name}, which has no default",
                f"add {field.name}=... (stacks/team.py documents it)",
                shown_path(path),
                call.lineno,
            )


def _execute(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"teams.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raised(path: Path, error: BaseException, team: str) -> Problem:
    """The exception a team file raised, with the file's own line (never a traceback)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if Path(frame.filename) == path]
    line = frames[-1].lineno if frames else None
    return _file_problem(
        path,
        f"raised {type(error).__name__}: {error}",
        "fix the error at that line (the other team files were still checked)",
        line,
        team=team,
    )


def _file_problem(
    path: Path, message: str, fix: str, line: int | None = None, team: str = "", field: str = "file"
) -> Problem:
    return Problem(team, None, field, message, fix, shown_path(path), line)


def _type_problems(team: Team, path: Path) -> typing.Iterator[Problem]:
    """Every field whose value is not of its declared type (Python does not check them)."""
    team_name = team.name if isinstance(team.name, str) else ""
    yield from _fields_of(team, "", team_name, None, path)
    if isinstance(team.alert_thresholds, AlertThresholds):
        yield from _fields_of(team.alert_thresholds, "alert_thresholds.", team_name, None, path)
    yield from _job_list(team.jobs, "jobs", Job, "Job(name=..., schedule=..., source=...)", team_name, path)
    yield from _job_list(
        team.event_jobs, "event_jobs", EventJob, "EventJob(name=..., source=...)", team_name, path
    )
    yield from _job_list(team.services, "services", Service, "Service(name=..., image=...)", team_name, path)
    yield from _job_list(
        team.service_jobs,
        "service_jobs",
        ServiceJob,
        "ServiceJob(name=..., schedule=..., service=..., path=...)",
        team_name,
        path,
    )
    yield from _job_list(
        team.app_engine_jobs,
        "app_engine_jobs",
        AppEngineJob,
        "AppEngineJob(name=..., schedule=..., relative_uri=...)",
        team_name,
        path,
    )


# The nested configs of a job whose fields are checked too: retry policies, targets, calendars.
NESTED_CONFIGS = (
    ("retry", (Retry, PushRetry)),
    ("target", TARGET_CLASSES),
    ("active", (Window,)),
    ("exclude", (Calendar,)),
)


def _job_list(
    jobs: Any, field: str, kind: type, write: str, team_name: str, path: Path
) -> typing.Iterator[Problem]:
    """The field types of every job in one of the team's job lists (`jobs`, `event_jobs`)."""
    if not isinstance(jobs, list | tuple):
        return  # reported with the team's own fields
    for index, job in enumerate(jobs):
        if not isinstance(job, kind):
            yield Problem(
                team_name,
                None,
                f"{field}[{index}]",
                f"is a {type(job).__name__}, not a {kind.__name__}",
                f"write {write}",
                shown_path(path),
            )
            continue
        name = getattr(job, "name", None)
        job_name = name if isinstance(name, str) else f"{field}[{index}]"
        yield from _fields_of(job, "", team_name, job_name, path)
        for nested, classes in NESTED_CONFIGS:
            value = getattr(job, nested, None)
            if isinstance(value, classes):
                yield from _fields_of(value, f"{nested}.", team_name, job_name, path)


def _fields_of(config: Any, prefix: str, team: str, job: str | None, path: Path) -> typing.Iterator[Problem]:
    try:
        hints = typing.get_type_hints(type(config))
    except Exception:  # an annotation that cannot be resolved at run time: check none of them
        hints = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        expected = hints.get(field.name, Any)
        if not _conforms(value, expected):
            yield Problem(
                team,
                job,
                prefix + field.name,
                f"{value!r} is a {type(value).__name__}; it must be {_describe(expected)}",
                _type_fix(field.name, value, expected),
                shown_path(path),
            )


def _conforms(value: Any, hint: Any) -> bool:
    """Does the value match the hint? Hints this module does not know are accepted."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool, float) or hint in (*CONFIG_CLASSES.values(),):
        return isinstance(value, hint)
    if origin is dict:
        key, item = args
        return isinstance(value, dict) and all(
            _conforms(k, key) and _conforms(v, item) for k, v in value.items()
        )
    if origin is list:
        # Job and Team instances are checked one by one, with their own names.
        return isinstance(value, list | tuple) and (
            args[0] in (Job, Team, EventJob, Service, ServiceJob, AppEngineJob)
            or all(_conforms(v, args[0]) for v in value)
        )
    return True


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in args)
    if origin is dict:
        return f"a dict of {_describe(args[0])} to {_describe(args[1])}"
    if origin is list:
        return f"a list of {_describe(args[0])}"
    names = {int: "a whole number", str: "a string", bool: "True or False", type(None): "None"}
    return names.get(hint, f"a {getattr(hint, '__name__', hint)}")


def _type_fix(field: str, value: Any, hint: Any) -> str:
    if hint is int and isinstance(value, str) and value.strip().isdigit():
        return f"write {field}={value.strip()} (a number, without quotes)"
    if hint is int and isinstance(value, float) and value.is_integer():
        return f"write {field}={int(value)}"
    if typing.get_origin(hint) is dict:
        return f'write {field}={{"key": "value"}} with strings on both sides (numbers in quotes)'
    return f"give {field} {_describe(hint)}"
