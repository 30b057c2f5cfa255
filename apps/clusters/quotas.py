"""Quota checks. Usage is derived from active allocations (and live clusters) every time."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q

from apps.accounts.models import LIMIT_FIELDS, Quota

from .models import LIVE_STATES

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


# Usage of one owner scope in one statement: live clusters, then what their active instances
# and disk allocations hold. {owners} is one of OWNER_SQL; no counter that could drift.
USAGE_SQL = """
WITH live AS (
    SELECT c.id FROM clusters_cluster c
    WHERE {owners} AND c.state = ANY(%(live)s)
      AND (%(exclude)s::bigint IS NULL OR c.id <> %(exclude)s::bigint)
)
SELECT (SELECT COUNT(*) FROM live), i.n, i.cores, i.memory, d.total, {kinds}
FROM (
    SELECT COUNT(*) AS n, COALESCE(SUM(cores), 0) AS cores, COALESCE(SUM(memory_mb), 0) AS memory
    FROM clusters_instance WHERE active AND cluster_id IN (SELECT id FROM live)
) i, (
    SELECT COUNT(*) AS total, {kind_counts}
    FROM clusters_diskallocation a
    JOIN clusters_instance h ON h.id = a.instance_id
    JOIN inventory_disk k ON k.id = a.disk_id
    WHERE a.active AND h.cluster_id IN (SELECT id FROM live)
) d
"""
OWNER_SQL = {
    "user": "c.owner_id = %(owner)s",
    "group": "c.owner_id IN (SELECT user_id FROM {groups} WHERE group_id = %(owner)s)",
}


def _usage(scope: str, owner_id: int, exclude_cluster: int | None) -> dict[str, int]:
    groups = get_user_model().groups.through._meta.db_table
    sql = USAGE_SQL.format(
        owners=OWNER_SQL[scope].format(groups=groups),
        kinds=", ".join(f"d.{kind}" for kind in DISK_KINDS),
        kind_counts=", ".join(
            f"COUNT(*) FILTER (WHERE k.kind = '{kind}') AS {kind}" for kind in DISK_KINDS
        ),
    )
    params = {"owner": owner_id, "live": LIVE_STATES, "exclude": exclude_cluster}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        clusters, instances, cores, memory, disks, *by_kind = cursor.fetchone()
    used = {
        "max_clusters": clusters,
        "max_instances": instances,
        "max_cores": cores,
        "max_memory_mb": memory,
        "max_disks": disks,
    }
    for kind, count in zip(DISK_KINDS, by_kind, strict=True):
        used[f"max_disks_{kind}"] = count
    return used


def user_usage(user_id: int, exclude_cluster: int | None = None) -> dict[str, int]:
    """Current usage of the user's live clusters, per limit."""
    return _usage("user", user_id, exclude_cluster)


def group_usage(group_id: int, exclude_cluster: int | None = None) -> dict[str, int]:
    """Current usage of the live clusters of every member of the group, per limit."""
    return _usage("group", group_id, exclude_cluster)


def default_limits() -> dict[str, int | None]:
    configured = settings.SCHEDULER_DEFAULT_QUOTA
    return {name: configured.get(name) for name in LIMIT_FIELDS}


def lock_quotas(user_id: int) -> list[tuple[str, dict, object]]:
    """Lock what serialises quota checks (the user row, then the user's group quotas, in id
    order so concurrent reservations never deadlock) and return the applicable limits as
    (scope, limits, usage function) triples."""
    user_model = get_user_model()
    username = (
        user_model.objects.select_for_update()
        .values_list(user_model.USERNAME_FIELD, flat=True)
        .get(id=user_id)
    )
    # The user's own quota and their groups' quotas in one statement, locked in id order.
    quotas = list(
        Quota.objects.select_for_update(of=("self",))
        .filter(Q(user_id=user_id) | Q(group__user=user_id))
        .select_related("group")
        .order_by("id")
    )
    own = next((q for q in quotas if q.user_id == user_id), None)
    applicable: list[tuple[str, dict, object]] = [
        (
            f"user {username}",
            own.limits() if own else default_limits(),
            lambda exclude: user_usage(user_id, exclude),
        )
    ]
    for quota in quotas:
        if quota.group_id is None:
            continue
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
