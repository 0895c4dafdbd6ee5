"""Play several harnesses at once: each call in a thread of its own, the results in order."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def side_by_side(plays: Sequence[Callable[[], T]]) -> list[T]:
    """Run every call at once and wait for all; their results in the calls' order, or the first
    failure (by position) raised here. The threads are daemons: an interrupted demo exits."""
    outcomes: dict[int, T | BaseException] = {}

    def play(index: int) -> None:
        try:
            outcomes[index] = plays[index]()
        except BaseException as exc:  # handed to the calling thread, which raises it
            outcomes[index] = exc

    threads = [threading.Thread(target=play, args=(index,), daemon=True) for index in range(len(plays))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results: list[T] = []
    for index in range(len(plays)):
        outcome = outcomes[index]
        if isinstance(outcome, BaseException):
            raise outcome
        results.append(outcome)
    return results
