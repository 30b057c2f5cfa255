"""The one failure policy, above the node boundary (apps.nodes.fake): every operation ends
with the cluster working, back in the queue, or failed with a reason, and a failed cluster
holds nothing (disks, addresses, its segment), exactly once. The same policy on the real lab:
apps/lab/tests/test_faults.py."""

import threading

import pytest
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.clusters import container_specs, services
from apps.clusters.models import Cluster, ClusterEvent, DiskAllocation, Instance
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from apps.clusters.tests.parallel import run_together
from apps.inventory.models import Address, Network
from apps.nodes import NodeMissing, NodeRefused, NodeUnreachable
from apps.nodes.fake import FakeNodes
from workers import operations, reconciler

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture
def fake_nodes():
    with FakeNodes() as fake:
        yield fake


@pytest.fixture
def pool():
    make_network()
    return [make_node(disks={"ssd": 4}) for _ in range(2)]


@pytest.fixture
def demo():
    call_command("load_catalog", verbosity=0)
    return ProductVersion.objects.get(product__name="demo")


def placed(owner, version, size: int = 2) -> Cluster:
    """A demo cluster reserved on the pool: placing, everything held."""
    wants = [services.InstanceWant("master", i, 1, 256, 1, "ssd") for i in range(size)]
    cluster = services.create_cluster(owner, version, f"c{Cluster.objects.count()}", wants)
    reserve(cluster.id)
    cluster.refresh_from_db()
    assert cluster.state == S.PLACING
    return cluster


def holds_nothing(cluster: Cluster) -> bool:
    return (
        not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()
        and not Instance.objects.filter(cluster=cluster, active=True).exists()
        and not Address.objects.filter(
            id__in=Instance.objects.filter(cluster=cluster).values("address_id"), held=True
        ).exists()
        and not Network.objects.filter(holder=cluster).exists()
    )


def failures(cluster: Cluster) -> list[str]:
    return list(
        cluster.events.filter(message__startswith="failed").values_list("message", flat=True)
    )


def test_a_launch_runs_to_running_on_fake_nodes(fake_nodes, pool, alice, demo):
    cluster = placed(alice, demo)
    assert operations.run("launch", cluster.id) == S.RUNNING
    assert sum(len(fake_nodes.running(n.name)) for n in pool) == 2


def test_a_bug_in_a_step_fails_the_cluster_with_a_reason_and_releases_everything(
    fake_nodes, pool, alice, demo, monkeypatch
):
    cluster = placed(alice, demo)

    def broken(_cluster):
        raise KeyError("roles")

    monkeypatch.setattr(container_specs, "plans_for", broken)
    assert operations.run("launch", cluster.id) == S.FAILED
    cluster.refresh_from_db()
    assert cluster.reason.startswith(
        "Platter could not launch this cluster because of an unexpected error, logged for"
    )
    assert "KeyError" not in cluster.reason  # the class name is in the worker's log only
    assert holds_nothing(cluster)


def test_a_failed_configuration_fails_once_and_releases(fake_nodes, pool, alice, demo):
    cluster = placed(alice, demo)
    fake_nodes.fail("exec", NodeRefused("n1", "exec in c: container is restarting"))
    operations.run("launch", cluster.id)
    cluster.refresh_from_db()
    if not container_specs.configure_steps(cluster):  # the demo may have no configure step
        pytest.skip("the demo product has no configuration step")
    assert cluster.state == S.FAILED
    assert holds_nothing(cluster)


def test_a_start_that_raises_fails_instead_of_staying_configuring(
    fake_nodes, pool, alice, demo, monkeypatch
):
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    services.request_stop(cluster.id)
    assert operations.run("stop", cluster.id) == S.STOPPED
    services.request_start(cluster.id)

    def untrusted(_cluster):
        raise container_specs.UntrustedVersion(
            "demo 1.0 asks for capabilities beyond Docker's defaults"
        )

    monkeypatch.setattr(container_specs, "plans_for", untrusted)
    assert operations.run("start", cluster.id) == S.FAILED
    cluster.refresh_from_db()
    assert "capabilities beyond" in cluster.reason
    assert holds_nothing(cluster)


def test_a_stop_on_a_dead_node_is_retried_then_fails_and_releases(
    fake_nodes, pool, alice, demo, settings
):
    settings.CLUSTER_TASK_RETRIES = 2
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    services.request_stop(cluster.id)
    for node in pool:
        fake_nodes.down(node.name)
    for attempt in range(2):
        with pytest.raises(operations.Retry):
            operations.run("stop", cluster.id, attempt=attempt)
        assert Cluster.objects.get(id=cluster.id).state == S.STOPPING
    assert operations.run("stop", cluster.id, attempt=2) == S.FAILED
    cluster.refresh_from_db()
    assert "could not stop" in cluster.reason and "did not answer" in cluster.reason
    # Its containers may still run: what they hold stays held until they are seen gone.
    assert not holds_nothing(cluster)
    for node in pool:
        fake_nodes.up(node.name)
    reconciler.reconcile(grace_seconds=3600)
    assert holds_nothing(cluster)
    # The data stays for a reuse: nothing a user owns is lost to a failure.
    assert DiskAllocation.objects.filter(instance__cluster=cluster, data_kept=True).count() == 2


