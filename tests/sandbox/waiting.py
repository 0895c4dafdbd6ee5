"""Waiting on an eventually visible effect in the cloud: poll until done or the time is up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    read: Callable[[], T],
    done: Callable[[T], bool],
    within: float,
    every: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `read` until `done` holds for its value or `within` seconds have passed, and return
    the last value read either way (the caller asserts on it, so a timeout shows what was seen).
    `read` runs at least once, and once more at the deadline; no sleep ends past the deadline."""
    deadline = clock() + within
    value = read()
    while not done(value):
        left = deadline - clock()
        if left <= 0:
            return value
        sleep(min(every, left))
        value = read()
    return value
