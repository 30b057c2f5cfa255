"""The real products on the real lab, launched as a user does (the launch service, a real
worker, the catalog's default shape within the demo user's quota): each reaches running only
once its own health check passed, runs a small real job, and gives everything back when
destroyed. The images are those `lab up` built from deploy/images/."""

import time
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.accounts.models import Quota
from apps.catalog.images import missing_images
from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Address, Node
from apps.lab.management.commands.seed_demo import DEMO_QUOTA
from workers import containers, drivers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.lab]
S = Cluster.State
READY_SECONDS = 300  # launch to running on 2 shared cores, health checks included


def launch_default(user, product: str, name: str) -> Cluster:
    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=user, defaults=DEMO_QUOTA)  # the demo user's limits
    version = (
        ProductVersion.objects.filter(product__name=product)
        .exclude(image__in=["mongo:7.0"])
        .order_by("-id")
        .first()
    )
    assert missing_images(version) == [], "lab up builds every product image"
    for node in Node.objects.filter(name__startswith="lab-"):
        assert version.image in node.images, f"lab up did not build {version.image} on {node}"
    cluster = services.launch(user, version, name, {})
    return wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)


def run(instance: Instance, *argv: str, timeout: float = 300) -> str:
    code, output = drivers.run_in_container(
        instance.node, instance.container_id, list(argv), timeout
    )
    assert code == 0, output[-2000:]
    return output


def destroy_and_check(cluster: Cluster) -> None:
    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, S.DESTROYED, seconds=120)
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()
    addresses = cluster.instances.values_list("address_id", flat=True)
    assert not Address.objects.filter(held=True, id__in=list(addresses)).exists()
    for node in {i.node for i in cluster.instances.select_related("node")}:
        left = drivers.client_for(node).containers.list(
            all=True, filters={"label": f"platter.cluster={cluster.id}"}
        )
        assert left == []


def instance(cluster: Cluster, role: str, index: int = 0) -> Instance:
    return cluster.instances.select_related("node").get(role=role, index=index, active=True)


def data_dirs(instance: Instance) -> list[Path]:
    """The instance's /data/N folders, as seen from the node (this machine, in the lab)."""
    folder = containers.data_folder(instance.cluster)
    return [
        Path(a.disk.mount_path) / folder
        for a in instance.allocations.filter(active=True).select_related("disk")
    ]


def test_spark_runs_a_shuffle_on_the_workers_disks(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "spark", "spark-smoke")
    master = instance(cluster, "master")
    assert master.disks == 0  # a 0-disk role reserves, places and runs
    steps = list(cluster.events.values_list("message", flat=True))
    assert any("Every worker registered" in s for s in steps), steps

    output = run(master, "/opt/platter/bin/spark-smoke")
    assert "spark-smoke: ok" in output
    for worker in cluster.instances.filter(role="worker").select_related("node"):
        local = list(data_dirs(worker)[0].glob("spark-local/spark-*"))
        assert local, f"no Spark local dir on {worker.hostname}'s dedicated disk"
    destroy_and_check(cluster)


def test_hadoop_runs_hdfs_and_mapreduce_and_survives_a_crashed_daemon(
    dispatching, lab_cleanup, alice
):
    cluster = launch_default(alice, "hadoop", "hadoop-smoke")
    master = instance(cluster, "master")
    output = run(master, "/opt/platter/bin/hadoop-smoke", timeout=600)
    assert "identical" in output and "counts match" in output
    worker = instance(cluster, "worker")
    assert list(data_dirs(worker)[0].glob("hdfs/data/current/BP-*")), "HDFS blocks on /data/1"

    # A crashed NodeManager ends its container; its node's Docker starts it again with the
    # same disks, and YARN counts every NodeManager again.
    api = drivers.client_for(worker.node).api
    # "[n]" so that the pattern does not match the command line of the exec's own shell.
    code, _ = drivers.run_in_container(
        worker.node, worker.container_id, ["pkill", "-9", "-f", "[n]odemanager.NodeManager"], 30
    )
    assert code == 0
    deadline = time.monotonic() + 60
    while api.inspect_container(worker.container_id)["RestartCount"] < 1:
        assert time.monotonic() < deadline, "the crashed container was not restarted"
        time.sleep(0.5)
    run(master, "/opt/platter/bin/hadoop-health", "--timeout", "240", "yarn", timeout=300)
    assert Cluster.objects.get(id=cluster.id).state == S.RUNNING
    destroy_and_check(cluster)


def test_cassandra_writes_at_quorum_and_reads_from_another_node(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "cassandra", "cassandra-smoke")
    seed, node = instance(cluster, "seed"), instance(cluster, "node")
    output = run(seed, "/opt/platter/bin/cassandra-smoke", seed.hostname, node.hostname)
    assert "OK: a row written at QUORUM" in output
    destroy_and_check(cluster)


def test_mongodb_compatible_server_inserts_and_finds(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "mongodb", "mongo-smoke")
    member = instance(cluster, "member")
    output = run(member, "/opt/platter/bin/mongo-smoke", member.hostname)
    assert "OK: insert, find and aggregate" in output
    assert list(data_dirs(member)[0].glob("ferretdb/*.sqlite")), "data on the member's disk"
    destroy_and_check(cluster)
