"""The real products on the real lab, launched as a user does (the launch service, a real
worker, the catalog's default shape within the demo user's quota): each reaches running only
once its own health check passed, runs a small real job, and gives everything back when
destroyed. The images are those `lab up` built from deploy/images/."""

import shlex
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from apps import nodes
from apps.accounts.models import Quota
from apps.catalog.images import missing_images
from apps.catalog.models import ProductVersion
from apps.clusters import container_specs, credentials, services
from apps.clusters.connection import connection_details
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Address, Node
from apps.lab.management.commands.seed_demo import DEMO_QUOTA
from apps.nodes import engine

pytestmark = pytest.mark.django_db(transaction=True)
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
    assert version is not None, f"no {product} version in the catalog"
    assert missing_images(version) == [], "lab up builds every product image"
    for node in Node.objects.filter(name__startswith="lab-"):
        assert version.image in node.images, f"lab up did not build {version.image} on {node}"
    cluster = services.launch(user, version, name, {})
    return wait_for(cluster.id, S.RUNNING, seconds=READY_SECONDS)


def run(instance: Instance, *argv: str, timeout: float = 300) -> str:
    assert instance.node is not None, "placed on a node"
    code, output = nodes.client(instance.node).exec(instance.container_id, list(argv), timeout)
    assert code == 0, output[-2000:]
    return output


def destroy_and_check(cluster: Cluster) -> None:
    services.request_destroy(cluster.id, keep_data=False)
    wait_for(cluster.id, S.DESTROYED, seconds=120)
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()
    addresses = cluster.instances.values_list("address_id", flat=True)
    assert not Address.objects.filter(held=True, id__in=list(addresses)).exists()
    for node in {i.node for i in cluster.instances.select_related("node")}:
        assert node is not None, "placed on a node"
        left = engine.cached(node).containers.list(
            all=True, filters={"label": f"platter.cluster={cluster.id}"}
        )
        assert left == []


def instance(cluster: Cluster, role: str, index: int = 0) -> Instance:
    return cluster.instances.select_related("node").get(role=role, index=index, active=True)


def data_dirs(instance: Instance) -> list[Path]:
    """The instance's /data/N folders, as seen from the node (this machine, in the lab)."""
    folder = container_specs.data_folder(instance.cluster)
    return [
        Path(a.disk.mount_path) / folder
        for a in instance.allocations.filter(active=True).select_related("disk")
    ]


def assert_no_secret_shown(cluster: Cluster) -> None:
    """Neither the cluster's events nor its containers' logs quote its password or secret."""
    made = credentials.credentials_of(cluster)
    assert made is not None, "a launch makes the cluster's credentials"
    secrets = (made.password, made.secret)
    for message in cluster.events.values_list("message", flat=True):
        assert not any(s in message for s in secrets), f"an event quotes a secret: {message!r}"
    for member in cluster.instances.filter(active=True).select_related("node"):
        assert member.node is not None, "placed on a node"
        log = engine.cached(member.node).api.logs(member.container_id).decode(errors="replace")
        assert not any(s in log for s in secrets), f"{member.hostname}'s log quotes a secret"


def shown_string(cluster: Cluster, start: str) -> list[str]:
    """The argv of the connection string the cluster page shows its owner, starting so."""
    strings = connection_details(cluster, cluster.owner).strings
    return shlex.split(next(s.value for s in strings if s.value.startswith(start)))


def attempt(member: Instance, *argv: str, timeout: float = 120) -> tuple[int, str]:
    assert member.node is not None, "placed on a node"
    return nodes.client(member.node).exec(member.container_id, list(argv), timeout)


def mapped_archives(member: Instance) -> set[str]:
    """The class-data-sharing archives of the image (not the JDK's own) that the instance's
    JVMs have mapped: the fast start's archives, dumped when the image was built."""
    output = run(
        member,
        "sh",
        "-c",
        "cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/opt/[^ ]*/cds/[^ ]*[.]jsa' | sort -u"
        " || true",
    )
    return {Path(line).name for line in output.split()}


