"""Hadoop on the real lab, launched as a user does: HDFS and MapReduce run on the workers' own
disks and a crashed daemon comes back; the cluster grows 2 -> 3 and shrinks back by HDFS
decommission (hadoop-admin), then its workers get more cores (live: the same containers) and
more memory (a rolling restart, while a MapReduce job runs), a file written before read back
intact and fsck healthy."""

import json
import threading
import time

import pytest

from apps import nodes
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.resize import ResizeRefused
from apps.nodes import engine
from apps.products.registry import plugin_for
from workers.tests.lab_products import (
    data_dirs,
    destroy_and_check,
    instance,
    launch_default,
    launched,
    mapped_archives,
    reshaped,
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


@pytest.mark.timeout(1800)  # a launch (up to 5 min on the shared lab), a grow, a shrink, restarts
def test_hadoop_resizes_both_ways_keeping_its_data(dispatching, lab_cleanup, alice):
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

    # Autoscaling's reading of YARN: its memory, by the plugin, in MB per NodeManager.
    answer = json.loads(run(master, "hadoop-admin", "yarn-load").strip().splitlines()[-1])
    load = plugin_for(cluster.definition).load_of(answer)
    assert load.unit == "MB" and load.per_worker > 0 and load.available > 0, answer

    grown_cores_live(cluster)
    memory_by_rolling_restart_while_a_job_runs(cluster, master)
    fsck = run(master, "hdfs", "fsck", "/")
    assert "is HEALTHY" in fsck, fsck
    read = run(master, "sh", "-c", "hdfs dfs -cat /kept | md5sum").split()[0]
    assert read == written
    destroy_and_check(cluster)


# The container's CPU quota and period as its cgroup has them (v2, else v1).
CPU_LIMIT = (
    "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "
    "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
)


def inspect(worker) -> dict:
    assert worker.node is not None, "placed on a node"
    return engine.cached(worker.node).api.inspect_container(worker.container_id)


def started_at(worker) -> tuple[str, str]:
    found = inspect(worker)
    return found["Id"], found["State"]["StartedAt"]


def grown_cores_live(cluster: Cluster) -> None:
    """Two cores each: the containers' CPU limit (Docker's and the cgroup's) changes and
    nothing restarts."""
    workers = [instance(cluster, "worker", i) for i in (0, 1)]
    before = [started_at(w) for w in workers]
    reshaped(cluster, "worker", cores=2)
    for worker, was in zip(workers, before, strict=True):
        found = inspect(worker)
        assert found["HostConfig"]["NanoCpus"] == 2_000_000_000
        assert started_at(worker) == was, "the container restarted"
        assert run(worker, "sh", "-c", CPU_LIMIT).split() == ["200000", "100000"]


def memory_by_rolling_restart_while_a_job_runs(cluster: Cluster, master) -> None:
    """2 GB each, which Hadoop's daemons size their heaps from at start: the workers restart
    one at a time, HDFS staying healthy, and a MapReduce job running meanwhile succeeds."""
    before = {i: started_at(instance(cluster, "worker", i)) for i in (0, 1)}
    outcome: dict = {}

    def job() -> None:
        jar = "/opt/hadoop/share/hadoop/lib/hadoop-mapreduce-examples-*.jar"
        command = f"hadoop jar {jar} pi 6 200000"
        code, output = nodes.client(master.node).exec(
            master.container_id, ["sh", "-c", command], 900
        )
        outcome.update(code=code, output=output)

    running_job = threading.Thread(target=job)
    running_job.start()
    deadline = time.monotonic() + 120
    while "application_" not in run(master, "yarn", "application", "-list"):
        assert time.monotonic() < deadline, "the job never reached YARN"
        time.sleep(2)
    done = reshaped(cluster, "worker", memory_mb=2048)
    running_job.join(timeout=900)
    assert outcome.get("code") == 0, outcome.get("output", "")[-3000:]
    assert "Estimated value of Pi is" in outcome["output"]
    restarts = [e.message for e in done.events.filter(message__contains="restarted on")]
    assert len(restarts) == 2 and "2048 MB" in restarts[0], restarts
    for i in (0, 1):
        worker = instance(cluster, "worker", i)
        assert started_at(worker) != before[i], "the worker was not restarted"
        environment = inspect(worker)
        assert "PLATTER_MEMORY_MB=2048" in environment["Config"]["Env"]
        assert environment["HostConfig"]["Memory"] == 2048 * 2**20
    # Both back in service (the worker removed by the shrink is listed Decommissioned).
    report = run(master, "hdfs", "dfsadmin", "-report", "-live")
    assert report.count("Decommission Status : Normal") == 2, report
