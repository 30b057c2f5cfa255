"""What each node has and what is taken, disk by disk: the capacity page's numbers.

The per-node figures are placement's own (placement.free_on, the node usage of node_usage),
so the page shows what a reservation would see; the disk cells only say who holds what.
"""

from dataclasses import dataclass

from django.db.models import Prefetch

from apps.inventory.models import Disk, Node

from . import placement
from .models import DiskAllocation


@dataclass(frozen=True)
class DiskCell:
    disk: Disk
    # free, allocated, kept (free but holding a destroyed cluster's data), benchmarking,
    # failed, retired
    status: str
    holder: str  # "alice / spark-1 / worker-0" when allocated


@dataclass(frozen=True)
class NodeCapacity:
    node: Node
    cores_used: int
    memory_used_mb: int
    free_disks: dict[str, int]  # by kind: the disks a placement may take
    disks: list[DiskCell]

    @property
    def cores_free(self) -> int:
        return self.node.cores - self.cores_used

    @property
    def memory_free_mb(self) -> int:
        return self.node.memory_mb - self.memory_used_mb

    @property
    def disks_free(self) -> int:
        return sum(self.free_disks.values())


def node_capacity() -> list[NodeCapacity]:
    """Every node with the cores and memory its active instances hold, its free disks by kind
    and a cell per disk."""
    allocations = DiskAllocation.objects.filter(active=True) | DiskAllocation.objects.filter(
        data_kept=True
    )
    disks = Disk.objects.order_by("mount_path").prefetch_related(
        Prefetch(
            "allocations",
            queryset=allocations.select_related("instance__cluster__owner"),
            to_attr="current",
        )
    )
    nodes = list(Node.objects.order_by("name").prefetch_related(Prefetch("disks", queryset=disks)))
    free = placement.free_on([node.id for node in nodes])
    return [
        NodeCapacity(
            node=node,
            cores_used=free[node.id].total_cores - free[node.id].cores,
            memory_used_mb=free[node.id].total_memory_mb - free[node.id].memory_mb,
            free_disks=dict(free[node.id].disks),
            disks=[_cell(disk) for disk in node.disks.all()],
        )
        for node in nodes
    ]


def _cell(disk: Disk) -> DiskCell:
    current = disk.current  # type: ignore[attr-defined]  # prefetched (to_attr) above
    held = next((a for a in current if a.active), None)
    if disk.state in (Disk.State.FAILED, Disk.State.RETIRED, Disk.State.BENCHMARKING):
        return DiskCell(disk, disk.state, "")
    if held is not None:
        cluster = held.instance.cluster
        return DiskCell(disk, "allocated", f"{cluster.owner} / {cluster.name} / {held.instance}")
    if disk.state != Disk.State.AVAILABLE:
        return DiskCell(disk, disk.state, "")  # allocated without a holder: not free either
    kept = next((a for a in current if a.data_kept), None)
    if kept is not None:
        return DiskCell(disk, "kept", f"data of {kept.instance.cluster.name} (destroyed)")
    return DiskCell(disk, "free", "")
