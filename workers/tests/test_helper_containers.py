"""Helper containers (wipes, disk benchmarks) are never taken for orphans while the operation
that started them runs, however long they take; once it ended, the reconciler removes what it
left (issue 29, item 4). Above the node boundary (apps.nodes.fake), with the real PostgreSQL
advisory locks the operations hold."""

import threading
import time

import pytest
from django.conf import settings

from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation
from apps.inventory.benchmarks import _benchmarking
from apps.nodes import helpers
from apps.nodes.fake import FakeContainer
from portal import locks
from workers import operations, reconciler

from .test_operations import demo, fake_nodes, placed, pool  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


def helper_on(fake_nodes, node_name: str, labels: dict[str, str], age: float) -> str:  # noqa: F811
    """A helper container on the node, started `age` seconds ago."""
    name = f"platter-helper-test-{len(fake_nodes.on(node_name))}"
    site = {"platter.site": settings.PLATTER_SITE, "platter.helper": "1"}
    fake_nodes.on(node_name)[name] = FakeContainer(
        name, name, {**site, **labels}, state="running", created=time.time() - age
    )
    return name


def test_a_wipe_running_through_a_reconcile_pass_is_left_alone_and_the_destroy_ends(
    fake_nodes,  # noqa: F811
    pool,  # noqa: F811
    alice,
    demo,  # noqa: F811
):
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    services.request_destroy(cluster.id, keep_data=False)
    passes = []
    # The wipe takes longer than the grace period: a reconcile pass sees it mid-way.
    fake_nodes.during_helper = lambda: passes.append(reconciler.reconcile(grace_seconds=0))
    assert operations.run("destroy", cluster.id) == S.DESTROYED
    assert passes and all(p["orphans_removed"] == [] for p in passes)
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, data_kept=True).exists()


def test_a_wipe_of_handed_over_disks_survives_a_reconcile_pass_during_the_launch(
    fake_nodes,  # noqa: F811
    alice,
    bob,
    demo,  # noqa: F811
):
    from apps.clusters.tests.factories import make_network, make_node

    make_network()
    make_node(disks={"ssd": 1})
    first = placed(alice, demo, size=1)
    operations.run("launch", first.id)
    services.request_destroy(first.id, keep_data=True)
    assert operations.run("destroy", first.id) == S.DESTROYED

    second = placed(bob, demo, size=1)  # alice's kept data is wiped before bob's start
    passes = []
    fake_nodes.during_helper = lambda: passes.append(reconciler.reconcile(grace_seconds=0))
    assert operations.run("launch", second.id) == S.RUNNING
    assert len(passes) == 1 and passes[0]["orphans_removed"] == []
    assert not DiskAllocation.objects.filter(handed_over=True).exists()


def test_a_helper_whose_operation_ended_is_removed(fake_nodes, pool, alice, demo):  # noqa: F811
    cluster = placed(alice, demo)
    node = pool[0].name
    left = helper_on(fake_nodes, node, helpers.serving("wipe", locks.CLUSTER, cluster.id), age=1)
    report = reconciler.reconcile(grace_seconds=0)
    assert report["orphans_removed"] == [f"{node}/{left}"]
    assert left not in fake_nodes.names(node)


def test_a_benchmark_helper_stays_while_its_node_benchmark_runs(fake_nodes, pool):  # noqa: F811
    node = pool[0]
    labels = helpers.serving("bench", locks.BENCHMARK, node.id, disk=1)
    name = helper_on(fake_nodes, node.name, labels, age=4 * 3600)
    with _benchmarking(node):  # the lock bench_node holds while fio runs
        assert reconciler.reconcile(grace_seconds=0)["orphans_removed"] == []
        assert name in fake_nodes.names(node.name)
    assert reconciler.reconcile(grace_seconds=0)["orphans_removed"] == [f"{node.name}/{name}"]


def test_a_helper_naming_no_operation_is_removed_only_once_run_helper_gave_up_on_it(
    fake_nodes,  # noqa: F811
    pool,  # noqa: F811
    settings,
):
    settings.NODE_HELPER_TIMEOUT = 1800
    node = pool[0].name
    probe = helper_on(fake_nodes, node, {}, age=1000)  # a disk probe on a slow disk
    old = helper_on(fake_nodes, node, {}, age=1900)
    assert reconciler.reconcile(grace_seconds=300)["orphans_removed"] == [f"{node}/{old}"]
    assert probe in fake_nodes.names(node)


@pytest.mark.lab
def test_on_the_lab_a_helper_outlives_a_reconcile_pass_while_its_operation_runs(lab_inventory):
    from apps import nodes

    node = lab_inventory[0]
    client = nodes.client(node)
    key = 2**31 - 3  # a cluster id nobody has: the lock is this test's own
    labels = helpers.serving("wipe", locks.CLUSTER, key, cluster=key)
    outcome: list = []
    with operations.cluster_lock(key) as got:
        assert got
        worker = threading.Thread(
            target=lambda: outcome.append(client.run_helper(["sleep", "3"], [], labels=labels))
        )
        worker.start()
        deadline = time.monotonic() + 60
        while not client.containers({helpers.LOCK: labels[helpers.LOCK]}):
            assert worker.is_alive() and time.monotonic() < deadline, "the helper never started"
            time.sleep(0.1)
        report = reconciler.reconcile(grace_seconds=0)
        worker.join()
    assert report["orphans_removed"] == []
    assert outcome == [(0, "")]  # it ran to its end: nobody removed it mid-way
