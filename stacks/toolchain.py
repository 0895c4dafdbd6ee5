"""The one seam between the stacks and their CDK toolchain: CDKTF (the default) or CDK Terrain.

`RUNONCE_TOOLCHAIN=cdktn` selects CDK Terrain, CDKTF's maintained fork (`cdktn`,
`cdktn-provider-google`, `cdktn-provider-time`); unset or `cdktf` selects CDKTF. Both expose the
same classes under the same names and synthesize the same Terraform JSON
(tests/stacks/test_toolchain.py; docs/stacks/toolchain.md), so the stacks name the core classes
through this module and the provider bindings through `stacks.constructs.provider`, which loads
them from `TOOLCHAIN`'s packages. Nothing else in the stacks imports either toolchain.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

TOOLCHAIN_ENV = "RUNONCE_TOOLCHAIN"


@dataclass(frozen=True)
class Toolchain:
    """A CDK toolchain: where its core and its prebuilt provider bindings are installed."""

    name: str
    core: str
    """The core package (App, TerraformStack, Fn, ...)."""
    google: str
    """The prebuilt google provider bindings (provider 6.50.0 on both toolchains)."""
    time: str
    """The prebuilt time provider bindings (provider 0.13.1 on both toolchains)."""
    install: str
    """The command that installs it."""


TOOLCHAINS = {
    "cdktf": Toolchain(
        "cdktf", "cdktf", "cdktf_cdktf_provider_google", "cdktf_cdktf_provider_time", "make install"
    ),
    "cdktn": Toolchain(
        "cdktn", "cdktn", "cdktn_provider_google", "cdktn_provider_time", "make synth TOOLCHAIN=cdktn"
    ),
}


def chosen(environ: Mapping[str, str] = os.environ) -> Toolchain:
    """The toolchain `RUNONCE_TOOLCHAIN` names (CDKTF when it is unset or empty)."""
    name = environ.get(TOOLCHAIN_ENV) or "cdktf"
    if name not in TOOLCHAINS:
        raise ValueError(
            f"{TOOLCHAIN_ENV}={name!r} is not a toolchain: set it to one of {', '.join(TOOLCHAINS)} "
            "(or leave it unset for cdktf)"
        )
    return TOOLCHAINS[name]


TOOLCHAIN = chosen()


def load(package: str) -> ModuleType:
    """Import one of `TOOLCHAIN`'s packages, or say how to install it."""
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as missing:
        if missing.name != package:
            raise
        raise ImportError(
            f"{package} is not installed in this Python ({TOOLCHAIN_ENV}={TOOLCHAIN.name}): "
            f"run `{TOOLCHAIN.install}`, or use that toolchain's Python"
        ) from missing


if TYPE_CHECKING:
    # Typed as CDKTF's classes: CDK Terrain's have the same names and signatures.
    from cdktf import (
        Annotations,
        App,
        AssetType,
        Fn,
        GcsBackend,
        ITerraformDependable,
        LocalBackend,
        Postcondition,
        TerraformAsset,
        TerraformDataSource,
        TerraformLocal,
        TerraformResource,
        TerraformResourceLifecycle,
        TerraformStack,
        Token,
    )

__all__ = [
    "Annotations",
    "App",
    "AssetType",
    "Fn",
    "GcsBackend",
    "ITerraformDependable",
    "LocalBackend",
    "Postcondition",
    "TerraformAsset",
    "TerraformDataSource",
    "TerraformLocal",
    "TerraformResource",
    "TerraformResourceLifecycle",
    "TerraformStack",
    "Token",
]
"""The core classes the stacks use, taken from `TOOLCHAIN.core` when first named (the other names
here are this module's own)."""


def __getattr__(name: str) -> Any:
    """A class of `__all__` from the chosen toolchain (then a global here)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(load(TOOLCHAIN.core), name)
    globals()[name] = value
    return value
