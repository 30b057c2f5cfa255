"""All-or-nothing reservation of a cluster's cores, memory, disks and addresses, and release.

Lock order, the same everywhere so concurrent reservations never deadlock: the cluster row,
the owner's user row and group quotas, the chosen nodes (by id), then disks and addresses with
SKIP LOCKED. The node locks make "free cores/memory/disks on this node" true until commit; the
partial unique constraints on allocations and addresses are the backstop.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.inventory.models import Address, Disk, Network, Node

from . import placement
from .models import Cluster, DiskAllocation, Instance
from .quotas import Demand, QuotaExceeded, check_quota
from .transitions import record_event, transition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    instance_id: int
    node_id: int
    disk_ids: tuple[int, ...]
    address_id: int


@dataclass(frozen=True)
class Reservation:
    cluster_id: int
    placements: list[Placement]


@dataclass(frozen=True)
class Rejection:
    """Why nothing was taken. cause: quota, capacity, reuse, network, state or contention."""

    cluster_id: int
    cause: str
    message: str
    quota: QuotaExceeded | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.cause}: {self.message}"


class _Raced(Exception):
    """A concurrent reservation took what the plan counted on; plan again."""


def reserve(cluster_id: int) -> Reservation | Rejection:
    """Reserve everything a queued cluster needs in one transaction, or nothing.

    On success the cluster moves to `placing`. A quota rejection fails the cluster; a capacity
    rejection leaves it `queued` (the admission queue retries it) with the reason recorded.
    """
    for _attempt in range(settings.SCHEDULER_RESERVE_ATTEMPTS):
        try:
            with transaction.atomic():
                return _reserve_once(cluster_id)
        except _Raced:
            continue
    message = "concurrent reservations kept taking the chosen capacity; will retry"
    Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED).update(reason=message)
    return Rejection(cluster_id, "contention", message)


def _reject(cluster: Cluster, cause: str, message: str, **extra) -> Rejection:
    """Record why; quota and reuse problems will not fix themselves, so those fail."""
    if cause in ("quota", "reuse", "network"):
        transition(cluster.id, Cluster.State.QUEUED, Cluster.State.FAILED, message)
    elif cluster.reason != message:
        Cluster.objects.filter(id=cluster.id).update(reason=message)
        record_event(cluster.id, f"waiting: {message}")
    return Rejection(cluster.id, cause, message, **extra)


def _reserve_once(cluster_id: int) -> Reservation | Rejection:
    cluster = Cluster.objects.select_for_update().get(id=cluster_id)
    if cluster.state != Cluster.State.QUEUED:
        return Rejection(cluster_id, "state", f"cluster is {cluster.state}, not queued")
    wants = list(cluster.instances.order_by("id"))
    if not wants:
        return _reject(cluster, "capacity", "the cluster has no instances")
    try:
        check_quota(cluster.owner_id, Demand.of(wants), exclude_cluster=cluster.id)
    except QuotaExceeded as exceeded:
        return _reject(cluster, "quota", str(exceeded), quota=exceeded)
    network = _network()
    if network is None:
        return _reject(cluster, "network", "no network is configured for cluster addresses")

    if cluster.reuse_data_of_id:
        plan = _reuse_plan(cluster, wants)
        if isinstance(plan, str):
            return _reject(cluster, "reuse", plan)
        node_of = {w.id: node_id for w, (node_id, _) in zip(wants, plan, strict=True)}
        reused = {w.id: disk_ids for w, (_, disk_ids) in zip(wants, plan, strict=True)}
    else:
        node_of = placement.assign(wants, placement.candidates(wants))
        if node_of is None:
            return _reject(cluster, "capacity", _shortage_message(wants))
        reused = {}

    _lock_and_recheck(wants, node_of, reuse=bool(reused))
    if reused:
        _lock_reused(reused)
    disks_of = reused or _pick_disks(wants, node_of)
    addresses = list(
        Address.objects.select_for_update(skip_locked=True)
        .filter(network=network, held=False)
        .order_by("id")
        .values_list("id", flat=True)[: len(wants)]
    )
    if len(addresses) < len(wants):
        free = len(addresses)
        return _reject(
            cluster, "capacity", f"needs {len(wants)} addresses on {network.name}; {free} free"
        )
    return _take(cluster, wants, node_of, disks_of, addresses)


def _network() -> Network | None:
    networks = Network.objects.order_by("id")
    if settings.SCHEDULER_NETWORK:
        networks = networks.filter(name=settings.SCHEDULER_NETWORK)
    return networks.first()


def _lock_and_recheck(wants: list[Instance], node_of: dict, reuse: bool) -> None:
    node_ids = sorted(set(node_of.values()))
    states = dict(
        Node.objects.select_for_update().filter(id__in=node_ids).order_by("id")
        .values_list("id", "state")
    )  # fmt: skip
    if any(states.get(n) != Node.State.ACTIVE for n in node_ids):
        raise _Raced  # drained meanwhile: plan again (a reuse plan then names the node)
    free = placement.free_on(node_ids, tuple(sorted({w.disk_kind for w in wants})))
    for want in wants:
        node = free[node_of[want.id]]
        if reuse:  # reused disks are counted by _reuse_plan; only cores and memory here
            node.disks[want.disk_kind] = node.disks.get(want.disk_kind, 0) + want.disks
        if not node.fits(want):
            raise _Raced
        node.take(want)


def _lock_reused(reused: dict[int, list[int]]) -> None:
    disk_ids = sorted(d for ids in reused.values() for d in ids)
    still = Disk.objects.select_for_update().filter(
        id__in=disk_ids, state=Disk.State.AVAILABLE, allocations__data_kept=True
    )
    if len(still) != len(disk_ids):
        raise _Raced  # taken or failed meanwhile: the reuse plan will name it


def _pick_disks(wants: list[Instance], node_of: dict) -> dict[int, list[int]]:
    """Concrete disks on the locked nodes; disks keeping someone's data go last."""
    kept = DiskAllocation.objects.filter(disk=OuterRef("pk"), data_kept=True)
    needs: dict[tuple[int, str], list[Instance]] = defaultdict(list)
    for want in wants:
        needs[(node_of[want.id], want.disk_kind)].append(want)
    disks_of: dict[int, list[int]] = {}
    for (node_id, kind), group in sorted(needs.items()):
        count = sum(w.disks for w in group)
        ids = list(
            Disk.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(node_id=node_id, kind=kind, state=Disk.State.AVAILABLE)
            .annotate(kept=Exists(kept))
            .order_by("kept", "id")
            .values_list("id", flat=True)[:count]
        )
        if len(ids) < count:
            raise _Raced  # e.g. an admin is marking one of them failed right now
        for want in group:
            disks_of[want.id], ids = ids[: want.disks], ids[want.disks :]
    return disks_of


