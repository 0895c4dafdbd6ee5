"""`runonce.__all__` is the small public surface, and docs/library.md's "Public names" lists it."""

from __future__ import annotations

import os
import subprocess
import sys

import runonce

from .test_library_doc import table

DECORATORS = {"deduplicated", "deduplicated_event"}
LOADED_AT_FIRST_USE = DECORATORS | {"Event"}


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


def test_the_decorators_and_the_event_type_are_the_names_loaded_at_first_use():
    assert set(runonce._LOADED_AT_FIRST_USE) == LOADED_AT_FIRST_USE
    assert set(runonce.__all__) >= LOADED_AT_FIRST_USE
    assert runonce.Event.__module__ == "runonce.core.event"


def test_a_scheduled_function_loads_neither_the_event_path_nor_the_operators_verbs():
    """What `benchmarks.coldstart` times, in a fresh interpreter: the event types and settings and
    the re-run request helpers stay unloaded (docs/benchmarks.md, cold start)."""
    probe = (
        "import sys, functions_framework, runonce\n"
        "from runonce import deduplicated\n"
        "@deduplicated\n"
        "def handle(request):\n"
        "    return {}\n"
        "print(' '.join(sorted(name for name in sys.modules if name.startswith('runonce'))))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=_environment()
    ).stdout.split()
    assert "runonce.store.firestore" in loaded  # the probe did load the scheduled path
    unused = {"runonce.core.event", "runonce.core.requests", "runonce.store._requests", "runonce.events"}
    assert unused.isdisjoint(loaded), unused & set(loaded)


WEB_FRAMEWORKS = {"django", "starlette", "fastapi"}


def test_a_scheduled_function_loads_its_host_at_its_first_call_and_no_other_framework():
    """Decorating loads no host module, not even the seam's types (the cold start stays as it
    was); a first delivery (a bad one: nothing reaches the store) loads werkzeug's host and
    neither Django, Starlette, FastAPI nor their hosts."""
    probe = (
        "import sys, functions_framework, flask, runonce\n"
        "from runonce import deduplicated\n"
        "@deduplicated\n"
        "def handle(request):\n"
        "    return {}\n"
        "seam = ('runonce.hosts', 'runonce.core.host')\n"
        "decorated = sorted(name for name in sys.modules if name.startswith(seam))\n"
        "with flask.Flask('probe').test_request_context('/', method='POST'):\n"
        "    body, status = handle(flask.request._get_current_object())\n"
        "assert status == 400, (status, body)\n"
        "print(' '.join(decorated) or '-')\n"
        "print(' '.join(sorted(name for name in sys.modules)))\n"
    )
    # An emulator address nothing listens on: the client needs no credentials, and no call is made.
    environment = {**_environment(), "FIRESTORE_EMULATOR_HOST": "127.0.0.1:9"}
    after_decoration, after_call = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=environment
    ).stdout.splitlines()[-2:]
    assert after_decoration == "-"
    loaded = set(after_call.split())
    assert "runonce.hosts.flask" in loaded  # the probe did answer through its host
    assert {"runonce.hosts.django", "runonce.hosts.starlette", "runonce.scheduler.asgi"}.isdisjoint(loaded)
    assert not {name for name in loaded if name.partition(".")[0] in WEB_FRAMEWORKS}


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "GOOGLE_CLOUD_PROJECT": "probe"}


def test_a_name_that_left_the_surface_is_imported_from_its_package():
    from runonce.core.outcomes import Outcome
    from runonce.store.firestore import Ledger

    assert Outcome.COMPLETED.status == 200 and Ledger.__module__ == "runonce.store.firestore"
    assert "Ledger" not in runonce.__all__ and not hasattr(runonce, "Outcome")
