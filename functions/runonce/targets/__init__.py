"""Google API targets: the target schema (`schema`, plain data, re-exported here) and the proxy
that starts a target once per run (`proxy`, loaded only by the functions that use it, since it
needs `requests`)."""

from .schema import (
    ARGUMENT_FIELD,
    BASE_URL_VARIABLE,
    ENV_NAME,
    GRACE_VARIABLE,
    IDEMPOTENCY_HEADER,
    LABEL_KEY,
    LABEL_VALUE_LENGTH,
    SUBSTITUTION,
    TARGET_VARIABLE,
    TIMEOUT_VARIABLE,
    BuildTrigger,
    Call,
    CloudRunJob,
    GoogleApi,
    Target,
    Unreadable,
    Workflow,
    label_value,
    load_target,
    parse_target,
)

__all__ = [
    "ARGUMENT_FIELD",
    "BASE_URL_VARIABLE",
    "ENV_NAME",
    "GRACE_VARIABLE",
    "IDEMPOTENCY_HEADER",
    "LABEL_KEY",
    "LABEL_VALUE_LENGTH",
    "SUBSTITUTION",
    "TARGET_VARIABLE",
    "TIMEOUT_VARIABLE",
    "BuildTrigger",
    "Call",
    "CloudRunJob",
    "GoogleApi",
    "Target",
    "Unreadable",
    "Workflow",
    "label_value",
    "load_target",
    "parse_target",
]
