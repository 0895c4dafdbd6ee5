"""The web frameworks a job runs under (its hosts), one module each, loaded only when used.

`flask`: functions-framework and Flask views (werkzeug's request and response); `django`: Django
views; `starlette`: Starlette and FastAPI routes. Each reads its framework's request into the
core's `Incoming` and turns an `Answer` into its framework's JSON response (`runonce.core.host`).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def host_of(arguments: tuple[Any, ...]) -> ModuleType:
    """The host module of a view called with `arguments`, by the framework of its request's type:
    Django's, Starlette's, else werkzeug's (functions-framework; a Flask view gets no request)."""
    if arguments:
        frameworks = {kind.__module__.partition(".")[0] for kind in type(arguments[0]).__mro__}
        if "django" in frameworks:
            return importlib.import_module("runonce.hosts.django")
        if "starlette" in frameworks:
            return importlib.import_module("runonce.hosts.starlette")
    # Imported as written so that the stacks' requirement check follows it to werkzeug, which a
    # function needs; Django and Starlette are a service's own dependencies.
    from . import flask

    return flask
