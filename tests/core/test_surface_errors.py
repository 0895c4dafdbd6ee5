"""Every exception class runonce defines has one root, `RunonceError`, and keeps its built-in base."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import runonce
from runonce import ConfigError, RunonceError
from runonce.core.errors import NestedRunError, NotRunnable


def defined_exceptions() -> list[type[BaseException]]:
    """The exception classes defined in any module of the runonce package, private ones too."""
    modules = [runonce] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(runonce.__path__, prefix="runonce.")
    ]
    return [
        value
        for module in modules
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
    ]


def test_the_walk_finds_the_exceptions_of_every_layer():
    found = {f"{cls.__module__}.{cls.__qualname__}" for cls in defined_exceptions()}
    assert {
        "runonce.core.errors.PermanentError",
        "runonce.core.fields.BadField",
        "runonce.store._commit._Unsupported",
        "runonce.scheduler.delivery.BadDelivery",
        "runonce.events.deadletter.DeadLetterFailed",
        "runonce.targets.proxy.TargetUnavailable",
        "runonce.downstream.StepInProgress",
    } <= found


@pytest.mark.parametrize("cls", defined_exceptions(), ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_every_runonce_exception_is_a_runonce_error(cls):
    assert issubclass(cls, RunonceError)


@pytest.mark.parametrize(
    ("cls", "base"), [(ConfigError, ValueError), (NotRunnable, TypeError), (NestedRunError, RuntimeError)]
)
def test_an_exception_keeps_its_built_in_base(cls, base):
    with pytest.raises(base):
        raise cls("a problem")