def test_a_destroy_that_gives_up_fails_and_releases(fake_nodes, pool, alice, demo, settings):
    settings.DESTROY_RETRIES = 0
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    services.request_destroy(cluster.id, keep_data=False)
    for node in pool:
        fake_nodes.down(node.name)
    assert operations.run("destroy", cluster.id) == S.FAILED
    cluster.refresh_from_db()
    assert "could not remove" in cluster.reason
    assert not holds_nothing(cluster)  # its containers may still run (test_leftovers.py)
    # Destroyed again once the nodes answer, its kept data is wiped after all.
    for node in pool:
        fake_nodes.up(node.name)
    services.request_destroy(cluster.id, keep_data=False)
    assert operations.run("destroy", cluster.id) == S.DESTROYED
    assert holds_nothing(cluster)
    assert any(call[1] == "run_helper" for call in fake_nodes.calls)
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, data_kept=True).exists()


def test_a_placement_that_fails_on_a_node_goes_back_to_the_queue_away_from_it(
    fake_nodes, pool, alice, demo
):
    cluster = placed(alice, demo, size=1)
    node = cluster.instances.get().node
    fake_nodes.down(node.name)
    assert operations.run("launch", cluster.id) == S.QUEUED
    cluster.refresh_from_db()
    assert cluster.avoid_nodes == [node.id]
    assert cluster.events.filter(message=f"queued: re-placing away from {node.name}").exists()
    # The release offered the freed capacity to the queue at once: the other node took it.
    assert cluster.state == S.PLACING
    assert list(cluster.instances.filter(active=True).values_list("node", flat=True)) == [
        next(n.id for n in pool if n != node)
    ]


def stop_on_its_own(fake_nodes, cluster: Cluster, hostname: str, log: str) -> None:
    instance = cluster.instances.select_related("node").get(hostname=hostname)
    name = container_specs.container_name(cluster.id, instance.role, instance.index)
    assert instance.node is not None, "placed on a node"
    container = fake_nodes.on(instance.node.name)[name]
    container.state, container.log = "exited", log


def test_the_reconciler_starts_a_stopped_container_again_then_fails_its_cluster(
    fake_nodes, pool, alice, demo, settings
):
    settings.CONTAINER_RESTARTS = 1
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    stop_on_its_own(fake_nodes, cluster, "master-0", "Exception: disk full\n")
    report = reconciler.reconcile(grace_seconds=3600)
    assert report["restarted"] == [f"{cluster.id}/master-0"] and report["lost"] == []
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert cluster.events.filter(message__contains="started it again (1 of 1)").exists()

    stop_on_its_own(fake_nodes, cluster, "master-0", "Exception: disk full\n")
    reconciler.reconcile(grace_seconds=3600)
    cluster.refresh_from_db()
    assert cluster.state == S.FAILED
    assert cluster.reason.startswith("master-0's container on n")
    assert "disk full" in cluster.reason and "started again 1 times" in cluster.reason
    assert holds_nothing(cluster)


def test_the_reconciler_fails_a_cluster_none_of_whose_instances_runs_and_releases(
    fake_nodes, pool, alice, demo
):
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    for instance in cluster.instances.select_related("node"):
        name = container_specs.container_name(cluster.id, instance.role, instance.index)
        fake_nodes.on(instance.node.name).pop(name)  # gone: nothing to start again
    reconciler.reconcile(grace_seconds=3600)
    cluster.refresh_from_db()
    assert cluster.state == S.FAILED
    assert cluster.reason == "no instance of the cluster runs"
    lost = cluster.events.filter(level=ClusterEvent.Level.ERROR, message__contains="vanished")
    assert lost.count() == 2
    assert holds_nothing(cluster)


def test_two_failures_at_once_fail_and_release_exactly_once(fake_nodes, pool, alice, demo):
    cluster = placed(alice, demo)
    results = run_together(
        [lambda n=n: operations.fail(cluster.id, S.PLACING, f"reason {n}") for n in range(4)]
    )
    assert sorted(results) == [False, False, False, True]
    cluster.refresh_from_db()
    assert len(failures(cluster)) == 1
    assert cluster.events.filter(message__startswith="released").count() == 1
    assert holds_nothing(cluster)


def test_a_node_that_does_not_answer_becomes_a_typed_error(fake_nodes, pool):
    fake_nodes.down(pool[0].name)
    from apps import nodes

    with pytest.raises(NodeUnreachable) as raised:
        nodes.client(pool[0]).containers({})
    assert raised.value.transient and pool[0].name in str(raised.value)


