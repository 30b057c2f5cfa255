"""Small builders for scheduler tests: inventories and clusters as plain rows."""

import itertools

from apps.catalog.models import Product, ProductVersion
from apps.clusters.models import Cluster, Instance
from apps.clusters.services import InstanceWant, create_cluster
from apps.inventory.models import Disk, Network, Node

_names = itertools.count(1)


def make_node(cores: int = 12, memory_mb: int = 65536, disks=None, state="active") -> Node:
    """disks: {"hdd": 4, "ssd": 2}; defaults to 12 HDDs."""
    return make_nodes(1, cores, memory_mb, disks, state)[0]


def make_nodes(
    count: int, cores: int = 12, memory_mb: int = 65536, disks=None, state="active"
) -> list[Node]:
    """`count` nodes as make_node makes them, in two statements instead of two a node."""
    nodes = Node.objects.bulk_create(
        Node(
            name=f"n{next(_names)}",
            endpoint="unix:///var/run/docker.sock",
            cores=cores,
            memory_mb=memory_mb,
            state=state,
        )
        for _ in range(count)
    )
    rows: list[Disk] = []
    for node in nodes:
        n = 0
        for kind, how_many in (disks if disks is not None else {"hdd": 12}).items():
            for _ in range(how_many):
                rows.append(
                    Disk(node=node, mount_path=f"/data/{kind}{n}", kind=kind, capacity_bytes=10**12)
                )
                n += 1
    Disk.objects.bulk_create(rows)
    return nodes


def make_roomy_node() -> Node:
    """A node in maintenance that any catalog default fits on: a launch the pool could never
    take is refused, so tests that only queue clusters need a pool that could run them, and
    a node in maintenance counts for that while taking no placement."""
    return make_node(
        cores=64,
        memory_mb=512 * 1024,
        disks={"hdd": 24, "ssd": 12, "nvme": 4},
        state="maintenance",
    )


def make_network(size: int = 200) -> Network:
    return Network.objects.create(
        name=f"net{next(_names)}",
        subnet="10.9.0.0/16",
        gateway="10.9.0.1",
        first_address="10.9.0.2",
        last_address=f"10.9.{(size + 1) // 256}.{(size + 1) % 256}",
    )


def make_version() -> ProductVersion:
    product, _ = Product.objects.get_or_create(name="demo", defaults={"title": "Demo"})
    version, _ = ProductVersion.objects.get_or_create(
        product=product, version="1", defaults={"image": "platter/lab-base:1"}
    )
    return version


def wants(count: int, cores=2, memory_mb=4096, disks=2, kind="hdd", role="worker") -> list:
    return [InstanceWant(role, i, cores, memory_mb, disks, kind) for i in range(count)]


def make_cluster(owner, instances: list, name: str | None = None, **kwargs) -> Cluster:
    return create_cluster(owner, make_version(), name or f"c{next(_names)}", instances, **kwargs)


def held_disks(cluster: Cluster) -> list[int]:
    return sorted(
        a.disk_id
        for i in Instance.objects.filter(cluster=cluster)
        for a in i.allocations.filter(active=True)
    )


def destroy_now(cluster_id: int, keep_data: bool = True) -> None:
    """Destroy as a worker would when the cluster has no containers (fake nodes)."""
    from apps.clusters.services import finish_destroy, request_destroy

    if request_destroy(cluster_id, keep_data=keep_data) == Cluster.State.DESTROYING:
        finish_destroy(cluster_id)  # reads the wipe the request recorded
