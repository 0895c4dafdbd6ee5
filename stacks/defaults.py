"""The fixed choices of `stacks.config.defaults`, re-exported under this name for `policy/rules.py`,
which imports them from here."""

from __future__ import annotations

from stacks.config.defaults import *  # noqa: F403
