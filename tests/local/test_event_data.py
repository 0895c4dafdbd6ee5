"""An event job's folder declares what the demo publishes to it ([events] in local_demo.toml);
a folder without it gets {"n": <number>}; a bad table is refused with the file, the field and
the fix. The example folders declare their data and effects."""

import json
from pathlib import Path

import pytest

from localscheduler.demos.event_data import declared_event_data
from localscheduler.demos.events import EXAMPLE, EventFunction
from localscheduler.folder_file import FolderFileError
from localscheduler.verdicts.effects import FirestoreEffects, declared_effects
from stacks.team import load_teams


def _folder(tmp_path: Path, text: str) -> Path:
    (tmp_path / "local_demo.toml").write_text(text)
    return tmp_path


def test_every_n_in_the_declared_data_becomes_the_message_number(tmp_path):
    folder = _folder(tmp_path, '[events]\ndata = \'{"id": "{n}", "copy": {n}, "amount": 12}\'\n')
    assert json.loads(declared_event_data(folder).message(7)) == {"id": "7", "copy": 7, "amount": 12}


def test_a_folder_without_the_file_gets_the_message_number(tmp_path):
    assert json.loads(declared_event_data(tmp_path).message(3)) == {"n": 3}


def test_a_file_without_an_events_table_gets_the_message_number(tmp_path):
    folder = _folder(tmp_path, '[effects]\ncollection = "sent"\n')
    assert json.loads(declared_event_data(folder).message(0)) == {"n": 0}


def _refusal(tmp_path: Path, text: str) -> str:
    """What declared_event_data says about a folder whose local_demo.toml is `text`."""
    with pytest.raises(FolderFileError) as raised:
        declared_event_data(_folder(tmp_path, text))
    return str(raised.value).removeprefix(f"{tmp_path / 'local_demo.toml'}: ")


def test_events_without_data_is_refused_with_an_example(tmp_path):
    assert (
        _refusal(tmp_path, "[events]\n")
        == '[events] data must be a non-empty string, e.g. data = "order {n}"'
    )


def test_empty_or_non_text_data_is_refused(tmp_path):
    assert _refusal(tmp_path, '[events]\ndata = ""\n').startswith("[events] data must be a non-empty string")
    assert _refusal(tmp_path, "[events]\ndata = 12\n").startswith("[events] data must be a non-empty string")


def test_an_unknown_field_of_events_is_refused_with_the_fields_it_has(tmp_path):
    refusal = _refusal(tmp_path, "[events]\ndata = 'x'\nattributes = 'y'\n")
    assert refusal == "[events] has an unknown field 'attributes'; its fields are data"


def test_data_outside_the_table_or_events_not_a_table_is_refused(tmp_path):
    assert _refusal(tmp_path, "data = 'x'\n").startswith("unknown table or field 'data'; the tables are")
    assert _refusal(tmp_path, "events = 'x'\n") == "events must be a table: put [events] on a line of its own"


def test_a_file_that_is_not_toml_is_refused(tmp_path):
    assert _refusal(tmp_path, '[events]\ndata = \'{"n": {n}}\n').startswith("not valid TOML")


def test_the_example_event_job_declares_its_outbox_and_its_orders():
    assert declared_effects(EXAMPLE.source_dir) == FirestoreEffects(
        "event_example_outbox", "run_key", "attempt_id"
    )
    assert json.loads(declared_event_data(EXAMPLE.source_dir).message(4)) == {"order": 4}


def test_the_example_team_s_orders_job_declares_its_receipts_and_an_order():
    [orders] = [job for team in load_teams() for job in team.event_jobs if job.name == "orders"]
    function = EventFunction.of(orders)
    assert declared_effects(function.source_dir) == FirestoreEffects(
        "order_receipts", "run_key", "attempt_id"
    )
    order = json.loads(declared_event_data(function.source_dir).message(5))
    assert order["order_id"] == "5" and isinstance(order["amount"], int | float)
