"""Reading a synthesized stack: its resources, and the references cdktf writes between them.

cdktf writes Terraform JSON (`cdk.tf.json`): references are `${type.name.attr}` strings, IAM
grants are `google_*_iam_member` / `_binding` resources with `role` and `member(s)`, explicit
dependencies are `depends_on` lists of `type.name` addresses, and nested blocks are objects or
one-element lists. The rules read resources only through this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

IAM_TYPE = re.compile(r"^google_.*_iam_(member|binding)$")
# A principal, or a service account's email, that names a `google_service_account` of the stack.
MEMBER_ACCOUNT = re.compile(r"\$\{google_service_account\.([^.}]+)\.(email|member)\}")
DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class Resource:
    """One resource of a synthesized stack."""

    type: str
    """Terraform resource type, e.g. google_project_iam_member."""
    name: str
    """Terraform resource name (cdktf's logical id)."""
    config: Mapping[str, Any]
    """The resource's arguments."""

    @property
    def address(self) -> str:
        """`type.name`, as Terraform names it."""
        return f"{self.type}.{self.name}"

    @property
    def path(self) -> str:
        """The construct path (e.g. example/report-function/runtime-ledger) when cdktf recorded it."""
        return self.config.get("//", {}).get("metadata", {}).get("path", self.address)

    @property
    def is_iam(self) -> bool:
        """An IAM grant resource (member or binding) of any kind."""
        return bool(IAM_TYPE.match(self.type))

    @property
    def role(self) -> Any:
        """The role an IAM grant grants (None for anything else)."""
        return self.config.get("role")

    @property
    def members(self) -> list[str]:
        """The principals an IAM member or binding grants to."""
        members = self.config.get("members", [])
        return [self.config["member"]] if "member" in self.config else list(members)

    @property
    def member_accounts(self) -> set[str]:
        """The names of the stack's service accounts an IAM grant is to."""
        return {found.group(1) for member in self.members if (found := MEMBER_ACCOUNT.search(member))}

    @property
    def depends_on(self) -> list[str]:
        """The addresses in the resource's `depends_on`."""
        return list(self.config.get("depends_on", []))


@dataclass(frozen=True)
class Stack:
    """A synthesized stack document, with the lookups the rules that look across resources need."""

    document: Mapping[str, Any]
    """The whole `cdk.tf.json`, parsed."""

    def resources(self) -> Iterator[Resource]:
        """Every resource of the stack, in document order."""
        for kind, named in self.document.get("resource", {}).items():
            for name, config in named.items():
                yield Resource(kind, name, config)

    def configs(self, kind: str) -> Mapping[str, Mapping[str, Any]]:
        """The config of every resource of one type, by name."""
        found = self.document.get("resource", {}).get(kind, {})
        return found if isinstance(found, Mapping) else {}

    def of_type(self, *kinds: str) -> list[Resource]:
        """Every resource of these types."""
        return [Resource(kind, name, config) for kind in kinds for name, config in self.configs(kind).items()]

    def grants(self) -> list[Resource]:
        """Every `*_iam_member` resource of the stack."""
        return [
            Resource(kind, name, config)
            for kind, group in self.document.get("resource", {}).items()
            if kind.endswith("_iam_member")
            for name, config in group.items()
        ]

    def config_at(self, address: str) -> Mapping[str, Any]:
        """The config of the resource at `type.name` (empty if there is none)."""
        kind, _, name = address.partition(".")
        found = self.configs(kind).get(name, {})
        return found if isinstance(found, Mapping) else {}

    def depends_on_closure(self, resource: Resource) -> set[str]:
        """Every address a resource depends on through `depends_on`, directly or transitively."""
        seen: set[str] = set()
        pending = resource.depends_on
        while pending:
            address = pending.pop()
            if address not in seen:
                seen.add(address)
                pending.extend(self.config_at(address).get("depends_on", []))
        return seen

    def sleeps_after(self, resource: Resource, grants: set[str], seconds: int = 0) -> set[str]:
        """The `time_sleep`s in the resource's own `depends_on` that depend on one of `grants` and
        wait at least `seconds`."""
        return {
            address
            for address in resource.depends_on
            if address.startswith("time_sleep.")
            and grants & set(self.config_at(address).get("depends_on", []))
            and duration_seconds(self.config_at(address).get("create_duration")) >= seconds
        }

    @property
    def provider_project(self) -> str:
        """The google provider's project: what a resource without its own uses."""
        providers = self.document.get("provider", {}).get("google", [{}])
        return str((providers[0] if isinstance(providers, list) and providers else {}).get("project", ""))


def values_at(value: Any, path: tuple[str, ...]) -> Iterator[Any]:
    """Every value at `path` inside a resource config (through objects and lists of blocks)."""
    if isinstance(value, list):
        for item in value:
            yield from values_at(item, path)
    elif not path:
        yield value
    elif isinstance(value, Mapping) and path[0] in value:
        yield from values_at(value[path[0]], path[1:])


def first_at(config: Mapping[str, Any], path: tuple[str, ...], default: Any = "") -> Any:
    """The first value at `path` inside a resource config, or `default`."""
    return next(iter(values_at(config, path)), default)


def walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every (argument name, value) pair inside a nested resource config."""
    if isinstance(value, Mapping):
        for child_key, child in value.items():
            if child_key != "//":
                yield from walk(child, child_key)
    elif isinstance(value, list):
        for child in value:
            yield from walk(child, key)
    else:
        yield key, value


def block(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A nested block written as an object or a one-element list ({} when absent)."""
    found = config.get(name)
    found = found[0] if isinstance(found, list) and found else found
    return found if isinstance(found, Mapping) else {}


def account_named(value: Any) -> str:
    """The name of the `google_service_account` a reference names ("" for a literal or nothing)."""
    found = MEMBER_ACCOUNT.search(str(value))
    return found.group(1) if found else ""


def duration_seconds(duration: Any) -> int:
    """A time_sleep duration ("120s", "2m", "1m30s") in seconds (0 if unreadable)."""
    found = DURATION.match(str(duration))
    if not found or not str(duration):
        return 0
    hours, minutes, secs = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + secs
