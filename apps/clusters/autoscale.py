"""Autoscaling policies: what a policy may say, and the arithmetic of each decision.

A policy has Dataproc's fields: minimum and maximum workers, a cooldown (at least
AUTOSCALE_MIN_COOLDOWN_SECONDS), scale-up and scale-down factors (0-1), a minimum change and a
graceful-decommission timeout. The signal is pending work, not CPU: each version's plugin reads
it from the product (``load_command`` and ``load_of``: YARN's pending memory for Hadoop, the
cores Spark's applications wait for). Every cooldown the samples taken since the last decision
are averaged, and the exact change is (pending - available) / what one worker adds. A positive
change is scaled by the scale-up factor and rounded up; a negative one by the scale-down factor
and rounded toward zero (only whole idle workers leave). A change smaller than the minimum
change is none. The target then stays within the policy's bounds and the product's (its size
option's, and the plugin's refusal: HDFS replication, a keyspace's RF). The decision goes
through the resize path (quota, budget, capacity, pre-flight, decommission); one that cannot be
carried out says why and waits for the next cooldown. workers/autoscale.py samples and decides."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from django.conf import settings

from apps.products.base import Load

from .models import Cluster, GroupScaling, ScalingPolicy
from .resize import ResizeRefused, refusal, scaling_of

# The fields a user sets, their kind and their default (None: required).
FIELDS: dict[str, tuple[type, Any]] = {
    "min_workers": (int, None),
    "max_workers": (int, None),
    "cooldown_seconds": (int, 120),
    "scale_up_factor": (float, 1.0),
    "scale_down_factor": (float, 1.0),
    "min_change": (int, 1),
    "decommission_timeout_seconds": (int, 600),
}


class PolicyRefused(ValueError):
    """A policy that cannot be set; `field` names the field it is about (HTTP 400)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Decision:
    current: int
    target: int
    words: str  # "pending 6 cores, available 0 cores over 2 min; +2 workers"

    @property
    def change(self) -> int:
        return self.target - self.current


