"""What each node has and what is taken, disk by disk: the capacity page's numbers."""

from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, Subquery, Sum
from django.db.models.functions import Coalesce

from apps.clusters.models import DiskAllocation, Instance

from .models import Disk, Node


def active_sum(field: str) -> Coalesce:
    """An annotation for a Node queryset: the sum of `field` (cores, memory_mb) over the
    node's active instances, 0 when none."""
    used = (
        Instance.objects.filter(node=OuterRef("pk"), active=True)
        .values("node")
        .annotate(total=Sum(field))
        .values("total")
    )
    return Coalesce(Subquery(used, output_field=IntegerField()), 0)


def free_disks(kind: str) -> Count:
    """An annotation for a Node queryset: how many of the node's disks of `kind` are free to
    reserve (available, including those keeping a destroyed cluster's data)."""
    return Count("disks", filter=Q(disks__kind=kind, disks__state=Disk.State.AVAILABLE))


@dataclass(frozen=True)
class DiskCell:
    disk: Disk
    # free, allocated, kept (free but holding a destroyed cluster's data), failed, retired
    status: str
    holder: str  # "alice / spark-1 / worker-0" when allocated


@dataclass(frozen=True)
class NodeCapacity:
    node: Node
    cores_used: int
    memory_used_mb: int
    disks: list[DiskCell]

    @property
    def disks_free(self) -> int:
        return sum(1 for cell in self.disks if cell.status in ("free", "kept"))


def node_capacity() -> list[NodeCapacity]:
    """Every node with the cores and memory its active instances hold and a cell per disk."""
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
    active = Instance.objects.filter(active=True).only("node_id", "cores", "memory_mb")
    nodes = Node.objects.prefetch_related(
        Prefetch("disks", queryset=disks), Prefetch("instances", queryset=active, to_attr="held")
    )
    return [
        NodeCapacity(
            node=node,
            cores_used=sum(i.cores for i in node.held),
            memory_used_mb=sum(i.memory_mb for i in node.held),
            disks=[_cell(disk) for disk in node.disks.all()],
        )
        for node in nodes
    ]


def _cell(disk: Disk) -> DiskCell:
    current = disk.current  # type: ignore[attr-defined]  # prefetched (to_attr) above
    held = next((a for a in current if a.active), None)
    if disk.state in (Disk.State.FAILED, Disk.State.RETIRED):
        return DiskCell(disk, disk.state, "")
    if held is not None:
        cluster = held.instance.cluster
        return DiskCell(disk, "allocated", f"{cluster.owner} / {cluster.name} / {held.instance}")
    kept = next((a for a in current if a.data_kept), None)
    if kept is not None:
        return DiskCell(disk, "kept", f"data of {kept.instance.cluster.name} (destroyed)")
    return DiskCell(disk, "free", "")
