"""Quota checks. Usage is derived from active allocations (and live clusters) every time."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Q, Sum

from apps.accounts.models import LIMIT_FIELDS, Quota

from .models import LIVE_STATES, Cluster, DiskAllocation, Instance

DISK_KINDS = ("hdd", "ssd", "nvme")


class QuotaExceeded(PermissionError):
    """A request would take a user (or their group) over a limit: worth an HTTP 403."""

    def __init__(self, limit: str, asked: int, used: int, maximum: int, scope: str) -> None:
        self.limit, self.asked, self.used, self.maximum, self.scope = (
            limit, asked, used, maximum, scope,
        )  # fmt: skip
        super().__init__(
            f"quota {limit} of {scope} is {maximum}: asked {asked}, already using {used}"
        )


@dataclass(frozen=True)
class Demand:
    """What one cluster asks for, in the units the limits use."""

    instances: int
    cores: int
    memory_mb: int
    disks_by_kind: dict[str, int]

    @classmethod
    def of(cls, instances: Iterable) -> "Demand":
        items = list(instances)
        by_kind: dict[str, int] = {}
        for item in items:
            by_kind[item.disk_kind] = by_kind.get(item.disk_kind, 0) + item.disks
        return cls(
            instances=len(items),
            cores=sum(i.cores for i in items),
            memory_mb=sum(i.memory_mb for i in items),
            disks_by_kind=by_kind,
        )

    def as_limits(self, clusters: int = 1) -> dict[str, int]:
        asked = {
            "max_clusters": clusters,
            "max_instances": self.instances,
            "max_cores": self.cores,
            "max_memory_mb": self.memory_mb,
            "max_disks": sum(self.disks_by_kind.values()),
        }
        for kind in DISK_KINDS:
            asked[f"max_disks_{kind}"] = self.disks_by_kind.get(kind, 0)
        return asked


def usage(owners: Q, exclude_cluster: int | None = None) -> dict[str, int]:
    """Current usage of the clusters matching `owners` (a Q on Cluster.owner), per limit."""
    clusters = Cluster.objects.filter(owners, state__in=LIVE_STATES)
    if exclude_cluster is not None:
        clusters = clusters.exclude(id=exclude_cluster)
    held = Instance.objects.filter(active=True, cluster__in=clusters).aggregate(
        n=Count("id"), cores=Sum("cores"), memory=Sum("memory_mb")
    )
    disks = dict(
        DiskAllocation.objects.filter(active=True, instance__cluster__in=clusters)
        .values_list("disk__kind")
        .annotate(n=Count("id"))
    )
    used = {
        "max_clusters": clusters.count(),
        "max_instances": held["n"],
        "max_cores": held["cores"] or 0,
        "max_memory_mb": held["memory"] or 0,
        "max_disks": sum(disks.values()),
    }
    for kind in DISK_KINDS:
        used[f"max_disks_{kind}"] = disks.get(kind, 0)
    return used


def user_usage(user_id: int, exclude_cluster: int | None = None) -> dict[str, int]:
    return usage(Q(owner_id=user_id), exclude_cluster)


def group_usage(group_id: int, exclude_cluster: int | None = None) -> dict[str, int]:
    return usage(Q(owner__groups__id=group_id), exclude_cluster)


def default_limits() -> dict[str, int | None]:
    configured = settings.SCHEDULER_DEFAULT_QUOTA
    return {name: configured.get(name) for name in LIMIT_FIELDS}


def lock_quotas(user_id: int) -> list[tuple[str, dict, object]]:
    """Lock what serialises quota checks (the user row, then the user's group quotas, in id
    order so concurrent reservations never deadlock) and return the applicable limits as
    (scope, limits, usage function) triples."""
    user = get_user_model().objects.select_for_update().get(id=user_id)
    own = Quota.objects.filter(user_id=user_id).first()
    applicable: list[tuple[str, dict, object]] = [
        (
            f"user {user.get_username()}",
            own.limits() if own else default_limits(),
            lambda exclude: user_usage(user_id, exclude),
        )
    ]
    groups = Quota.objects.select_for_update().filter(group__user=user_id).order_by("id")
    for quota in groups.select_related("group"):
        applicable.append(
            (
                f"group {quota.group.name}",
                quota.limits(),
                lambda exclude, gid=quota.group_id: group_usage(gid, exclude),
            )
        )
    return applicable


def check_quota(user_id: int, demand: Demand, exclude_cluster: int | None = None) -> None:
    """Raise QuotaExceeded naming the first limit the demand would break. Call inside the
    transaction that takes the resources so the locks keep the check true until commit."""
    asked = demand.as_limits()
    for scope, limits, used_by in lock_quotas(user_id):
        used = None
        for name in LIMIT_FIELDS:
            maximum = limits.get(name)
            if maximum is None or asked[name] == 0:
                continue
            used = used if used is not None else used_by(exclude_cluster)
            if used[name] + asked[name] > maximum:
                raise QuotaExceeded(name, asked[name], used[name], maximum, scope)
