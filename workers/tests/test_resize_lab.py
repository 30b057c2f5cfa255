"""Resize with the real products on the real lab, driven by a real worker: Hadoop grows 2 -> 3
(the new DataNode and NodeManager join) and shrinks back by HDFS decommission with a file
written before read back intact and fsck healthy; Spark grows and the new worker is ALIVE;
Cassandra grows by a node that bootstraps (UJ, then UN; the older nodes clean up) and shrinks
back by nodetool decommission, every row written at RF 2 read back at QUORUM, and a shrink
below RF 2 refused."""

import json
import re

import pytest

from apps.clusters import services
from apps.clusters.models import Cluster, Instance
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


def resized(
    cluster: Cluster, workers: int, role: str = "worker", seconds: float = RESIZE_SECONDS
) -> Cluster:
    mark = cluster.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, workers) == S.RESIZING
    done = wait_for(cluster.id, S.RUNNING, seconds=seconds)
    failed = done.events.filter(id__gt=mark, message__startswith="resize failed")
    assert not failed.exists(), [e.message for e in failed]
    assert done.instances.filter(role=role, active=True).count() == workers
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


KEYSPACE = "platter_resize"
ROWS = 300


def cql(member: Instance, statements: str) -> str:
    """cqlsh in the member's container, logged in as the owner (root's credentials file)."""
    argv = ["cqlsh", "--no-color", "--request-timeout=60", member.hostname, "9042"]
    return run(member, *argv, "-e", statements, timeout=240)


def insert(member: Instance, rows: range) -> dict[int, str]:
    written = {n: f"row {n} written through {member.hostname}" for n in rows}
    values = " ".join(
        f"INSERT INTO {KEYSPACE}.t (id, v) VALUES ({n}, '{v}');"  # noqa: S608  (CQL, our constants)
        for n, v in written.items()
    )
    cql(member, f"CONSISTENCY QUORUM; {values}")
    return written


def read_at_quorum(member: Instance) -> dict[int, str]:
    select = f"SELECT JSON id, v FROM {KEYSPACE}.t;"  # noqa: S608  (CQL, our constants)
    output = cql(member, f"CONSISTENCY QUORUM; PAGING OFF; {select}")
    rows = [json.loads(line) for line in output.splitlines() if line.strip().startswith("{")]
    return {row["id"]: row["v"] for row in rows}


def ring(member: Instance) -> list[str]:
    """The states (UN, UJ, ...) of the ring's members as `nodetool status` shows them."""
    return re.findall(r"^([UD][NLJM])\s", run(member, "nodetool", "status"), re.MULTILINE)


@pytest.mark.timeout(2400)  # a launch, a grow (bootstrap, checks, cleanup), a shrink, a refusal
def test_cassandra_grows_and_shrinks_by_one_keeping_every_row(dispatching, lab_cleanup, alice):
    cluster = launched(alice, "cassandra", "cassandra-resize", size=1, mem=1536)
    seed = instance(cluster, "seed")
    cql(
        seed,
        f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
        "{'class': 'NetworkTopologyStrategy', 'dc1': 2}; "
        f"CREATE TABLE {KEYSPACE}.t (id int PRIMARY KEY, v text);",
    )
    written = insert(seed, range(ROWS))

    grown = resized(cluster, 2, role="node", seconds=900)
    new = instance(grown, "node", 1)
    assert ring(seed) == ["UN"] * 3
    messages = list(grown.events.values_list("message", flat=True))
    assert f"{new.hostname} joined the ring (UN)" in messages, messages
    assert any(m.startswith(f"nodetool cleanup on {seed.hostname}") for m in messages), messages
    # It bootstrapped: nothing was written since, yet it holds SSTables of the table (a node
    # that had not streamed would own its ranges empty).
    stats = run(new, "nodetool", "tablestats", f"{KEYSPACE}.t")
    assert int(re.search(r"SSTable count: (\d+)", stats).group(1)) > 0, stats
    assert read_at_quorum(new) == written  # its coordinator logs the owner in (system_auth)
    written |= insert(new, range(ROWS, 2 * ROWS))

    shrunk = resized(grown, 1, role="node", seconds=900)
    assert ring(seed) == ["UN"] * 2
    messages = list(shrunk.events.values_list("message", flat=True))
    assert f"{new.hostname} left the ring (decommissioned)" in messages, messages
    assert shrunk.instances.filter(role="seed", active=True).count() == 1
    for member in (seed, instance(shrunk, "node", 0)):
        assert read_at_quorum(member) == written

    # RF 2 needs two nodes: a shrink to the seed alone is refused before anything changes.
    mark = shrunk.events.order_by("-id").values_list("id", flat=True).first() or 0
    assert services.request_resize(cluster.id, 0) == S.RESIZING
    refused = wait_for(cluster.id, S.RUNNING, seconds=300)
    failed = refused.events.get(id__gt=mark, message__startswith="resize failed")
    assert f"keyspace {KEYSPACE} has replication factor 2" in failed.message, failed.message
    assert "would leave 1" in failed.message
    assert refused.instances.filter(role="node", active=True).count() == 1
    assert ring(seed) == ["UN"] * 2
    assert read_at_quorum(seed) == written
    destroy_and_check(cluster)
