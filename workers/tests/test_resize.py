"""Resize (apps/clusters/resize.py, workers/resize.py) above the node boundary: the rules a
request is refused by, naming why, and the operation's growing and shrinking over fake nodes.
The products themselves joining and leaving: workers/tests/test_resize_lab.py."""

import pytest
from django.core.management import call_command

from apps.audit.models import AuditEvent
from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services, states
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.reservation import reserve
from apps.clusters.resize import ResizeRefused
from apps.clusters.tests.factories import make_network, make_node
from apps.inventory.models import Address
from apps.nodes.fake import FakeNodes
from workers import operations

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture
def fake_nodes():
    with FakeNodes() as fake:
        yield fake


@pytest.fixture
def pool():
    make_network()
    return [make_node(disks={"hdd": 4, "ssd": 4}) for _ in range(3)]


@pytest.fixture
def catalog():
    call_command("load_catalog", verbosity=0)


def version(product: str) -> ProductVersion:
    found = ProductVersion.objects.filter(product__name=product).order_by("id").first()
    assert found is not None, f"the catalog has {product}"
    return found


def running(owner, product: str, **options) -> Cluster:
    """A cluster of the catalog's `product` launched on fake nodes, running."""
    spec = resolve(version(product), options)
    cluster = services.create_cluster(
        owner, version(product), f"c{Cluster.objects.count()}", spec.instances, options
    )
    reserve(cluster.id)
    assert operations.run("launch", cluster.id) == S.RUNNING
    cluster.refresh_from_db()
    return cluster


def workers_of(cluster: Cluster, role: str = "worker") -> list[Instance]:
    return list(cluster.instances.filter(role=role, active=True).order_by("index"))


def test_resize_is_one_operation_of_the_life_cycle_tables():
    op = states.OPERATIONS["resize"]
    assert op.requested_in == (S.RUNNING,) and op.through == (S.RESIZING,)
    assert op.ends_in == S.RUNNING
    assert operations.BY_STATE[S.RESIZING] == "resize"
    assert operations.OPERATIONS["resize"].works_in == (S.RESIZING,)
    assert S.DESTROYING in states.STATES[S.RESIZING].to  # a destroy may come meanwhile
    assert S.RESIZING in states.requested_in("destroy")


