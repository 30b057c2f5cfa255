"""Cluster life cycle: launch, destroy, leases. Reservation, quotas and the admission queue
live in their own modules; this is the entry point views and workers call."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .admission import admit_queued
from .models import LIVE_STATES, Cluster, Instance
from .quotas import Demand, QuotaExceeded, check_quota
from .reservation import Rejection, Reservation, release, reserve
from .transitions import TransitionError, record_event, transition

__all__ = [
    "InstanceWant", "LeaseError", "QuotaExceeded", "Rejection", "Reservation", "ReuseError",
    "TransitionError", "admit_queued", "create_cluster", "destroy", "expire_leases",
    "extend_lease", "launch", "release", "reserve", "transition",
]  # fmt: skip

S = Cluster.State


@dataclass(frozen=True)
class InstanceWant:
    """One instance to create; the catalog's InstanceSpec has the same fields."""

    role: str
    index: int
    cores: int
    memory_mb: int
    disks: int
    disk_kind: str = "hdd"
    image: str = ""


class LeaseError(ValueError):
    """A lease that is not allowed (too long, in the past, on a finished cluster)."""


class ReuseError(ValueError):
    """The cluster whose data should be reused cannot be."""


def _lease_end(hours: float | None, start: datetime) -> datetime | None:
    if hours is None:
        return None
    if hours <= 0:
        raise LeaseError(f"a lease must be positive; got {hours} hours")
    cap = settings.SCHEDULER_MAX_LEASE_HOURS
    if cap and hours > cap:
        raise LeaseError(f"a lease may be at most {cap} hours; asked {hours}")
    return start + timedelta(hours=hours)


@transaction.atomic
def create_cluster(
    owner,
    version,
    name: str,
    instances: list,
    options: dict | None = None,
    lease_hours: float | None = None,
    reuse_data_of: Cluster | None = None,
) -> Cluster:
    """A queued cluster with its instance rows. Raises QuotaExceeded (HTTP 403) when even
    the current usage leaves no room; the reservation checks again under locks."""
    check_quota(owner.id, Demand.of(instances))
    if reuse_data_of is not None and reuse_data_of.owner_id != owner.id:
        raise ReuseError(f"cluster {reuse_data_of.name} belongs to someone else")
    cluster = Cluster.objects.create(
        owner=owner,
        version=version,
        name=name,
        options=options or {},
        expires_at=_lease_end(lease_hours, timezone.now()),
        reuse_data_of=reuse_data_of,
    )
    Instance.objects.bulk_create(
        Instance(
            cluster=cluster, role=i.role, index=i.index, cores=i.cores, memory_mb=i.memory_mb,
            disks=i.disks, disk_kind=i.disk_kind, image=i.image,
            hostname=f"{name}-{i.role}-{i.index}"[:63],
        )
        for i in instances
    )  # fmt: skip
    record_event(cluster.id, "queued")
    return cluster


def launch(
    owner, version, name: str, options: dict, lease_hours: float | None = None,
    reuse_data_of: Cluster | None = None,
) -> Cluster:  # fmt: skip
    """Resolve the catalog options (OptionsError names bad ones) and queue the cluster."""
    from apps.catalog.options import resolve  # the catalog owns option rules

    spec = resolve(version, options)
    return create_cluster(owner, version, name, spec.instances, options, lease_hours, reuse_data_of)


def destroy(cluster_id: int, keep_data: bool = True) -> bool:
    """Destroy a cluster, keeping its disks' data for a later reuse unless asked not to.
    Containers are removed by the worker between `destroying` and `destroyed`; until the
    worker issue lands there are none, so this does both steps. False if already gone."""
    if transition(cluster_id, S.QUEUED, S.DESTROYED, "cancelled before placement"):
        return True
    live = [s for s in LIVE_STATES if s not in (S.QUEUED, S.DESTROYING)] + [S.FAILED]
    if not transition(cluster_id, live, S.DESTROYING, "data kept" if keep_data else "wipe"):
        return False
    release(cluster_id, keep_data=keep_data)
    return transition(cluster_id, S.DESTROYING, S.DESTROYED)


def expire_leases(now: datetime | None = None) -> list[int]:
    """Destroy (keeping data) every live cluster whose lease has ended; run periodically."""
    now = now or timezone.now()
    due = Cluster.objects.filter(state__in=LIVE_STATES, expires_at__lte=now).exclude(
        state=S.DESTROYING
    )
    expired = []
    for cluster_id in due.values_list("id", flat=True):
        record_event(cluster_id, "lease expired")
        if destroy(cluster_id, keep_data=True):
            expired.append(cluster_id)
    return expired


def extend_lease(cluster_id: int, hours: float) -> datetime:
    """Push the lease end `hours` further (from now if it already passed)."""
    if hours <= 0:
        raise LeaseError(f"an extension must be positive; got {hours} hours")
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        if cluster.state not in LIVE_STATES or cluster.state == S.DESTROYING:
            raise LeaseError(f"cluster {cluster.name} is {cluster.state}")
        now = timezone.now()
        start = max(cluster.expires_at or now, now)
        end = start + timedelta(hours=hours)
        cap = settings.SCHEDULER_MAX_LEASE_HOURS
        if cap and end > now + timedelta(hours=cap):
            raise LeaseError(f"a lease may end at most {cap} hours from now")
        cluster.expires_at = end
        cluster.save(update_fields=["expires_at"])
        record_event(cluster_id, f"lease extended to {end:%Y-%m-%d %H:%M} UTC")
    return end