def test_a_cluster_no_other_node_can_take_goes_back_and_fails_after_its_attempts(
    fake_nodes, alice, demo, settings
):
    settings.SCHEDULER_PLACE_ATTEMPTS = 3
    make_network()
    only = make_node(disks={"ssd": 4})
    cluster = placed(alice, demo, size=1)
    fake_nodes.down(only.name)
    # Away from the only node, nothing takes it: it goes back there at once and fails again.
    for _ in range(2):
        assert operations.run("launch", cluster.id) == S.QUEUED
        cluster.refresh_from_db()
        assert cluster.state == S.PLACING and cluster.avoid_nodes == []
    assert operations.run("launch", cluster.id) == S.FAILED
    cluster.refresh_from_db()
    assert "no other node could take the cluster" in cluster.reason
    fake_nodes.up(only.name)  # what the silent node may still run is given back once seen gone
    reconciler.reconcile(grace_seconds=3600)
    assert holds_nothing(cluster)


def test_the_launch_says_what_each_container_may_use(fake_nodes, pool, alice, demo, settings):
    settings.CONTAINER_PIDS_LIMIT, settings.CONTAINER_ROOTFS_LIMIT = 512, "2G"
    settings.CONTAINER_RESTARTS = 3
    cluster = placed(alice, demo)
    operations.run("launch", cluster.id)
    assert cluster.events.filter(
        message="each container runs at most 512 processes and writes at most 2G outside its "
        "disks (enforced by each node's Docker); a crashed process is restarted up to 3 times"
    ).exists()


def test_a_launch_creates_its_containers_first_and_prepares_a_node_only_when_it_lacks_something(
    fake_nodes, pool, alice, demo
):
    """As a plain `docker run`: no network or image check ahead of the creates; a node whose
    create says the network (or image) is missing gets it once, and the create is tried
    again there."""
    cluster = placed(alice, demo, size=2)
    fake_nodes.fail("ensure_running", NodeMissing("-", "network cluster-seg not found"))
    assert operations.run("launch", cluster.id) == S.RUNNING
    methods = [method for _node, method, _target in fake_nodes.calls]
    assert methods.count("ensure_running") == 3  # one failed, then tried again
    assert methods.count("ensure_network") == 1 and methods.count("ensure_image") == 1
    assert sum(len(fake_nodes.running(n.name)) for n in pool) == 2
    started = cluster.events.filter(message__contains=" started on ").count()
    assert started == 2 and Instance.objects.filter(cluster=cluster, container_id="").count() == 0


def test_a_node_still_missing_something_once_prepared_fails_the_placement(
    fake_nodes, pool, alice, demo
):
    cluster = placed(alice, demo, size=1)
    for _ in range(2):
        fake_nodes.fail("ensure_running", NodeMissing("-", "No such image: platter/demo"))
    assert operations.run("launch", cluster.id) == S.FAILED
    assert "No such image" in failures(cluster)[0]
    assert holds_nothing(cluster)


def test_disks_handed_over_with_another_users_kept_data_are_wiped_first(
    fake_nodes, alice, bob, demo
):
    make_network()
    node = make_node(disks={"ssd": 1})
    first = placed(alice, demo, size=1)  # takes the disk
    operations.run("launch", first.id)
    services.request_destroy(first.id, keep_data=True)
    assert operations.run("destroy", first.id) == S.DESTROYED
    assert DiskAllocation.objects.filter(instance__cluster=first, data_kept=True).count() == 1
    fake_nodes.calls.clear()

    second = placed(bob, demo, size=1)  # the same disk, for someone else
    assert operations.run("launch", second.id) == S.RUNNING
    wipes = [target for name, method, target in fake_nodes.calls if method == "run_helper"]
    assert len(wipes) == 1 and f"cluster-{second.id}" in wipes[0]  # all but its own folder
    assert not DiskAllocation.objects.filter(instance__cluster=first, data_kept=True).exists()
    assert not DiskAllocation.objects.filter(handed_over=True).exists()  # wiped: done
    assert node.disks.filter(state="allocated").count() == 1


def test_an_operation_on_a_cluster_another_worker_holds_is_left_or_retried(
    fake_nodes, pool, alice, demo, settings
):
    """A launch leaves a held cluster to the worker holding it; a stop tries again later."""
    settings.CLUSTER_LOCK_WAIT = 0
    cluster = placed(alice, demo)
    holding, release_it = threading.Event(), threading.Event()

    def hold() -> None:
        with operations.cluster_lock(cluster.id, wait=0) as got:
            assert got
            holding.set()
            release_it.wait(30)

    def attempt() -> tuple[str, str]:
        holding.wait(30)
        try:
            launch = operations.run("launch", cluster.id)
            with pytest.raises(operations.Retry):
                operations.run("stop", cluster.id)
            return launch, "retry"
        finally:
            release_it.set()

    outcomes = run_together([hold, attempt])
    assert outcomes[1] == ("busy", "retry")
    assert Cluster.objects.get(id=cluster.id).state == S.PLACING  # nobody touched it
