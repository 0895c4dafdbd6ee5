"""`stacks.config.defaults` under its former name, for `policy/` until it imports the new one."""

from __future__ import annotations

from stacks.config.defaults import *  # noqa: F403
