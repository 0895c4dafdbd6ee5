"""A job's folder declares where its effects are (local_effects.toml); a bad file is refused with
the file, the field and the fix."""

from pathlib import Path

import pytest

from localscheduler.effects import EffectsFileError, FirestoreEffects, declared_effects
from stacks.team import Job


def _folder(tmp_path: Path, text: str) -> Path:
    (tmp_path / "local_effects.toml").write_text(text)
    return tmp_path


def test_the_example_job_declares_its_outbox():
    source = Job(name="report", schedule="* * * * *", source="report").source_dir
    assert declared_effects(source) == FirestoreEffects("report_outbox", "run_key", "attempt_id")


def test_a_folder_without_the_file_declares_nothing(tmp_path):
    assert declared_effects(tmp_path) is None


def test_only_the_collection_is_required(tmp_path):
    folder = _folder(tmp_path, 'collection = "sent_mail"\n')
    assert declared_effects(folder) == FirestoreEffects("sent_mail", "run_key", None)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            'run_key_field = "key"\n',
            'collection must be a non-empty string, e.g. collection = "report',
        ),
        ('collection = ""\n', "collection must be a non-empty string"),
        (
            'collection = "x"\nattempt_id_field = 3\n',
            "attempt_id_field must be a non-empty string, e.g. attempt",
        ),
        (
            'collection = "x"\ncolection = "y"\n',
            "unknown field 'colection'; the fields are",
        ),
        ('collection = "x\n', "not valid TOML"),
    ],
    ids=["no collection", "empty collection", "number", "typo", "syntax"],
)
def test_a_bad_file_names_the_file_the_field_and_the_fix(tmp_path, text, message):
    with pytest.raises(EffectsFileError) as raised:
        declared_effects(_folder(tmp_path, text))
    assert str(raised.value).startswith(str(tmp_path / "local_effects.toml"))
    assert message in str(raised.value)
