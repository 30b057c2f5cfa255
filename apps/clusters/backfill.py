"""Backfill that never delays the head of the queue (EASY backfilling).

When the first queued cluster that waits for capacity (the head) does not fit now, its shadow
time is the earliest moment it fits if the clusters holding resources give them back when
their leases end: their releases are replayed in lease-end order on top of what is free now,
with the placement's own fit check (placement.assign). A later cluster may go now only if its
own lease ends no later than that shadow time: whatever it takes is back before the head
could start, so the head starts no later than it would in strict order. Clusters without a
lease end never go ahead of a waiting head, and when the head waits on a cluster without a
lease end its shadow time is unknown and nothing goes ahead of it.

The promise holds for the pool as it is and for leases as they are now. A cluster destroyed
before its lease ends, a node coming back or a benchmark finishing may let the head start
sooner; a backfilled cluster may then still hold what the head needs, but never past the
shadow time. An extended lease (extend_lease) may hold it longer.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count
from django.utils import timezone

from apps.inventory.models import Disk, Node

from . import placement
from .models import LIVE_STATES, Cluster, DiskAllocation, Instance


@dataclass(frozen=True)
class Shadow:
    """The head of the queue and the latest time it can start, as far as leases tell."""

    head_id: int
    head_name: str
    at: datetime | None  # None: unknown (it waits on clusters without a lease end)
    why_unknown: str = ""
    room_now: bool = False  # the nodes have room now: it waits for addresses or a race

    def when(self) -> str:
        return _moment(self.at) if self.at else "an unknown time"


def _moment(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC"


def shadow_of(head_id: int, now: datetime | None = None) -> Shadow:
    """The head's shadow time: when it fits at the latest if every cluster holding resources
    gives them back at its lease end (now, for those being destroyed)."""
    now = now or timezone.now()
    head = Cluster.objects.get(id=head_id)
    if head.reuse_data_of_id is not None:
        return Shadow(head.id, head.name, None, "it goes back to the disks of the data it reuses")
    wants = list(head.instances.all())
    nodes = _free_now()
    if placement.assign(wants, list(nodes.values())) is not None:
        return Shadow(head.id, head.name, now, room_now=True)
    releases, endless = _releases(now)
    for at, freed in sorted(releases.items()):
        for node_id, (cores, memory_mb, disks) in freed.items():
            node = nodes.get(node_id)
            if node is None:
                continue  # not active: nothing there counts for a placement
            node.cores += cores
            node.memory_mb += memory_mb
            for kind, count in disks.items():
                node.disks[kind] = node.disks.get(kind, 0) + count
        if placement.assign(wants, list(nodes.values())) is not None:
            return Shadow(head.id, head.name, at)
    if endless:
        holders = f"{endless} cluster{'s' if endless != 1 else ''} without a lease end"
        return Shadow(head.id, head.name, None, f"it waits on capacity held by {holders}")
    why = "it does not fit even when every lease has ended: it waits for nodes or disks to return"
    return Shadow(head.id, head.name, None, why)


def _free_now() -> dict[int, placement.NodeFree]:
    active = list(Node.objects.filter(state=Node.State.ACTIVE).values_list("id", flat=True))
    return placement.free_on(active)


def _releases(now: datetime) -> tuple[dict, int]:
    """{release time: {node id: [cores, memory, {kind: disks}]}} of what active instances
    hold, and how many holding clusters have no known release (no lease end, or a state the
    lease expiry does not end, such as failed)."""
    release_at: dict[int, datetime | None] = {}
    holders = Instance.objects.filter(active=True, node__isnull=False)
    for cluster_id, state, expires_at in (
        holders.order_by().values_list("cluster_id", "cluster__state", "cluster__expires_at")
    ).distinct():
        if state == Cluster.State.DESTROYING:
            release_at[cluster_id] = now
        elif state in LIVE_STATES and expires_at is not None:
            release_at[cluster_id] = max(expires_at, now)
        else:
            release_at[cluster_id] = None
    freed: dict[datetime, dict] = defaultdict(lambda: defaultdict(lambda: [0, 0, {}]))
    for cluster_id, node_id, cores, memory_mb in holders.order_by().values_list(
        "cluster_id", "node_id", "cores", "memory_mb"
    ):
        if (at := release_at[cluster_id]) is not None:
            slot = freed[at][node_id]
            slot[0] += cores
            slot[1] += memory_mb
    disks = (
        DiskAllocation.objects.filter(active=True, disk__state=Disk.State.ALLOCATED)
        .order_by()
        .values_list("instance__cluster_id", "disk__node_id", "disk__kind")
        .annotate(n=Count("id"))
    )
    for cluster_id, node_id, kind, count in disks:
        if (at := release_at.get(cluster_id)) is not None:
            kinds = freed[at][node_id][2]
            kinds[kind] = kinds.get(kind, 0) + count
    endless = sum(1 for at in release_at.values() if at is None)
    return {at: dict(by_node) for at, by_node in freed.items()}, endless


def refusal(cluster: Cluster, shadow: Shadow) -> str | None:
    """Why `cluster` may not go ahead of the waiting head; None when it may (it still has to
    fit now)."""
    head = f"{shadow.head_name}, first in the queue,"
    if shadow.room_now:
        return (
            f"waits behind {head} which the nodes have room for now (it waits for addresses "
            "or a concurrent placement): no later cluster goes ahead of it"
        )
    if shadow.at is None:
        return (
            f"waits behind {head} which cannot start before capacity frees and whose start "
            f"time is unknown ({shadow.why_unknown}): no later cluster goes ahead of it"
        )
    if cluster.expires_at is None:
        return (
            f"waits behind {head} which can start by {shadow.when()}: a cluster without a "
            "lease end could hold it back, so it goes after it"
        )
    if cluster.expires_at > shadow.at:
        return (
            f"waits behind {head} which can start by {shadow.when()}: this cluster's lease "
            f"ends at {_moment(cluster.expires_at)}, later, so it could hold it back"
        )
    return None


def head_reason(message: str, shadow: Shadow) -> str:
    """The head's own reason: why it does not fit, and when it can start at the latest."""
    if shadow.room_now:
        return f"{message}; first in the queue: the nodes have room for it, so nothing goes ahead"
    if shadow.at is None:
        return (
            f"{message}; first in the queue: its start time is unknown ({shadow.why_unknown}), "
            "so no later cluster goes ahead of it"
        )
    return (
        f"{message}; first in the queue: can start by {shadow.when()} when leases end; "
        "later clusters go ahead only if their leases end by then"
    )
