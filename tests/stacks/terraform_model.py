"""A synthesized stack as Terraform sees its dependencies, applied for real with `terraform_data`.

Terraform decides the order of an apply (what is created, updated, replaced and destroyed, and
what waits for what) from the configuration, the state and which changes force a replacement;
the provider only says which arguments force one. So a stack whose every resource is replaced by
a `terraform_data` at the same address, with the same `depends_on`, the same references (to the
other resource's `id`), the same `lifecycle`, and the arguments the google provider cannot update
in place moved into `triggers_replace`, gives the same plan and the same apply graph as the real
stack, without credentials or a network (`terraform_data` is built into Terraform). The tests use
it to check the order in which a migration replaces accounts and grants, on the installed
Terraform (`terraform graph -plan`, the apply graph with its destroy and deposed nodes).

Modelled, not verified against the provider: which arguments force a replacement (`REPLACE`,
from the provider's resource docs: names, locations and projects; every argument of an IAM
member) and that references are to whole resources (as Terraform records them in state).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TERRAFORM = shutil.which("terraform")
REFERENCE = re.compile(r"\$\{(google_[a-z0-9_]+|time_sleep|time_static)\.([A-Za-z0-9_-]+)(\.[^}]*)?\}")
DATA = re.compile(r"\$\{data\.[^}]*\}")
# A reference inside an expression (a local's `${element(split("/", google_x.y.attr[0].z), 0)}`).
INNER_REFERENCE = re.compile(
    r"\b(google_[a-z0-9_]+|time_sleep|time_static)\.([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_]+|\[\d+\])*)"
)
# Arguments the provider cannot change in place (ForceNew), per type; any other type: `name`.
# Every argument of an IAM member resource forces a replacement.
REPLACE: dict[str, set[str]] = {
    "google_service_account": {"account_id", "project"},
    "google_cloudfunctions2_function": {"name", "location", "project"},
    "google_cloud_scheduler_job": {"name", "region", "project"},
    "time_sleep": {"triggers", "create_duration"},
    "time_static": {"triggers", "rfc3339"},
    "google_project_service": {"service", "project"},
    "google_storage_bucket": {"name", "location", "project"},
    "google_storage_bucket_object": {"name", "bucket"},
    "google_artifact_registry_repository": {"repository_id", "location", "project", "format"},
    "google_firestore_database": {"name", "project", "location_id"},
    "google_firestore_field": {"field", "collection", "database", "project"},
}
ENV = {**os.environ, "CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"}


def modelled(kind: str, name: str) -> str:
    """The `terraform_data` address standing for resource `kind.name`."""
    return f"terraform_data.{kind}__{name}"


def _rewrite(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _rewrite(child) for key, child in value.items() if key != "//"}
    if isinstance(value, list):
        return [_rewrite(child) for child in value]
    if isinstance(value, str):
        value = DATA.sub("0", value)
        return REFERENCE.sub(lambda found: "${" + modelled(found.group(1), found.group(2)) + ".id}", value)
    return value


def model(document: Mapping[str, Any]) -> dict[str, Any]:
    """The stack's resources as `terraform_data` (Terraform JSON)."""
    resources = {}
    for kind, group in document["resource"].items():
        for name, config in group.items():
            config = {key: value for key, value in config.items() if key != "//"}
            # Data sources are not modelled (a reference to one reads as "0"), so neither is waiting for one.
            depends_on = [
                modelled(*address.split(".", 1))
                for address in config.pop("depends_on", [])
                if not address.startswith("data.")
            ]
            lifecycle = config.pop("lifecycle", None)
            forced = REPLACE.get(kind, {"name"})
            replaces = {k: v for k, v in config.items() if kind.endswith("_iam_member") or k in forced}
            updates = {k: v for k, v in config.items() if k not in replaces}
            body: dict[str, Any] = {"input": _rewrite(updates), "triggers_replace": _rewrite(replaces)}
            if depends_on:
                body["depends_on"] = depends_on
            if lifecycle:
                body["lifecycle"] = lifecycle
            resources[f"{kind}__{name}"] = body
    modelled_stack: dict[str, Any] = {"resource": {"terraform_data": resources}}
    if document.get("locals"):  # a local between two resources carries the dependency: keep it
        modelled_stack["locals"] = {
            name: INNER_REFERENCE.sub(lambda found: f"{modelled(found.group(1), found.group(2))}.id", value)
            for name, value in document["locals"].items()
        }
    return modelled_stack


