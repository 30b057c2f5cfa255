"""Placeholders in a version's environment, role commands and configure steps.

``{{name}}`` is replaced per instance (double braces so shell ``$VAR``/``${VAR}`` pass through):

- ``cluster``: the cluster's name; ``hostname``, ``role``, ``index``: this instance's;
  ``cores``, ``memory_mb``, ``disks``: this instance's resources;
  ``data_dirs``: its disk mount points, space separated (``/data/1 /data/2``; ``data_dirs_csv``
  comma separated);
- ``members``: every hostname of the cluster, space separated (``members_csv``: comma separated);
- ``<role>_hosts`` / ``<role>_hosts_csv``: hostnames of one role; ``<role>_host``: its first
  host (empty when the role has no instance); ``<role>_count``: how many;
- every product option by name, with its resolved value (bools as true/false).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .options import ClusterSpec, InstanceSpec
from .spec import (
    CLUSTER_NAMES,
    DEFAULT_CONFIGURE_TIMEOUT,
    INSTANCE_NAMES,
    PLACEHOLDER,
    ROLE_SUFFIXES,
    ProductDefinition,
    Role,
    definition_of,
    placeholders_in,
    user_text_problem,
)

if TYPE_CHECKING:
    from .models import ProductVersion

    # A version, or a parsed definition (e.g. one a cluster launched with).
    Source = ProductVersion | ProductDefinition

__all__ = [
    "CLUSTER_NAMES",
    "DEFAULT_CONFIGURE_TIMEOUT",
    "INSTANCE_NAMES",
    "PLACEHOLDER",
    "ROLE_SUFFIXES",
    "placeholders_in",
]

Hostnames = dict[tuple[str, int], str]  # (role, index) -> hostname


class TemplateError(ValueError):
    pass


def known_placeholders(version: Source) -> set[str]:
    return definition_of(version).known_placeholders()


def default_hostname(cluster: str, role: str, index: int) -> str:
    """A DNS label such as ``mycluster-worker-2`` (lower case, at most 63 characters)."""
    label = re.sub(r"[^a-z0-9]+", "-", f"{cluster}-{role}-{index}".lower()).strip("-")
    return label[-63:].lstrip("-")


def default_hostnames(cluster: str, spec: ClusterSpec) -> Hostnames:
    return {(i.role, i.index): default_hostname(cluster, i.role, i.index) for i in spec.instances}


def context_for(
    version: Source,
    spec: ClusterSpec,
    instance: InstanceSpec,
    cluster: str,
    hostnames: Hostnames,
) -> dict[str, str]:
    # Launches refuse such text already (options.check_value, slug names); checked again here
    # because a cluster saved before that rule, or by other means, must not reach a command.
    for name, value in [("cluster", cluster), *spec.options.items()]:
        problem = isinstance(value, str) and user_text_problem(value)
        if problem:
            raise TemplateError(f"{name} {problem}")
    members = [hostnames[(i.role, i.index)] for i in spec.instances]
    data_dirs = definition_of(version).disk_destinations(instance.role, instance.disks)
    ctx: dict[str, str] = {name: option_text(value) for name, value in spec.options.items()}
    for role in definition_of(version).roles:
        hosts = [hostnames[(i.role, i.index)] for i in spec.instances if i.role == role.name]
        ctx[f"{role.name}_hosts"] = " ".join(hosts)
        ctx[f"{role.name}_hosts_csv"] = ",".join(hosts)
        ctx[f"{role.name}_host"] = hosts[0] if hosts else ""
        ctx[f"{role.name}_count"] = str(len(hosts))
    ctx.update(
        cluster=cluster,
        hostname=hostnames[(instance.role, instance.index)],
        role=instance.role,
        index=str(instance.index),
        cores=str(instance.cores),
        memory_mb=str(instance.memory_mb),
        disks=str(instance.disks),
        data_dirs=" ".join(data_dirs),
        data_dirs_csv=",".join(data_dirs),
        members=" ".join(members),
        members_csv=",".join(members),
    )
    return ctx


def render(text: str, context: dict[str, str]) -> str:
    def replace(match: re.Match) -> str:
        try:
            return context[match.group(1)]
        except KeyError:
            raise TemplateError(f"unknown placeholder {{{{{match.group(1)}}}}}") from None

    return PLACEHOLDER.sub(replace, text)


def instance_environment(
    version: Source,
    spec: ClusterSpec,
    instance: InstanceSpec,
    cluster: str,
    hostnames: Hostnames,
) -> dict[str, str]:
    """The container environment of one instance: version-wide then role-specific values."""
    ctx = context_for(version, spec, instance, cluster, hostnames)
    merged = {**definition_of(version).environment, **_role(version, instance.role).environment}
    return {name: render(str(value), ctx) for name, value in merged.items()}


def data_settings(
    version: Source,
    spec: ClusterSpec,
    instance: InstanceSpec,
    cluster: str,
    hostnames: Hostnames,
) -> dict[str, str]:
    """The product settings an instance's disks decide (its role's `data_settings`), filled
    in for it: what the cluster page shows as its data path."""
    role = definition_of(version).role(instance.role)
    settings = role.data_settings if role else {}
    if not settings:  # also a role an admin has since renamed: nothing to show, no error
        return {}
    ctx = context_for(version, spec, instance, cluster, hostnames)
    return {name: render(str(value), ctx) for name, value in settings.items()}


def instance_command(
    version: Source,
    spec: ClusterSpec,
    instance: InstanceSpec,
    cluster: str,
    hostnames: Hostnames,
) -> list[str] | None:
    """The container command of one instance, or None to keep the image's own."""
    command = _role(version, instance.role).command
    if not command:
        return None
    ctx = context_for(version, spec, instance, cluster, hostnames)
    return [render(part, ctx) for part in command]


def configure_plan(
    version: Source, spec: ClusterSpec, cluster: str, hostnames: Hostnames
) -> list[dict[str, Any]]:
    """Post-start steps in order: [{"description", "timeout", "runs": [(instance, argv), ...]}].
    Steps run one after the other; the runs of one step may run in parallel. A step with
    ``"once": true`` runs only in the first instance of its role."""
    plan = []
    for step in definition_of(version).configure:
        targets = [i for i in spec.instances if step.role in (None, i.role)]
        if step.once:
            targets = targets[:1]
        runs = [
            (
                i,
                [
                    render(part, context_for(version, spec, i, cluster, hostnames))
                    for part in step.command
                ],
            )
            for i in targets
        ]
        plan.append(
            {
                "description": step.description,
                "timeout": step.timeout,
                "runs": runs,
            }
        )
    return plan


def _role(version: Source, name: str) -> Role:
    role = definition_of(version).role(name)
    if role is None:
        raise TemplateError(f"the product defines no role {name!r}")
    return role


def option_text(value: Any) -> str:
    """An option's value as templates write it (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