def _take(cluster, wants, node_of, disks_of, addresses) -> Reservation:
    all_disks = [d for w in wants for d in disks_of[w.id]]
    Disk.objects.filter(id__in=all_disks).update(state=Disk.State.ALLOCATED)
    # Whatever those disks kept now belongs to the new holder (wiped, or reused by it).
    DiskAllocation.objects.filter(disk_id__in=all_disks, data_kept=True).update(data_kept=False)
    DiskAllocation.objects.bulk_create(
        [DiskAllocation(disk_id=d, instance_id=w.id) for w in wants for d in disks_of[w.id]]
    )
    Address.objects.filter(id__in=addresses).update(held=True)
    placements = []
    for want, address_id in zip(wants, addresses, strict=True):
        want.node_id, want.address_id = node_of[want.id], address_id
        want.active, want.state = True, Instance.State.RESERVED
        want.hostname = want.hostname or f"{cluster.name}-{want.role}-{want.index}"[:63]
        placements.append(Placement(want.id, want.node_id, tuple(disks_of[want.id]), address_id))
    Instance.objects.bulk_update(wants, ["node", "address", "active", "state", "hostname"])
    transition(cluster.id, Cluster.State.QUEUED, Cluster.State.PLACING, "")
    return Reservation(cluster.id, placements)