@dataclass
class Plan:
    """What a plan does to each modelled resource, and the order its apply graph imposes."""

    actions: dict[str, list[str]]
    """Actions by original address (`type.name`): ["update"], ["create", "delete"], ["delete"], ..."""
    cycle: str = ""
    """Terraform's cycle error, if the apply graph has one (the apply would fail)."""
    edges: dict[str, set[str]] = field(default_factory=dict)
    """Apply graph: node -> the nodes it waits for."""

    def changed(self, action: str) -> set[str]:
        """Original addresses whose actions include `action`."""
        return {address for address, actions in self.actions.items() if action in actions}

    def waits_for(self, node: str, other: str) -> bool:
        """Whether graph node `node` happens after `other` (directly or through other nodes).
        Nodes are `terraform graph` names of modelled resources: "ADDRESS" (its create or
        update), "ADDRESS (destroy)", "ADDRESS (destroy deposed ...)"."""
        seen, pending = set(), [node]
        while pending:
            for next_node in self.edges.get(pending.pop(), ()):
                if next_node == other:
                    return True
                if next_node not in seen:
                    seen.add(next_node)
                    pending.append(next_node)
        return False

    def nodes(self, address: str, suffix: str = "") -> list[str]:
        """Graph nodes of the resource at original address `address` whose name continues with
        `suffix` ("" for its create or update node, " (destroy" for its destroys)."""
        kind, name = address.split(".", 1)
        base = modelled(kind, name)
        everything = set(self.edges) | {n for targets in self.edges.values() for n in targets}
        if not suffix:
            return [base] if base in everything else []
        return sorted(n for n in everything if n.startswith(base + suffix))


class Workspace:
    """A Terraform working directory with local state, holding one modelled stack at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._initialised = False

    def _run(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert TERRAFORM is not None
        return subprocess.run(
            [TERRAFORM, *arguments], cwd=self.folder, env=ENV, capture_output=True, text=True, check=check
        )

    def _write(self, document: Mapping[str, Any]) -> None:
        (self.folder / "main.tf.json").write_text(json.dumps(model(document), indent=1))
        if not self._initialised:
            self._run("init", "-input=false", "-no-color")
            self._initialised = True

    def apply(self, document: Mapping[str, Any]) -> None:
        """Make the state that of this stack (terraform apply)."""
        self._write(document)
        self._run("apply", "-auto-approve", "-input=false", "-no-color")

    def plan(self, document: Mapping[str, Any]) -> Plan:
        """Plan this stack against the state, and read the plan's apply graph."""
        self._write(document)
        planned = self._run("plan", "-out=plan.out", "-input=false", "-no-color", check=False)
        if planned.returncode != 0:
            if "Cycle" in planned.stderr:  # found while planning already, before the apply graph
                return Plan({}, cycle=planned.stderr)
            raise AssertionError(f"terraform plan failed:\n{planned.stderr}")
        shown = json.loads(self._run("show", "-json", "plan.out").stdout)
        actions = {}
        for change in shown.get("resource_changes", []):
            kind, _, name = change["name"].partition("__")
            if change["change"]["actions"] != ["no-op"]:
                actions[f"{kind}.{name}"] = change["change"]["actions"]
        graph = self._run("graph", "-plan=plan.out", check=False)
        if graph.returncode != 0:
            return Plan(actions, cycle=re.sub(r"\x1b\[[0-9;]*m", "", graph.stderr))
        edges: dict[str, set[str]] = defaultdict(set)
        for line in graph.stdout.splitlines():
            found = re.match(r'\s*"\[root\] ([^"]+)" -> "\[root\] ([^"]+)"', line)
            if found:
                edges[found.group(1)].add(found.group(2))
        return Plan(actions, edges=dict(edges))
