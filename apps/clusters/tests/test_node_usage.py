"""One definition of a node's usage: placement's SQL, the capacity page and the queryset
annotations (metrics, API, admin) agree with a plain recomputation on random inventories."""

import random
from collections import Counter
from dataclasses import dataclass

import pytest

from apps.clusters import placement
from apps.clusters.capacity import node_capacity
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.node_usage import active_sum, free_disks
from apps.clusters.quotas import DISK_KINDS
from apps.inventory.models import Disk, Node

from .factories import make_version

pytestmark = pytest.mark.django_db


@dataclass
class Free:
    cores: int
    memory_mb: int
    disks: dict[str, int]


def build_inventory(rng: random.Random, owner) -> None:
    """Nodes in any state with disks of every kind in any state, and clusters whose active and
    inactive instances hold cores, memory and disk allocations (some keeping data)."""
    version = make_version()
    nodes = [
        Node.objects.create(
            name=f"node-{n}",
            endpoint="unix:///var/run/docker.sock",
            cores=rng.randint(1, 64),
            memory_mb=rng.randint(1, 256) * 1024,
            state=rng.choice(Node.State.values),
        )
        for n in range(rng.randint(1, 6))
    ]
    disks = [
        Disk.objects.create(
            node=node,
            mount_path=f"/data/{d}",
            kind=rng.choice(["hdd", "hdd", "ssd", "nvme"]),
            state=rng.choice(Disk.State.values),
            capacity_bytes=10**12,
        )
        for node in nodes
        for d in range(rng.randint(0, 8))
    ]
    rng.shuffle(disks)
    for c in range(rng.randint(0, 4)):
        cluster = Cluster.objects.create(
            owner=owner, version=version, name=f"c{c}", state=rng.choice(Cluster.State.values)
        )
        for index in range(rng.randint(1, 4)):
            node = rng.choice([*nodes, None])
            instance = Instance.objects.create(
                cluster=cluster,
                role="worker",
                index=index,
                cores=rng.randint(1, 16),
                memory_mb=rng.randint(1, 64) * 1024,
                disks=0,
                node=node,
                active=node is not None and rng.random() < 0.7,
            )
            mine = [d for d in disks if node is not None and d.node_id == node.id]
            for disk in mine[: rng.randint(0, 3)]:
                disks.remove(disk)  # one allocation a disk: the constraints allow no more
                held = instance.active and disk.state != Disk.State.AVAILABLE
                kept = not held and disk.state != Disk.State.ALLOCATED and rng.random() < 0.5
                DiskAllocation.objects.create(
                    disk=disk, instance=instance, active=held, data_kept=kept
                )


def recomputed() -> dict[int, Free]:
    """Node usage from the rows, in Python: active instances hold cores and memory, disks in
    state available are free."""
    free = {
        n.id: Free(n.cores, n.memory_mb, dict.fromkeys(DISK_KINDS, 0)) for n in Node.objects.all()
    }
    for instance in Instance.objects.filter(active=True):
        assert instance.node_id is not None  # an active instance is on a node (a constraint)
        free[instance.node_id].cores -= instance.cores
        free[instance.node_id].memory_mb -= instance.memory_mb
    for disk in Disk.objects.filter(state=Disk.State.AVAILABLE):
        free[disk.node_id].disks[disk.kind] += 1
    return free


def by_placement() -> dict[int, Free]:
    found = placement.free_on(list(Node.objects.values_list("id", flat=True)))
    return {n: Free(f.cores, f.memory_mb, f.disks) for n, f in found.items()}


def by_capacity_page() -> dict[int, Free]:
    return {c.node.id: Free(c.cores_free, c.memory_free_mb, c.free_disks) for c in node_capacity()}


def by_annotations() -> dict[int, Free]:
    nodes = Node.objects.annotate(
        used_cores=active_sum("cores"),
        used_memory=active_sum("memory_mb"),
        **{f"free_{kind}": free_disks(kind) for kind in DISK_KINDS},
    )
    return {
        n.id: Free(
            n.cores - n.used_cores,
            n.memory_mb - n.used_memory,
            {kind: getattr(n, f"free_{kind}") for kind in DISK_KINDS},
        )
        for n in nodes
    }


@pytest.mark.parametrize("seed", range(12))
def test_placement_and_the_capacity_page_agree_on_random_inventories(alice, seed):
    build_inventory(random.Random(seed), alice)  # noqa: S311  (reproducible inventories)
    expected = recomputed()
    assert by_placement() == expected
    assert by_capacity_page() == expected
    assert by_annotations() == expected


@pytest.mark.parametrize("seed", range(4))
def test_the_capacity_pages_free_disk_cells_are_the_disks_placement_counts(alice, seed):
    build_inventory(random.Random(seed), alice)  # noqa: S311  (reproducible inventories)
    for node in node_capacity():
        cells = Counter(cell.status for cell in node.disks)
        assert cells["free"] + cells["kept"] == node.disks_free
