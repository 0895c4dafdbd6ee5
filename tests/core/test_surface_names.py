"""`runonce.__all__` is the small public surface, and docs/library.md's "Public names" lists it."""

from __future__ import annotations

import runonce

from .test_library_doc import table

DECORATORS = {"deduplicated", "deduplicated_event"}


def test_the_documented_public_names_are_exactly_all():
    documented = [row[0].strip("`") for row in table("## Public names")]
    assert sorted(documented) == sorted(runonce.__all__)
    assert len(documented) == len(set(documented))


def test_the_surface_stays_small():
    assert len(runonce.__all__) <= 12


def test_every_public_name_resolves_and_says_what_it_is():
    for name in runonce.__all__:
        value = getattr(runonce, name)
        assert name == "__version__" or (value.__doc__ or "").strip(), name


def test_the_decorators_are_the_names_loaded_at_first_use():
    assert set(runonce._LOADED_AT_FIRST_USE) == DECORATORS
    assert set(runonce.__all__) >= DECORATORS


def test_a_name_that_left_the_surface_is_imported_from_its_package():
    from runonce.core.outcomes import Outcome
    from runonce.store.firestore import Ledger

    assert Outcome.COMPLETED.status == 200 and Ledger.__module__ == "runonce.store.firestore"
    assert "Ledger" not in runonce.__all__ and not hasattr(runonce, "Outcome")