def test_a_demo_cluster_grows_on_fake_nodes_and_shrinks_back(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    assert services.request_resize(cluster.id, 3, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING
    grown = workers_of(cluster)
    assert [w.index for w in grown] == [0, 1, 2]
    assert all(w.state == Instance.State.RUNNING and w.container_id for w in grown)
    running_containers = sum(len(fake_nodes.running(n.name)) for n in pool)
    assert running_containers == 4  # the master and three workers
    # The older members were told the new names; the configure steps ran again.
    execs = [c for c in fake_nodes.calls if c[1] == "exec"]
    assert len(execs) >= 2
    audit = AuditEvent.objects.get(action="cluster.resize")
    assert audit.detail["previous"] == 1 and audit.detail["workers"] == 3

    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert [w.index for w in workers_of(cluster)] == [0, 1]
    gone = Instance.objects.get(cluster=cluster, role="worker", index=2)
    assert gone.state == Instance.State.RELEASED and not gone.active
    assert not DiskAllocation.objects.filter(instance=gone, active=True).exists()
    assert DiskAllocation.objects.filter(instance=gone, data_kept=True).exists()
    assert not Address.objects.filter(id=gone.address_id, held=True).exists()
    assert sum(len(fake_nodes.running(n.name)) for n in pool) == 3
    cluster.refresh_from_db()
    assert cluster.resize_to is None
    assert cluster.events.filter(message__contains="resized to 2 workers").exists()


def test_a_grow_with_no_room_ends_running_as_before_with_the_reason(
    fake_nodes, pool, alice, catalog
):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_resize(cluster.id, 2, actor=alice)
    # Someone else took every free disk meanwhile.
    from apps.inventory.models import Disk

    Disk.objects.filter(state=Disk.State.AVAILABLE).update(state=Disk.State.FAILED)
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert len(workers_of(cluster)) == 1
    assert not cluster.instances.filter(state=Instance.State.PENDING).exists()
    assert cluster.events.filter(message__startswith="resize failed: needs").exists()


def test_a_resize_left_mid_way_is_resumed(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=1, mem=64)
    services.request_resize(cluster.id, 2, actor=alice)
    Cluster.objects.filter(id=cluster.id).update(resizing_at="2000-01-01T00:00Z")
    assert operations.resume_stalled() == [cluster.id]


@pytest.mark.parametrize(
    ("workers", "problem"),
    [
        (0, "role worker allows 1 to 8 instances; asked 0"),
        (9, "role worker allows 1 to 8 instances; asked 9"),
        (2, "already has 2 workers"),
        ("3", "workers must be a whole number"),
    ],
)
def test_a_size_out_of_bounds_is_refused_naming_why(
    fake_nodes, pool, alice, catalog, workers, problem
):
    cluster = running(alice, "demo", size=2, mem=64)
    with pytest.raises(ResizeRefused, match=problem):
        services.request_resize(cluster.id, workers, actor=alice)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert not AuditEvent.objects.filter(action="cluster.resize").exists()


def test_only_a_running_cluster_is_resized(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "demo", size=2, mem=64)
    services.request_stop(cluster.id, actor=alice)
    with pytest.raises(services.StateConflict, match="only a running cluster can be resized"):
        services.request_resize(cluster.id, 3, actor=alice)


def test_a_grow_past_the_quota_is_refused_naming_the_limit(
    fake_nodes, pool, alice, catalog, settings
):
    cluster = running(alice, "demo", size=1, mem=64)
    settings.SCHEDULER_DEFAULT_QUOTA = {"max_instances": 3, "max_clusters": 1}
    with pytest.raises(QuotaExceeded, match="instances"):
        services.request_resize(cluster.id, 3, actor=alice)
    # One more fits, though the owner is at their cluster limit: a resize is no new cluster.
    assert services.request_resize(cluster.id, 2, actor=alice) == S.RESIZING


def test_ferretdb_cannot_be_resized(fake_nodes, pool, alice, catalog):
    ferret = ProductVersion.objects.get(product__name="mongodb", version__startswith="ferretdb")
    spec = resolve(ferret, {"size": 1})
    cluster = services.create_cluster(alice, ferret, "ferret", spec.instances, {"size": 1})
    Cluster.objects.filter(id=cluster.id).update(state=S.RUNNING)
    with pytest.raises(ResizeRefused, match="cannot be resized"):
        services.request_resize(cluster.id, 2, actor=alice)


def test_hadoop_is_not_shrunk_below_its_hdfs_replication(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "hadoop", size=2, mem=1536)
    with pytest.raises(ResizeRefused, match=r"HDFS keeps 2 copies .*dfs.replication 2.*asked 1"):
        services.request_resize(cluster.id, 1, actor=alice)
    # A grow pins "auto" to what the NameNode has, so new workers write 2 copies too.
    services.request_resize(cluster.id, 3, actor=alice)
    cluster.refresh_from_db()
    assert cluster.options["replication"] == 2


def test_a_chosen_replication_of_one_allows_a_single_worker(fake_nodes, pool, alice, catalog):
    cluster = running(alice, "hadoop", size=2, mem=1536, replication=1)
    Cluster.objects.filter(id=cluster.id).update(state=S.RUNNING)
    from apps.clusters.resize import plan

    cluster.refresh_from_db()
    assert plan(cluster, 1).target == 1


def namenode(states: dict[str, tuple[str, int, int, int]]) -> dict:
    """What NameNodeInfo says, by hostname: (adminState, used, remaining, blocks left); the
    workers that stay are in service with room."""
    states = {"worker-0": ("In Service", 0, 100, 0), "worker-1": ("In Service", 0, 100, 0)} | states
    return {
        "LiveNodes": {
            f"{host}:9866": {"adminState": s, "usedSpace": used, "remaining": free}
            for host, (s, used, free, _left) in states.items()
        },
        "DecomNodes": {
            f"{host}:9866": {"underReplicatedBlocks": left}
            for host, (s, _used, _free, left) in states.items()
            if s != "In Service"
        },
    }


@pytest.fixture
def hadoop3(fake_nodes, pool, alice, catalog, settings, monkeypatch):
    settings.RESIZE_POLL_SECONDS = 0
    return running(alice, "hadoop", size=3, mem=1536, replication=2)


def script(monkeypatch, answers: list[dict]) -> list[list[str]]:
    """The NameNode answers these in turn (the last one for ever); returns the exclude lists
    written (hdfs part of each _set_excluded call)."""
    from workers import resize as step

    seen = iter(answers)
    last: list[dict] = []
    written: list[list[str]] = []

    def hdfs_nodes(_master, _container):
        last[:] = [next(seen, last[0] if last else answers[-1])]
        return last[0]

    def set_excluded(_master, _container, ips, _names, add):
        written.append(list(ips) if add else [])

    monkeypatch.setattr(step, "hdfs_nodes", hdfs_nodes)
    monkeypatch.setattr(step, "_set_excluded", set_excluded)
    return written


def test_hadoop_shrinks_once_the_datanode_is_decommissioned(hadoop3, monkeypatch, fake_nodes):
    gone = workers_of(hadoop3)[2]
    written = script(
        monkeypatch,
        [
            namenode({"worker-2": ("In Service", 10, 100, 0)}),
            namenode({"worker-2": ("Decommission In Progress", 10, 100, 7)}),
            namenode({"worker-2": ("Decommissioned", 10, 100, 0)}),
        ],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 2
    assert written == [[gone.address.ip]]  # excluded, and stays so once stopped
    messages = list(hadoop3.events.values_list("message", flat=True))
    assert "HDFS decommission: 7 blocks left to replicate (Decommission In Progress)" in messages
    assert any("worker-2 decommissioned" in m for m in messages)


def test_a_decommission_past_its_time_puts_the_worker_back_and_fails_the_resize(
    hadoop3, monkeypatch, settings, fake_nodes
):
    settings.RESIZE_DRAIN_SECONDS = 0
    written = script(monkeypatch, [namenode({"worker-2": ("Decommission In Progress", 1, 9, 3)})])
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert [w.index for w in workers_of(hadoop3)] == [0, 1, 2]  # never half removed
    assert all(w.state == Instance.State.RUNNING for w in workers_of(hadoop3))
    assert written[-1] == []  # back into service
    failed = hadoop3.events.get(message__startswith="resize failed")
    assert "did not end in 0 s (3 blocks left to replicate)" in failed.message
    assert "back in service" in failed.message


def test_a_shrink_whose_data_would_not_fit_is_refused(hadoop3, monkeypatch, fake_nodes):
    big = 3 * 2**30
    script(
        monkeypatch,
        [
            namenode(
                {
                    "worker-0": ("In Service", 0, 2**30, 0),
                    "worker-1": ("In Service", 0, 2**30, 0),
                    "worker-2": ("In Service", big, 2**30, 0),
                }
            )
        ],
    )
    services.request_resize(hadoop3.id, 2)
    assert operations.run("resize", hadoop3.id) == S.RUNNING
    assert len(workers_of(hadoop3)) == 3
    failed = hadoop3.events.get(message__startswith="resize failed")
    assert "(3.00 GiB) would not fit on the 2 that stay (2.00 GiB free)" in failed.message


@pytest.mark.parametrize(("cores_used", "removed"), [(0, True), (2, False)])
def test_spark_workers_leave_once_their_executors_ended(
    fake_nodes, pool, alice, catalog, settings, cores_used, removed
):
    import json

    settings.RESIZE_DRAIN_SECONDS = 0
    cluster = running(alice, "spark", size=2, mem=1024)
    leaving = workers_of(cluster)[1]
    status = [[w.hostname, "ALIVE", 0] for w in workers_of(cluster)]
    status[1][2] = cores_used
    fake_nodes.exec_results["python3"] = (0, json.dumps(status))
    services.request_resize(cluster.id, 1)
    assert operations.run("resize", cluster.id) == S.RUNNING
    assert (len(workers_of(cluster)) == 1) is removed
    if not removed:
        failed = cluster.events.get(message__startswith="resize failed")
        assert f"executors still run on {leaving.hostname}" in failed.message