def checked_fields(cluster: Cluster, given: dict[str, Any]) -> dict[str, Any]:
    """A policy's fields from `given` (defaults filled in), or PolicyRefused naming the first
    field that is wrong: a product without a pending-work signal or a size, bounds outside the
    size option's, a cooldown under the site's minimum, a factor outside 0-1."""
    from apps.products.registry import plugin_for

    plugin = plugin_for(cluster.definition)
    if getattr(plugin, "load_command", None) is None:
        raise PolicyRefused(
            f"{cluster.version} reports no pending work Platter can read: it cannot autoscale"
        )
    try:
        scaling = scaling_of(cluster)
    except ResizeRefused as refused:
        raise PolicyRefused(str(refused)) from None
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise PolicyRefused(f"unknown field {unknown[0]}", unknown[0])
    fields: dict[str, Any] = {}
    for name, (kind, default) in FIELDS.items():
        value = given.get(name, default)
        if value is None:
            raise PolicyRefused(f"{name} is required", name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PolicyRefused(f"{name} must be a number; got {value!r}", name)
        if kind is int and value != int(value):
            raise PolicyRefused(f"{name} must be a whole number; got {value!r}", name)
        fields[name] = kind(value)
    low, high = fields["min_workers"], fields["max_workers"]
    if low < scaling.low or high > scaling.high:
        raise PolicyRefused(
            f"{scaling.role}s of {cluster.version} may number {scaling.low} to {scaling.high}; "
            f"asked {low} to {high}",
            "min_workers" if low < scaling.low else "max_workers",
        )
    if low > high:
        raise PolicyRefused(f"min_workers ({low}) is more than max_workers ({high})", "min_workers")
    limits = GroupScaling.objects.filter(group__user=cluster.owner_id, max_workers__isnull=False)
    for limit in limits.select_related("group").order_by("max_workers")[:1]:
        if high > limit.max_workers:
            raise PolicyRefused(
                f"group {limit.group} lets its members' policies reach at most "
                f"{limit.max_workers} workers; asked {high}",
                "max_workers",
            )
    least = settings.AUTOSCALE_MIN_COOLDOWN_SECONDS
    if fields["cooldown_seconds"] < least:
        raise PolicyRefused(
            f"the cooldown must be at least {least} s; asked {fields['cooldown_seconds']}",
            "cooldown_seconds",
        )
    for name in ("scale_up_factor", "scale_down_factor"):
        if not 0 <= fields[name] <= 1:
            raise PolicyRefused(f"{name} must be between 0 and 1; got {fields[name]}", name)
    if fields["min_change"] < 1:
        raise PolicyRefused("min_change must be at least 1", "min_change")
    return fields


def floor(cluster: Cluster, current: int) -> int:
    """The fewest workers the product lets a shrink from `current` leave (its size option's
    minimum, HDFS replication, ...): what the plugin refuses is never decided."""
    scaling = scaling_of(cluster)
    for target in range(scaling.low, current):
        if refusal(cluster, scaling.role, current, target) is None:
            return target
    return current


def _amount(value: float, unit: str) -> str:
    if unit == "MB" and abs(value) >= 1024:
        return f"{value / 1024:.1f} GB"
    return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"


def decide(policy: ScalingPolicy, samples: list[Load], current: int, least: int = 0) -> Decision:
    """The size for a cluster of `current` workers after one cooldown's `samples`; `least` is
    the product's own floor (floor())."""
    if not samples:
        return Decision(current, current, "no reading of the product's pending work; no change")
    pending = fmean(s.pending for s in samples)
    available = fmean(s.available for s in samples)
    per_worker, unit = samples[-1].per_worker, samples[-1].unit
    said = (
        f"pending {_amount(pending, unit)}, available {_amount(available, unit)} over "
        f"{policy.cooldown_seconds / 60:g} min"
    )
    exact = (pending - available) / per_worker if per_worker > 0 else 0.0
    if exact > 0:
        change = math.ceil(exact * policy.scale_up_factor - 1e-9)
    else:
        change = math.trunc(exact * policy.scale_down_factor)
    if abs(change) < policy.min_change:
        change = 0
    low = max(policy.min_workers, least)
    # Out of bounds (a policy set on a bigger or smaller cluster): back within them.
    target = min(max(current + change, low), policy.max_workers)
    if change < 0:
        target = min(target, current)  # a shrink never grows past what it is
    if change > 0:
        target = max(target, current)
    if target == current:
        why = ""
        if change > 0:
            why = f" (at its maximum, {policy.max_workers})"
        elif change < 0:
            why = f" (at its minimum, {low})"
        return Decision(current, current, f"{said}; no change{why}")
    return Decision(current, target, f"{said}; {target - current:+d} workers")


def set_policy(cluster_id: int, given: dict[str, Any], *, actor: Any = None) -> ScalingPolicy:
    """Give a cluster a policy, or new fields for the one it has (its cooldown starts again);
    PolicyRefused naming the field that is wrong."""
    from django.db import transaction

    from apps.audit.services import Action, record

    with transaction.atomic():
        cluster = (
            Cluster.objects.select_for_update(of=("self",))
            .select_related("version__product", "revision", "owner")
            .get(id=cluster_id)
        )
        if cluster.state in (Cluster.State.DESTROYING, Cluster.State.DESTROYED):
            raise PolicyRefused(f"cluster {cluster.name} is {cluster.state}")
        fields = checked_fields(cluster, given)
        policy, _ = ScalingPolicy.objects.update_or_create(
            cluster=cluster, defaults={**fields, "decided_at": None, "decision": ""}
        )
        cluster.load_samples.all().delete()
        record(Action.CLUSTER_AUTOSCALING, actor, cluster, object_repr=cluster.name, **fields)
    return policy


def remove_policy(cluster_id: int, *, actor: Any = None) -> bool:
    """Take a cluster's policy away (its size stays as it is); whether it had one."""
    from django.db import transaction

    from apps.audit.services import Action, record

    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        removed, _ = ScalingPolicy.objects.filter(cluster=cluster).delete()
        cluster.load_samples.all().delete()
        if removed:
            record(Action.CLUSTER_AUTOSCALING, actor, cluster, object_repr=cluster.name, off=True)
    return bool(removed)


def policy_of(cluster: Cluster) -> ScalingPolicy | None:
    """The cluster's policy (read with it when the query selected it), or None."""
    try:
        return cluster.scaling_policy
    except ScalingPolicy.DoesNotExist:
        return None


def apply_group_default(cluster: Cluster) -> ScalingPolicy | None:
    """A new cluster's policy from its owner's groups' default (the first group with one, by
    id), when its product reports pending work and the default fits its size's bounds;
    None otherwise. Call in the transaction that creates the cluster."""
    default = (
        GroupScaling.objects.filter(
            group__user=cluster.owner_id,
            default_min_workers__isnull=False,
            default_max_workers__isnull=False,
        )
        .order_by("id")
        .first()
    )
    if default is None:
        return None
    given = {
        "min_workers": default.default_min_workers,
        "max_workers": default.default_max_workers,
        "cooldown_seconds": default.default_cooldown_seconds,
        "scale_down_factor": default.default_scale_down_factor,
    }
    try:
        fields = checked_fields(cluster, given)
    except PolicyRefused:
        return None  # a product without a signal, or bounds its size option does not allow
    return ScalingPolicy.objects.create(cluster=cluster, **fields)
