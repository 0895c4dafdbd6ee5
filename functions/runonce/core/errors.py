"""Exceptions that cross the library's boundary, under one root: `RunonceError`."""


class RunonceError(Exception):
    """The root of every exception runonce defines: `except RunonceError` catches runonce's own.

    Each subclass keeps its built-in base too (`ConfigError` is a `ValueError`, `NotRunnable` a
    `TypeError`, ...), so handlers written for those bases still catch it.
    """


class PermanentError(RunonceError):
    """Raised by job code for a failure that retrying cannot fix.

    The run is recorded as `failed`, logged at ERROR, and answered 2xx so Scheduler stops
    retrying; later deliveries of the same run are answered 200 without running the job.
    """


class OutcomeUnknown(RunonceError):
    """Raised by job code whose work may or may not have taken effect (its answer was lost).

    The run is neither released nor finished: its claim stays held for `hold_seconds`, so no
    retry repeats the work before it can be checked. Deliveries meanwhile are answered 409
    `in_progress`; the first one after that takes the run over (attempt + 1), and its job checks
    for the work before doing it again.
    """

    def __init__(self, message: str, hold_seconds: float):
        super().__init__(message)
        self.hold_seconds = hold_seconds


class ConfigError(RunonceError, ValueError):
    """A runonce setting is invalid; the message names the setting and how to fix it."""


class NotRunnable(RunonceError, TypeError):
    """The job is an async or generator function: its body would never run. Raised when decorating."""


class NestedRunError(RunonceError, RuntimeError):
    """A `@deduplicated` function was called while a `@deduplicated` job was running: it would claim
    the same delivery's run again and find it held. Call the undecorated function instead."""


class StoreError(RunonceError):
    """A call to the run store failed; `problem` says how, in words fit for a log line."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


class StoreUnavailable(StoreError):
    """The store could not be reached, or did not answer in time: a retry may work."""


class StoreRejected(StoreError):
    """The store refused the call: retrying the same call will not help."""


class StoreDenied(StoreRejected):
    """The store refused this function's identity, or has no such database: a setup to fix."""


class EventRetry(RunonceError, RuntimeError):
    """Raised out of a CloudEvent function by `@deduplicated_event` so that the event is delivered
    again (a CloudEvent function nacks by raising); `answer` is what a push request would get."""

    def __init__(self, message: str, answer: object):
        super().__init__(message)
        self.answer = answer
