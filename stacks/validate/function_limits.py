"""What a gen2 function accepts: runtimes, memory sizes, environment variable names, labels.

Pinned from Google's pages (read 2026-11-30) so a typo fails at synth, not at apply:

- Runtimes: "Python runtime", https://cloud.google.com/run/docs/runtimes/python (supported runtime
  IDs with their deprecation dates; the preview python315 is left out: it needs the beta API).
  Only Python: the stack ships runonce, a Python package, with every function.
- Memory: "Configure memory and vCPU limits", https://cloud.google.com/functions/docs/configuring/memory
  (128 MiB to 32 GiB; the CPU follows the memory tier).
- Reserved environment variables: Cloud Run's container runtime contract,
  https://cloud.google.com/run/docs/container-contract#env-vars ("reserved and cannot be set":
  PORT, K_SERVICE, K_REVISION, K_CONFIGURATION, and CLOUD_RUN_* for jobs), and "Environment
  variables for services", https://cloud.google.com/run/docs/configuring/services/overview-environment-variables
  (a function's FUNCTION_TARGET and FUNCTION_SIGNATURE_TYPE). The X_GOOGLE_ prefix is reserved for
  Google (https://cloud.google.com/functions/1stgendocs/configuring/env-var).
- Labels: "Requirements for labels", https://cloud.google.com/resource-manager/docs/labels-overview
  (at most 64 per resource; keys start with a lowercase letter; keys and values at most 63
  characters of lowercase letters, digits, '_' and '-'), and the `goog-` prefix is Google's own
  (the provider itself adds `goog-terraform-provisioned`).
"""

from __future__ import annotations

import re

from runonce.contract import CONSUMER_VARIABLE

PYTHON_RUNTIMES = ("python310", "python311", "python312", "python313", "python314")
"""Generally available Python runtimes of Cloud Run functions."""

MEMORY_SIZES = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi", "16Gi", "32Gi")
"""Memory tiers of a gen2 function, in Cloud Run notation."""

RESERVED_ENV = frozenset(
    {
        "PORT",
        CONSUMER_VARIABLE,
        "K_REVISION",
        "K_CONFIGURATION",
        "CLOUD_RUN_JOB",
        "CLOUD_RUN_EXECUTION",
        "CLOUD_RUN_TASK_INDEX",
        "CLOUD_RUN_TASK_ATTEMPT",
        "CLOUD_RUN_TASK_COUNT",
        "FUNCTION_TARGET",
        "FUNCTION_SIGNATURE_TYPE",
    }
)
"""Variables Cloud Run sets itself and will not let a deployment set."""

RESERVED_ENV_PREFIXES = ("X_GOOGLE_",)
"""Prefixes reserved for Google."""

MAX_LABELS = 64
"""Labels per resource."""

RESERVED_LABEL_PREFIX = "goog-"
"""Label keys Google reserves for itself."""

RUNONCE_LABELS = ("runonce-team", "runonce-function", "goog-terraform-provisioned")
"""Labels a job's function gets besides the team's and job's: the stack's team and function
labels and the one the google provider adds (`add_terraform_attribution_label`); they count
against the 64."""

RESERVED_RUNONCE_LABELS = (*RUNONCE_LABELS, "runonce-job")
"""Label keys a team or job may not set: runonce's own, and `runonce-job`, which functions
carried before several jobs could share one."""

LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