def test_spark_runs_a_shuffle_on_the_workers_disks(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "spark", "spark-smoke")
    master = instance(cluster, "master")
    assert mapped_archives(master) == {"master.jsa"}
    assert mapped_archives(instance(cluster, "worker")) == {"worker.jsa"}
    assert master.disks == 0  # a 0-disk role reserves, places and runs
    steps = list(cluster.events.values_list("message", flat=True))
    assert any("Every worker registered" in s for s in steps), steps

    output = run(master, "/opt/platter/bin/spark-smoke")
    assert "spark-smoke: ok" in output
    for worker in cluster.instances.filter(role="worker").select_related("node"):
        local = list(data_dirs(worker)[0].glob("spark-local/spark-*"))
        assert local, f"no Spark local dir on {worker.hostname}'s dedicated disk"

    # The spark-submit line the page shows works on its own (no spark-defaults.conf in
    # SPARK_CONF_DIR=/tmp) ...
    job = ["/opt/platter/lib/spark_smoke_job.py", "2000"]
    submit = shown_string(cluster, "spark-submit")
    assert submit[-1] == "app.py"
    output = run(
        master,
        "env",
        "SPARK_CONF_DIR=/tmp",
        submit[0],
        "--driver-memory",
        "512m",
        "--conf",
        "spark.ui.enabled=false",
        *submit[1:-1],
        *job,
    )
    assert "reduceByKey: 2000 rows -> " in output and "WRONG" not in output, output[-2000:]
    # ... and a client without the secret is refused by the master.
    code, output = attempt(
        master,
        "env",
        "SPARK_CONF_DIR=/tmp",
        "timeout",
        "40",
        "spark-submit",
        "--master",
        f"spark://{master.hostname}:7077",
        "--driver-memory",
        "512m",
        "--conf",
        "spark.ui.enabled=false",
        *job,
    )
    assert code != 0 and "SASL" in output, output[-2000:]
    assert_no_secret_shown(cluster)
    destroy_and_check(cluster)


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


def test_cassandra_writes_at_quorum_and_reads_from_another_node(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "cassandra", "cassandra-smoke")
    seed, node = instance(cluster, "seed"), instance(cluster, "node")
    assert mapped_archives(seed) == mapped_archives(node) == {"cassandra.jsa"}
    output = run(seed, "/opt/platter/bin/cassandra-smoke", seed.hostname, node.hostname)
    assert "OK: a row written at QUORUM" in output

    # The cqlsh line the page shows logs in as the owner's superuser role; the default
    # superuser is locked out, and a session without credentials is refused on every node.
    cqlsh = shown_string(cluster, "cqlsh")
    roles = run(node, *cqlsh, "--credentials", "/dev/null", "-e", "LIST ROLES")
    owner = credentials.credentials_of(cluster).username
    assert any(
        line.split("|")[0].strip() == owner and "True" in line for line in roles.splitlines()
    ), roles
    for member in (seed, node):
        code, output = attempt(
            member,
            "cqlsh",
            "--credentials",
            "/dev/null",
            member.hostname,
            "9042",
            "-e",
            "DESCRIBE KEYSPACES",
        )
        assert code != 0 and "requires authentication" in output, output
    code, output = attempt(
        seed,
        "cqlsh",
        "--credentials",
        "/dev/null",
        "-u",
        "cassandra",
        "-p",
        "cassandra",
        seed.hostname,
        "9042",
        "-e",
        "LIST ROLES",
    )
    assert code != 0 and "AuthenticationFailed" in output, output
    assert_no_secret_shown(cluster)
    destroy_and_check(cluster)


def test_mongodb_compatible_server_inserts_and_finds(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "mongodb", "mongo-smoke")
    member = instance(cluster, "member")
    output = run(member, "/opt/platter/bin/mongo-smoke", member.hostname)
    assert "OK: insert, find and aggregate" in output
    assert list(data_dirs(member)[0].glob("ferretdb/*.sqlite")), "data on the member's disk"

    # The mongodb:// URL the page shows logs in; without a login only ping answers.
    (url,) = shown_string(cluster, "mongodb://")
    check = (
        "import sys; from pymongo import MongoClient; c = MongoClient(sys.argv[1], "
        "serverSelectionTimeoutMS=5000); print(sorted(c.list_database_names()))"
    )
    assert "admin" in run(member, "python3", "-c", check, url)
    anonymous = url.split("@", 1)[1]
    code, output = attempt(member, "python3", "-c", check, f"mongodb://{anonymous}")
    assert code != 0 and "requires authentication" in output, output
    assert_no_secret_shown(cluster)
    destroy_and_check(cluster)