def _shortage_message(wants: list[Instance]) -> str:
    biggest = max(wants, key=lambda w: (w.disks, w.cores, w.memory_mb))
    kind = biggest.disk_kind
    total = sum(w.disks for w in wants if w.disk_kind == kind)
    best = placement.best_offer()
    where = f"on {len(wants)} distinct nodes" if settings.SCHEDULER_SPREAD else "in total"
    return (
        f"needs {total} free {kind.upper()} disks {where} ({biggest.disks} per instance, "
        f"with {biggest.cores} cores and {biggest.memory_mb} MB); best node has "
        f"{best.disks.get(kind, 0)} free {kind.upper()} disks, {best.cores} cores and "
        f"{best.memory_mb} MB"
    )


def _reuse_plan(cluster: Cluster, wants: list[Instance]) -> list | str:
    """[(node_id, [disk ids])] matching the previous cluster instance by instance, or a
    message naming why the data cannot be reused."""
    previous = cluster.reuse_data_of
    if previous.owner_id != cluster.owner_id:
        return f"cluster {previous.name} belongs to someone else"
    if previous.state != Cluster.State.DESTROYED:
        return f"cluster {previous.name} is {previous.state}; only destroyed clusters' data"
    old = {(i.role, i.index): i for i in previous.instances.select_related("node")}
    plan = []
    for want in wants:
        before = old.get((want.role, want.index))
        name = f"{want.role}-{want.index}"
        if before is None or before.node is None:
            return f"{previous.name} had no instance {name}"
        kept = list(
            DiskAllocation.objects.filter(instance=before, data_kept=True)
            .select_related("disk")
            .order_by("disk_id")
        )
        if not kept:
            return f"the data of {name} was wiped or its disks were given to another cluster"
        if len(kept) != want.disks:
            return f"{name} had {len(kept)} disks; asked for {want.disks}"
        if before.node.state != Node.State.ACTIVE:
            return f"node {before.node.name} holding {name}'s data is {before.node.state}"
        for allocation in kept:
            if allocation.disk.state != Disk.State.AVAILABLE:
                return f"disk {allocation.disk} holding {name}'s data is {allocation.disk.state}"
        plan.append((before.node_id, [a.disk_id for a in kept]))
    return plan


def release(cluster_id: int, keep_data: bool = True) -> int:
    """Give back everything the cluster's instances hold; kept disks remember their last
    holder for a later reuse. Returns the number of disks released. Queued clusters are
    offered the freed capacity once this commits."""
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(id=cluster_id).first()
        allocations = DiskAllocation.objects.filter(instance__cluster_id=cluster_id, active=True)
        disk_ids = list(allocations.values_list("disk_id", flat=True))
        allocations.update(active=False, released=timezone.now(), data_kept=keep_data)
        Disk.objects.filter(id__in=disk_ids, state=Disk.State.ALLOCATED).update(
            state=Disk.State.AVAILABLE
        )
        holders = Instance.objects.filter(cluster_id=cluster_id, active=True)
        address_ids = list(holders.exclude(address=None).values_list("address_id", flat=True))
        freed = holders.update(active=False, state=Instance.State.RELEASED)
        Address.objects.filter(id__in=address_ids).update(held=False)
        if freed or disk_ids:
            kept = "kept" if keep_data else "wiped"
            record_event(cluster_id, f"released {freed} instances and {len(disk_ids)} disks "
                         f"(data {kept})")  # fmt: skip
            if settings.SCHEDULER_ADMIT_ON_RELEASE:
                from .admission import admit_queued

                transaction.on_commit(admit_queued)
    return len(disk_ids)
