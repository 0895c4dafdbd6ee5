"""A job's folder declares where its effects are ([effects] in local_demo.toml); a bad file is
refused with the file, the field and the fix."""

from pathlib import Path

import pytest

from localscheduler.folder_file import FolderFileError
from localscheduler.verdicts.effects import FirestoreEffects, declared_effects
from stacks.team import Job


def _folder(tmp_path: Path, text: str) -> Path:
    (tmp_path / "local_demo.toml").write_text(text)
    return tmp_path


def test_the_example_job_declares_its_outbox():
    source = Job(name="report", schedule="* * * * *", source="report").source_dir
    assert declared_effects(source) == FirestoreEffects("report_outbox", "run_key", "attempt_id")


def test_a_folder_without_the_file_declares_nothing(tmp_path):
    assert declared_effects(tmp_path) is None


def test_a_file_without_an_effects_table_declares_nothing(tmp_path):
    assert declared_effects(_folder(tmp_path, "[events]\n")) is None


def test_only_the_collection_is_required(tmp_path):
    folder = _folder(tmp_path, '[effects]\ncollection = "sent_mail"\n')
    assert declared_effects(folder) == FirestoreEffects("sent_mail", "run_key", None)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '[effects]\nrun_key_field = "key"\n',
            "[effects] collection must be a non-empty string, e.g. collection",
        ),
        ('[effects]\ncollection = ""\n', "[effects] collection must be a non-empty string"),
        (
            '[effects]\ncollection = "x"\nattempt_id_field = 3\n',
            "[effects] attempt_id_field must be a non-empty",
        ),
        ('[effects]\ncollection = "x"\ncolection = "y"\n', "[effects] has an unknown field 'colection'; its"),
        ('collection = "x"\n', "unknown table or field 'collection'; the tables are [effects], [events]"),
        ('effects = "report_outbox"\n', "effects must be a table: put [effects] on a line of its own"),
        ('[effects]\ncollection = "x\n', "not valid TOML"),
    ],
    ids=["no collection", "empty collection", "number", "typo", "outside the table", "not a table", "syntax"],
)
def test_a_bad_file_names_the_file_the_field_and_the_fix(tmp_path, text, message):
    with pytest.raises(FolderFileError) as raised:
        declared_effects(_folder(tmp_path, text))
    assert str(raised.value).startswith(str(tmp_path / "local_demo.toml"))
    assert message in str(raised.value)
