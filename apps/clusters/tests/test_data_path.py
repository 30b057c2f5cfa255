"""A cluster's data path: the whole disks each instance holds, with their kind and measured
speed, and the product settings they decide (from the catalog's data_settings)."""

import pytest

from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.catalog.services import load_catalog
from apps.clusters.data_path import data_path
from apps.clusters.models import Cluster
from apps.clusters.reservation import Reservation, release, reserve
from apps.clusters.services import create_cluster
from apps.inventory.models import Disk

from .factories import make_network, make_node

pytestmark = pytest.mark.django_db


def test_a_placed_hadoop_cluster_shows_each_instances_disks_and_hdfs_settings(alice):
    load_catalog()
    make_network()
    for _ in range(3):
        make_node(cores=8, memory_mb=16384, disks={"hdd": 3})
    Disk.objects.update(seq_read_mbps=180.0, seq_write_mbps=170.0)
    hadoop = ProductVersion.objects.get(product__name="hadoop")
    options = {"size": 2, "disks": 2, "replication": 2}
    spec = resolve(hadoop, options)
    cluster = create_cluster(alice, hadoop, "hdfs", spec.instances, spec.options)
    assert data_path(cluster) == []  # nothing held before placement

    assert isinstance(reserve(cluster.id), Reservation)
    paths = {p.hostname: p for p in data_path(cluster)}
    assert sorted(paths) == ["master-0", "worker-0", "worker-1"]
    worker = paths["worker-0"]
    assert [d.path for d in worker.disks] == ["/data/1", "/data/2"]
    held = Disk.objects.filter(
        allocations__instance__hostname="worker-0",
        allocations__instance__cluster=cluster,
        allocations__active=True,
    )
    assert {(d.node, d.mount) for d in worker.disks} == {(x.node.name, x.mount_path) for x in held}
    assert {(d.kind, d.seq_read_mbps, d.seq_write_mbps) for d in worker.disks} == {
        ("hdd", 180.0, 170.0)
    }
    assert worker.settings["dfs.datanode.data.dir"] == "hdfs/data on each of /data/1 /data/2"
    assert worker.settings["dfs.replication"].startswith("2 ")
    assert paths["master-0"].settings == {"dfs.namenode.name.dir": "/data/1/hdfs/name"}


def test_every_catalog_roles_data_settings_fill_in(alice):
    """No placeholder of any version's data_settings is left unfilled."""
    load_catalog()
    make_network()
    for _ in range(4):
        make_node(cores=16, memory_mb=65536, disks={"hdd": 12, "ssd": 4})
    filled = 0
    for version in ProductVersion.objects.all():
        spec = resolve(version, {})
        cluster = create_cluster(alice, version, f"c{version.id}", spec.instances, spec.options)
        assert isinstance(reserve(cluster.id), Reservation), version
        for path in data_path(cluster):
            for name, value in path.settings.items():
                assert value and "{{" not in value, f"{version} {name}: {value}"
                filled += 1
        release(cluster.id)  # and gone, to stay within alice's default quota of clusters
        Cluster.objects.filter(id=cluster.id).update(state=Cluster.State.DESTROYED)
    assert filled >= ProductVersion.objects.count()
