"""Hadoop on the real lab, launched as a user does: HDFS and MapReduce run on the workers' own
disks and a crashed daemon comes back; the cluster grows 2 -> 3 and shrinks back by HDFS
decommission (hadoop-admin), a file written before read back intact and fsck healthy."""

import time

import pytest

from apps import nodes
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.resize import ResizeRefused
from apps.nodes import engine
from workers.tests.lab_products import (
    data_dirs,
    destroy_and_check,
    instance,
    launch_default,
    launched,
    mapped_archives,
    resized,
    run,
)

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def test_hadoop_runs_hdfs_and_mapreduce_and_survives_a_crashed_daemon(
    dispatching, lab_cleanup, alice
):
    cluster = launch_default(alice, "hadoop", "hadoop-smoke")
    master = instance(cluster, "master")
    assert mapped_archives(master) == {"namenode.jsa", "resourcemanager.jsa"}
    assert mapped_archives(instance(cluster, "worker")) == {"datanode.jsa", "nodemanager.jsa"}
    # A client command maps its archive too: -Xshare:on fails the JVM when it cannot.
    run(master, "env", "HADOOP_OPTS=-Xshare:on", "hdfs", "dfs", "-ls", "/")
    output = run(master, "/opt/platter/bin/hadoop-smoke", timeout=600)
    assert "identical" in output and "counts match" in output
    worker = instance(cluster, "worker")
    assert list(data_dirs(worker)[0].glob("hdfs/data/current/BP-*")), "HDFS blocks on /data/1"

    # A crashed NodeManager ends its container; its node's Docker starts it again with the
    # same disks, and YARN counts every NodeManager again.
    api = engine.cached(worker.node).api
    # "[n]" so that the pattern does not match the command line of the exec's own shell.
    code, _ = nodes.client(worker.node).exec(
        worker.container_id, ["pkill", "-9", "-f", "[n]odemanager.NodeManager"], 30
    )
    assert code == 0
    deadline = time.monotonic() + 60
    while api.inspect_container(worker.container_id)["RestartCount"] < 1:
        assert time.monotonic() < deadline, "the crashed container was not restarted"
        time.sleep(0.5)
    run(master, "/opt/platter/bin/hadoop-health", "--timeout", "240", "yarn", timeout=300)
    assert Cluster.objects.get(id=cluster.id).state == S.RUNNING
    destroy_and_check(cluster)


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
