"""Resize with the real products on the real lab, driven by a real worker: Hadoop grows 2 -> 3
(the new DataNode and NodeManager join) and shrinks back by HDFS decommission with a file
written before read back intact and fsck healthy; Spark grows and the new worker is ALIVE."""

import json

import pytest

from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.resize import ResizeRefused
from apps.clusters.tests.waiting import wait_for

from .test_products import READY_SECONDS, destroy_and_check, instance, run

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State
RESIZE_SECONDS = 600  # a grow runs the product's health checks again; a shrink decommissions


def launched(user, product: str, name: str, **options) -> Cluster:
    from django.core.management import call_command

    from apps.accounts.models import Quota
    from apps.catalog.models import ProductVersion
    from apps.lab.management.commands.seed_demo import DEMO_QUOTA

    call_command("load_catalog", verbosity=0)
    Quota.objects.update_or_create(user=user, defaults=DEMO_QUOTA)
    version = ProductVersion.objects.filter(product__name=product).order_by("-id").first()
    assert version is not None
    cluster = services.launch(user, version, name, options)
    return wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)


def resized(cluster: Cluster, workers: int) -> Cluster:
    mark = cluster.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, workers) == S.RESIZING
    done = wait_for(cluster.id, S.RUNNING, seconds=RESIZE_SECONDS)
    failed = done.events.filter(id__gt=mark, message__startswith="resize failed")
    assert not failed.exists(), [e.message for e in failed]
    assert done.instances.filter(role="worker", active=True).count() == workers
    return done


@pytest.mark.timeout(1500)  # a launch (up to 5 min on the shared lab), a grow and a shrink
def test_hadoop_grows_and_shrinks_by_decommission_keeping_its_data(dispatching, lab_cleanup, alice):
    cluster = launched(alice, "hadoop", "hadoop-resize", size=2, mem=1536)
    master = instance(cluster, "master")
    written = run(
        master,
        "sh",
        "-c",
        "head -c 5000000 /dev/urandom > /tmp/kept && hdfs dfs -put -f /tmp/kept /kept "
        "&& md5sum < /tmp/kept",
    ).split()[0]
    with pytest.raises(ResizeRefused, match="HDFS keeps 2 copies"):
        services.request_resize(cluster.id, 1)

    resized(cluster, 3)
    report = run(master, "hdfs", "dfsadmin", "-report", "-live")
    assert "Live datanodes (3)" in report, report
    nodes = run(master, "yarn", "node", "-list")
    assert "Total Nodes:3" in nodes, nodes

    shrunk = resized(cluster, 2)
    assert any("decommissioned" in e.message for e in shrunk.events.all())
    assert any("HDFS decommission" in e.message for e in shrunk.events.all())
    # The removed DataNode stays excluded: Decommissioned (until the NameNode declares it
    # dead), never back in service.
    report = run(master, "hdfs", "dfsadmin", "-report", "-live")
    assert report.count("Decommission Status : Normal") == 2, report
    assert "Decommission Status : Normal" not in report.split("(worker-2)")[-1][:200], report
    fsck = run(master, "hdfs", "fsck", "/")
    assert "is HEALTHY" in fsck, fsck
    read = run(master, "sh", "-c", "hdfs dfs -cat /kept | md5sum").split()[0]
    assert read == written
    destroy_and_check(cluster)


@pytest.mark.timeout(900)
def test_spark_grows_and_the_new_worker_is_alive(dispatching, lab_cleanup, alice):
    cluster = launched(alice, "spark", "spark-resize", size=1, mem=1024)
    resized(cluster, 2)
    master = instance(cluster, "master")
    status = run(
        master,
        "python3",
        "-c",
        "import urllib.request; "
        f"print(urllib.request.urlopen('http://{master.hostname}:8080/json/').read().decode())",
    )
    workers = json.loads(status)["workers"]
    alive = {w["host"] for w in workers if w["state"] == "ALIVE"}
    new = instance(cluster, "worker", 1)
    assert len(alive) == 2 and (new.hostname in alive or new.address.ip in alive), workers
    destroy_and_check(cluster)
