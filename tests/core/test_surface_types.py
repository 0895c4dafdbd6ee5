"""The decorators keep a decorated function's parameter type under mypy, bare or with options.

mypy checks a small module that decorates typed functions, reveals their types and calls them
wrongly; each `# expect:` comment is a message mypy must print for that line, and no other line
may have one. If the decorators lost their types, the revealed types would be `Any` and the wrong
calls would pass.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = textwrap.dedent(
    """
    import flask
    from cloudevents.http import CloudEvent

    from runonce import Event, deduplicated, deduplicated_event


    @deduplicated
    def bare(request: flask.Request) -> dict[str, int]:
        return {"rows": 1}


    @deduplicated(lease=60, collection="runs")
    def with_options(request: flask.Request) -> dict[str, int]:
        return {"rows": 1}


    @deduplicated_event
    def on_event(event: Event) -> None:
        pass


    @deduplicated_event(dead_letter_topic="projects/p/topics/dead")
    def with_topic(event: Event) -> str:
        return event.id


    reveal_type(bare)  # expect: Revealed type is "def (flask.wrappers.Request) -> ANSWER"
    reveal_type(with_options)  # expect: Revealed type is "def (flask.wrappers.Request) -> ANSWER"
    reveal_type(on_event)  # expect: Revealed type is "runonce.events.adapter.Handled"
    reveal_type(with_topic)  # expect: Revealed type is "runonce.events.adapter.Handled"
    bare(42)  # expect: Argument 1 to "bare" has incompatible type "int"; expected "Request"
    with_options(flask.request, 2)  # expect: Too many arguments
    on_event("a string")  # expect: No overload variant of "__call__" of "Handled" matches argument type "str"
    on_event(CloudEvent({"type": "t", "source": "s"}))
    answered: int = on_event(flask.request)  # expect: Incompatible types in assignment
    on_event(flask.request, flask.request)  # expect: No overload variant of "__call__" of "Handled"
    flask.Flask(__name__).post("/events/<region>")(with_topic)  # a Flask view: called with URL values
    on_event()
    on_event(region="eu")
    status: int = bare(flask.request).status
    wrong: str = bare(flask.request)  # expect: Incompatible types in assignment


    @deduplicated(lease="60")  # expect: No overload variant of "deduplicated" matches argument type "str"
    def bad_option(request: flask.Request) -> None:
        pass


    @deduplicated_event  # expect: Argument 1 to "deduplicated_event" has incompatible type
    def not_an_event_job(number: int) -> None:
        pass
    """
)
# How mypy writes the types the decorated functions take and give back.
SNIPPET = SNIPPET.replace("ANSWER", "tuple[dict[str, Any], int, fallback=runonce.core.outcomes.Answer]")


@pytest.fixture(scope="module")
def mypy_output(tmp_path_factory) -> str:
    snippet = tmp_path_factory.mktemp("types") / "decorated.py"
    snippet.write_text(SNIPPET)
    stdout, stderr, _ = api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--hide-error-context", "--no-pretty", str(snippet)]
    )
    assert not stderr
    return stdout


def expectations() -> dict[int, str]:
    """Line number -> the text mypy must print for it."""
    return {
        number: match.group(1)
        for number, line in enumerate(SNIPPET.splitlines(), start=1)
        if (match := re.search(r"# expect: (.*)$", line))
    }


def test_every_expected_message_is_printed_on_its_line(mypy_output):
    messages = {}
    for line in mypy_output.splitlines():
        if match := re.match(r".*decorated\.py:(\d+): (?:error|note): (.*)$", line):
            messages.setdefault(int(match.group(1)), []).append(match.group(2))
    missing = {
        number: text
        for number, text in expectations().items()
        if not any(text in message for message in messages.get(number, []))
    }
    assert missing == {}, mypy_output


def test_no_other_line_has_a_message(mypy_output):
    flagged = {int(number) for number in re.findall(r"decorated\.py:(\d+): error", mypy_output)}
    assert flagged <= set(expectations()), mypy_output
