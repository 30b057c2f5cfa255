"""All-or-nothing reservation of a cluster's cores, memory, disks and addresses, and release.

Lock order, the same everywhere so concurrent reservations never deadlock: the cluster row,
the owner's user row and quotas (by id), then the chosen nodes (by id). Addresses and disks
are taken with SKIP LOCKED, which never waits. The node locks make "free cores/memory/disks on
this node" true until commit; the partial unique constraints on allocations and addresses are
the backstop. The hot path is a handful of statements (see bench/reservation): writes go out
as set-based SQL rather than one ORM call per row.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
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


class _Rejected(Exception):
    """Nothing can be reserved; raised to roll back what was already taken."""

    def __init__(self, cause: str, message: str, quota: QuotaExceeded | None = None) -> None:
        super().__init__(message)
        self.cause, self.message, self.quota = cause, message, quota


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
        except _Rejected as rejected:  # rolled back: whatever was taken is given back
            return _reject(cluster_id, rejected)
    message = "concurrent reservations kept taking the chosen capacity; will retry"
    Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED).update(reason=message)
    return Rejection(cluster_id, "contention", message)


def _reject(cluster_id: int, rejected: _Rejected) -> Rejection:
    """Record why, if the cluster is still queued; quota, reuse and network problems will not
    fix themselves, so those fail it."""
    cause, message = rejected.cause, rejected.message
    with transaction.atomic():
        if cause in ("quota", "reuse", "network"):
            transition(cluster_id, Cluster.State.QUEUED, Cluster.State.FAILED, message)
        elif (
            Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED)
            .exclude(reason=message)
            .update(reason=message)
        ):
            record_event(cluster_id, f"waiting: {message}")
    return Rejection(cluster_id, cause, message, quota=rejected.quota)


def _reserve_once(cluster_id: int) -> Reservation | Rejection:
    cluster = Cluster.objects.select_for_update().get(id=cluster_id)
    if cluster.state != Cluster.State.QUEUED:
        return Rejection(cluster_id, "state", f"cluster is {cluster.state}, not queued")
    wants = list(cluster.instances.order_by("id"))
    if not wants:
        raise _Rejected("capacity", "the cluster has no instances")
    try:
        check_quota(cluster.owner_id, Demand.of(wants), exclude_cluster=cluster.id)
    except QuotaExceeded as exceeded:
        raise _Rejected("quota", str(exceeded), exceeded) from None
    addresses = _take_addresses(len(wants))

    if cluster.reuse_data_of_id:
        plan = _reuse_plan(cluster, wants)
        if isinstance(plan, str):
            raise _Rejected("reuse", plan)
        node_of = {w.id: node_id for w, (node_id, _) in zip(wants, plan, strict=True)}
        reused = {w.id: disk_ids for w, (_, disk_ids) in zip(wants, plan, strict=True)}
    else:
        node_of = placement.assign(wants, placement.candidates(wants, avoid=cluster.avoid_nodes))
        if node_of is None:
            raise _Rejected("capacity", _shortage_message(wants))
        reused = {}

    _lock_and_recheck(wants, node_of, reuse=bool(reused))
    if reused:
        _lock_reused(reused)
        disks_of = _allocate_reused(reused)
    else:
        disks_of = _pick_disks(wants, node_of)
    return _take(cluster, wants, node_of, disks_of, addresses)


# Free addresses of the scheduler's network (SCHEDULER_NETWORK by name, else the first one),
# marked held in the same statement. The network is looked up inside the statement, so a
# renamed or new network needs no cache invalidation.
TAKE_ADDRESSES_SQL = """
UPDATE inventory_address SET held = true
WHERE id IN (
    SELECT a.id FROM inventory_address a
    WHERE NOT a.held AND a.network_id = (
        SELECT id FROM inventory_network WHERE %(name)s = '' OR name = %(name)s
        ORDER BY id LIMIT 1
    )
    ORDER BY a.id LIMIT %(count)s FOR UPDATE SKIP LOCKED
)
RETURNING id
"""


def _take_addresses(count: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(TAKE_ADDRESSES_SQL, {"name": settings.SCHEDULER_NETWORK, "count": count})
        addresses = sorted(row[0] for row in cursor.fetchall())
    if len(addresses) < count:
        network = _network()
        if network is None:
            raise _Rejected("network", "no network is configured for cluster addresses")
        free = len(addresses)
        raise _Rejected("capacity", f"needs {count} addresses on {network.name}; {free} free")
    return addresses


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


# Marks disks allocated and hands over whatever data they kept (wiped, or reused by the new
# holder); {source} is a CTE named `chosen` with the disk ids.
ALLOCATE_DISKS_SQL = """
WITH {source},
taken AS (
    UPDATE inventory_disk d SET state = 'allocated' FROM chosen WHERE d.id = chosen.id
    RETURNING d.id, d.node_id, d.kind
),
handed_over AS (
    UPDATE clusters_diskallocation SET data_kept = false
    WHERE data_kept AND disk_id IN (SELECT id FROM taken)
)
SELECT id, node_id, kind FROM taken ORDER BY id
"""
# Per (node, kind), the first `need` available disks, those keeping someone's data last; rows
# another transaction has locked are skipped (it is taking or failing them).
PICK_DISKS_SQL = """
chosen AS (
    SELECT d.id FROM unnest(%s::bigint[], %s::text[], %s::int[]) AS w(node_id, kind, need)
    CROSS JOIN LATERAL (
        SELECT d.id FROM inventory_disk d
        WHERE d.node_id = w.node_id AND d.kind = w.kind AND d.state = 'available'
        ORDER BY EXISTS (
            SELECT 1 FROM clusters_diskallocation a WHERE a.disk_id = d.id AND a.data_kept
        ), d.id
        LIMIT w.need FOR UPDATE OF d SKIP LOCKED
    ) d
)"""


def _pick_disks(wants: list[Instance], node_of: dict) -> dict[int, list[int]]:
    """Concrete disks on the locked nodes, taken in one statement."""
    needs: dict[tuple[int, str], list[Instance]] = defaultdict(list)
    for want in wants:
        needs[(node_of[want.id], want.disk_kind)].append(want)
    keys = sorted(needs)
    counts = [sum(w.disks for w in needs[key]) for key in keys]
    with connection.cursor() as cursor:
        cursor.execute(
            ALLOCATE_DISKS_SQL.format(source=PICK_DISKS_SQL),
            [[k[0] for k in keys], [k[1] for k in keys], counts],
        )
        rows = cursor.fetchall()
    got: dict[tuple[int, str], list[int]] = defaultdict(list)
    for disk_id, node_id, kind in rows:
        got[(node_id, kind)].append(disk_id)
    disks_of: dict[int, list[int]] = {}
    for key, count in zip(keys, counts, strict=True):
        ids = got[key]
        if len(ids) < count:
            raise _Raced  # e.g. an admin is marking one of them failed right now
        for want in needs[key]:
            disks_of[want.id], ids = ids[: want.disks], ids[want.disks :]
    return disks_of


def _allocate_reused(reused: dict[int, list[int]]) -> dict[int, list[int]]:
    disk_ids = [d for ids in reused.values() for d in ids]
    source = "chosen AS (SELECT unnest(%s::bigint[]) AS id)"
    with connection.cursor() as cursor:
        cursor.execute(ALLOCATE_DISKS_SQL.format(source=source), [disk_ids])
    return reused


# Instances take their node and address; their disk allocations are recorded (the partial
# unique constraints fail this statement loudly if anything is already held).
PLACE_INSTANCES_SQL = """
WITH placed AS (
    UPDATE clusters_instance i
    SET node_id = p.node_id, address_id = p.address_id, hostname = p.hostname,
        active = true, state = %s
    FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[])
        AS p(id, node_id, address_id, hostname)
    WHERE i.id = p.id
    RETURNING i.id
)
INSERT INTO clusters_diskallocation (disk_id, instance_id, active, data_kept, created)
SELECT a.disk_id, a.instance_id, true, false, now()
FROM unnest(%s::bigint[], %s::bigint[]) AS a(disk_id, instance_id)
"""


def _take(cluster, wants, node_of, disks_of, addresses) -> Reservation:
    placements = []
    hostnames = []
    for want, address_id in zip(wants, addresses, strict=True):
        hostnames.append(want.hostname or f"{cluster.name}-{want.role}-{want.index}"[:63])
        disks = tuple(disks_of[want.id])
        placements.append(Placement(want.id, node_of[want.id], disks, address_id))
    with connection.cursor() as cursor:
        cursor.execute(
            PLACE_INSTANCES_SQL,
            [
                Instance.State.RESERVED.value,
                [p.instance_id for p in placements],
                [p.node_id for p in placements],
                addresses,
                hostnames,
                [d for p in placements for d in p.disk_ids],
                [p.instance_id for p in placements for _ in p.disk_ids],
            ],
        )
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
