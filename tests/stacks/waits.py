"""The longest chain of `time_sleep` waits in a synthesized stack: the least time a first apply
spends waiting, whatever Terraform's parallelism (docs/stacks/first-deploy.md, "Time")."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from tests.stacks.flows import flows

DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def seconds(duration: str) -> int:
    """A time_sleep duration ("60s", "2m", "1h10m") in seconds."""
    found = DURATION.match(duration)
    if not duration or found is None:
        raise ValueError(f"not a time_sleep duration: {duration!r}")
    hours, minutes, secs = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + secs


def _address(reference: str) -> str:
    """The block a reference names (`google_x.name`, `data.google_x.name`, `local.name`)."""
    parts = reference.split(".")
    return ".".join(parts[:3] if parts[0] == "data" else parts[:2])


def longest_wait(document: dict[str, Any]) -> tuple[int, list[str]]:
    """The largest sum of `time_sleep` create durations along one dependency chain (explicit
    `depends_on` and references), and that chain's sleeps, first to last."""
    blocks: dict[str, dict[str, Any]] = {
        f"{prefix}{kind}.{name}": config
        for section, prefix in (("resource", ""), ("data", "data."))
        for kind, named in document.get(section, {}).items()
        for name, config in named.items()
    }
    blocks.update({f"local.{name}": {} for name in document.get("locals", {})})
    after: dict[str, set[str]] = {
        address: set(config.get("depends_on", [])) for address, config in blocks.items()
    }
    for flow in flows(document):
        after[flow.address].add(_address(flow.reference))

    def wait(address: str) -> int:
        config = blocks[address]
        return seconds(config["create_duration"]) if address.startswith("time_sleep.") else 0

    @cache
    def longest(address: str) -> tuple[int, tuple[str, ...]]:
        best: tuple[int, tuple[str, ...]] = (0, ())
        for before in after.get(address, ()):
            if before in blocks:
                best = max(best, longest(before))
        own = wait(address)
        return best[0] + own, (*best[1], address) if own else best[1]

    total, chain = max(longest(address) for address in blocks)
    return total, list(chain)
