"""Containers not confirmed removed, and what stays held for them (models.Leftover).

A node whose API does not answer may still run our containers on the data network: handing
their addresses to the next cluster (perhaps another tenant's) would put two containers on one
address, and their disks to another would let the leftover write into someone else's data. So
when a release (reservation.release) covers instances whose containers could not be removed,
their address, disks and the cluster's segment stay held on a Leftover row; the reconciler
(workers/reconciler.py) or a later destroy releases them once the node shows the container
gone, exactly once (a compare-and-swap on `released`).
"""

from collections.abc import Collection
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from apps.inventory.models import Address, Disk, Network

from . import wakeup
from .models import DiskAllocation, Instance, Leftover
from .transitions import record_event


@dataclass
class Kept:
    """What a release leaves held for leftovers."""

    addresses: set[int] = field(default_factory=set)
    disks: set[int] = field(default_factory=set)
    segments: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.addresses or self.disks)


def hold(cluster_id: int, instance_ids: Collection[int]) -> Kept:
    """Record a Leftover for each of the cluster's active instances in `instance_ids` (their
    containers may still be there); returns everything that must stay held: theirs and that of
    the cluster's earlier leftovers. Runs inside the release's transaction."""
    from . import container_specs

    holders = Instance.objects.filter(cluster_id=cluster_id, active=True, id__in=instance_ids)
    for instance in holders.exclude(node=None).select_related("address__network"):
        if instance.node_id is None:  # (excluded above; for the type checker)
            continue
        disks = DiskAllocation.objects.filter(instance=instance, active=True)
        network = instance.address.network if instance.address else None
        Leftover.objects.create(
            cluster_id=cluster_id,
            instance=instance,
            node_id=instance.node_id,
            container=container_specs.container_name(cluster_id, instance.role, instance.index),
            address=instance.address,
            disk_ids=sorted(disks.values_list("disk_id", flat=True)),
            segment=network if network is not None and network.isolated else None,
        )
    return held_for(cluster_id)


def held_for(cluster_id: int) -> Kept:
    kept = Kept()
    for address, disks, segment in Leftover.objects.filter(
        cluster_id=cluster_id, released=None
    ).values_list("address_id", "disk_ids", "segment_id"):
        if address is not None:
            kept.addresses.add(address)
        kept.disks.update(disks)
        if segment is not None:
            kept.segments.add(segment)
    return kept


def describe(kept: Kept) -> str:
    return (
        f"{len(kept.addresses)} addresses and {len(kept.disks)} disks stay held until "
        "their containers are seen gone"
    )


def release(leftover: Leftover, why: str) -> bool:
    """The leftover's container is gone: give back its address, its disks and (when no other
    leftover or instance of the cluster needs it) the segment. False, and nothing done, when
    another pass released it first."""
    with transaction.atomic():
        if not Leftover.objects.filter(id=leftover.id, released=None).update(
            released=timezone.now()
        ):
            return False
        cluster_id = leftover.cluster_id
        in_use = Instance.objects.filter(active=True).exclude(address=None)
        if leftover.address_id is not None:
            Address.objects.filter(id=leftover.address_id).exclude(
                id__in=in_use.values("address_id")
            ).update(held=False)
        Disk.objects.filter(id__in=leftover.disk_ids, state=Disk.State.ALLOCATED).exclude(
            allocations__active=True
        ).update(state=Disk.State.AVAILABLE)
        if leftover.segment_id is not None and not _segment_needed(cluster_id, leftover):
            Network.objects.filter(id=leftover.segment_id, holder_id=cluster_id).update(holder=None)
        record_event(
            cluster_id,
            f"{leftover.container} {why}: released its address and {len(leftover.disk_ids)} disks",
        )
        wakeup.wake_queue("release")
    return True


def _segment_needed(cluster_id: int, leftover: Leftover) -> bool:
    """Whether the cluster still needs the segment: an active instance addressed on it, or
    another leftover held on it."""
    segment = leftover.segment_id
    if segment is None:
        return False
    others = Leftover.objects.filter(cluster_id=cluster_id, released=None).exclude(id=leftover.id)
    mine = Instance.objects.filter(cluster_id=cluster_id, active=True)
    return (
        others.filter(segment_id=segment).exists()
        or mine.filter(address__network_id=segment).exists()
    )
