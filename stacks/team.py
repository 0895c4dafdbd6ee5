"""The team-file API: everything a team file in `teams/` builds its `team` from.

Team files import from here (`from stacks.team import Job, Retry, Team`); the classes live in
`stacks.config` (`stacks/config/team.py` documents every field and its default), next to the
code that reads team files and the fixed choices every stack makes.
"""

from __future__ import annotations

from runonce.contract import Overlap
from stacks.config.state import GcsState
from stacks.config.store import Firestore, Network, Valkey
from stacks.config.targets import BuildTrigger, CloudRunJob, GoogleApi, Target, Workflow
from stacks.config.team import (
    EVENTARC,
    EVENTARC_MAX_EVENT_AGE_SECONDS,
    EVENTARC_RETENTION_SECONDS,
    FUNCTIONS_DIR,
    LEASE_MARGIN_SECONDS,
    MAX_RETRY_WINDOW_SECONDS,
    PROXY_SOURCE,
    PUSH,
    REPO_ROOT,
    TEAMS_DIR,
    AlertThresholds,
    AppEngineJob,
    Calendar,
    EventJob,
    Job,
    PushRetry,
    Retry,
    Service,
    ServiceJob,
    Team,
    Window,
    load_team_file,
    load_teams,
    team_file_paths,
)

__all__ = [
    "EVENTARC",
    "EVENTARC_MAX_EVENT_AGE_SECONDS",
    "EVENTARC_RETENTION_SECONDS",
    "FUNCTIONS_DIR",
    "LEASE_MARGIN_SECONDS",
    "MAX_RETRY_WINDOW_SECONDS",
    "PROXY_SOURCE",
    "PUSH",
    "REPO_ROOT",
    "TEAMS_DIR",
    "AlertThresholds",
    "AppEngineJob",
    "BuildTrigger",
    "Calendar",
    "CloudRunJob",
    "EventJob",
    "Firestore",
    "GcsState",
    "GoogleApi",
    "Job",
    "Network",
    "Overlap",
    "PushRetry",
    "Retry",
    "Service",
    "ServiceJob",
    "Target",
    "Team",
    "Valkey",
    "Window",
    "Workflow",
    "load_team_file",
    "load_teams",
    "team_file_paths",
]
