"""A cluster's data path, as its page shows it: which whole disks each instance holds (node,
device, kind, measured speed) and the product settings those disks decide (the catalog's
`data_settings` per role, e.g. HDFS data directories and replication)."""

from dataclasses import dataclass, field

from apps.catalog import templating
from apps.catalog.options import ClusterSpec, InstanceSpec, resolve
from apps.catalog.spec import definition_of

from .models import Cluster, DiskAllocation, Instance


@dataclass
class DataDisk:
    path: str  # where the instance sees it: /data/N or its definition's disk_paths
    node: str
    mount: str
    device: str
    kind: str
    seq_read_mbps: float | None
    seq_write_mbps: float | None


@dataclass
class InstanceDataPath:
    hostname: str
    role: str
    disks: list[DataDisk] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)


def cluster_spec(cluster: Cluster, instances: list[Instance]) -> tuple[ClusterSpec, dict]:
    """The catalog's view of the cluster (for templates) and its hostnames."""
    spec = ClusterSpec(
        instances=[
            InstanceSpec(i.role, i.index, i.cores, i.memory_mb, i.disks, i.disk_kind, i.image)
            for i in instances
        ],
        options=resolve(cluster.definition, cluster.options).options,
    )
    return spec, {(i.role, i.index): i.hostname for i in instances}


def _data_disk(path: str, disk) -> DataDisk:
    return DataDisk(
        path,
        disk.node.name,
        disk.mount_path,
        disk.device,
        disk.kind,
        disk.seq_read_mbps,
        disk.seq_write_mbps,
    )


def label_destinations(cluster: Cluster, instances: list[Instance], held: str) -> None:
    """Give each allocation in ``instance.<held>`` (prefetched in disk order) its
    ``destination``: where the instance sees that disk, as the cluster's definition says."""
    definition = definition_of(cluster.definition)
    for instance in instances:
        allocations = getattr(instance, held)
        where = definition.disk_destinations(instance.role, len(allocations))
        for allocation, path in zip(allocations, where, strict=True):
            allocation.destination = path


def data_path(cluster: Cluster, placed: list[Instance] | None = None) -> list[InstanceDataPath]:
    """Every active instance's disks (in /data/N order) and its disk-bound settings; empty
    before placement and after release. `placed`: the active instances in id order with their
    `active_allocations` (disk__node) in disk order, when the caller read them already (the
    API's detail query); else they are read here."""
    if placed is not None:
        instances = placed
        disks = {i.id: [a.disk for a in i.active_allocations] for i in placed}  # type: ignore[attr-defined]
    else:
        instances = list(
            cluster.instances.filter(active=True).select_related("node").order_by("id")
        )
        held = (
            DiskAllocation.objects.filter(instance__in=instances, active=True)
            .select_related("disk__node")
            .order_by("disk__mount_path", "disk_id")
        )
        disks = {i.id: [] for i in instances}
        for allocation in held:
            disks[allocation.instance_id].append(allocation.disk)
    if not instances:
        return []
    spec, hostnames = cluster_spec(cluster, instances)
    paths = []
    for instance, instance_spec in zip(instances, spec.instances, strict=True):
        held_disks = disks[instance.id]
        where = definition_of(cluster.definition).disk_destinations(instance.role, len(held_disks))
        own = [_data_disk(path, disk) for path, disk in zip(where, held_disks, strict=True)]
        settings = templating.data_settings(
            cluster.definition, spec, instance_spec, cluster.name, hostnames
        )
        paths.append(InstanceDataPath(instance.hostname, instance.role, own, settings))
    return paths
