"""What every runonce decorator does around its adapter: the checks a job passes before it serves.

`@deduplicated` and `@deduplicated_event` differ only in how a request becomes an answer. Both
refuse a job that could never run when decorating it, make one connection per decorated job, and
refuse a call made from inside a running job before touching the store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .._text import type_name
from .finish import refuse_unrunnable
from .run import refuse_nested

_J = TypeVar("_J", bound=Callable[..., Any])


def decorate(
    func: _J | None,
    connect: Callable[[], Any],
    respond: Callable[..., Any],
) -> Callable[..., Any]:
    """`func` decorated (bare use), or the decorator to apply (use with options).

    The adapters' overloads give the precise types: this returns either a handler or a decorator.

    The decorated job is refused (NotRunnable) if it is `async def` or a generator; each call
    is refused (NestedRunError) inside a running job, then answered by `respond(job, connection,
    *arguments)` with the connection `connect()` made for this job. The arguments are what the
    host calls a view with: the request (functions-framework, Django), URL values (Flask).
    """

    def wrap(job: _J) -> Callable[..., Any]:
        refuse_unrunnable(job)
        connection = connect()
        name = getattr(job, "__qualname__", None) or type_name(job)

        @functools.wraps(job)
        def handler(*arguments: Any, **keywords: Any) -> Any:
            refuse_nested(arguments[0] if arguments else None, name)
            return respond(job, connection, *arguments, **keywords)

        return handler

    return wrap(func) if func is not None else wrap
