"""Life cycle: transitions, admission queue, data reuse, leases."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.clusters.admission import admit_queued, queue_order
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.reservation import Reservation, release, reserve
from apps.clusters.services import (
    LeaseError,
    StateConflict,
    expire_leases,
    extend_lease,
    finish_destroy,
    request_destroy,
    request_start,
    request_stop,
)
from apps.clusters.transitions import TransitionError, transition
from apps.inventory.models import Disk, Node

from .factories import destroy_now, held_disks, make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def network(db):
    return make_network()


def test_a_transition_happens_only_from_the_expected_state(alice):
    cluster = make_cluster(alice, wants(1))
    assert transition(cluster.id, "queued", "placing")
    assert not transition(cluster.id, "queued", "placing")  # someone else moved it
    cluster.refresh_from_db()
    assert cluster.state == "placing"
    assert cluster.placing_at is not None
    assert [e.message for e in cluster.events.all()] == ["queued", "placing"]


def test_a_transition_the_machine_lacks_is_refused(alice):
    cluster = make_cluster(alice, wants(1))
    with pytest.raises(TransitionError, match="from queued to running"):
        transition(cluster.id, "queued", "running")


def test_a_queued_cluster_is_placed_when_capacity_frees(
    alice, bob, django_capture_on_commit_callbacks
):
    make_node(disks={"hdd": 4})
    first = make_cluster(alice, wants(1, disks=4))
    reserve(first.id)
    waiting = make_cluster(bob, wants(1, disks=3))
    assert reserve(waiting.id).cause == "capacity"
    with django_capture_on_commit_callbacks(execute=True):
        destroy_now(first.id)  # the release commits, then the queue is retried
    waiting.refresh_from_db()
    assert waiting.state == "placing"


def test_fifo_takes_the_oldest_and_sjf_the_shortest_lease(alice, settings):
    long = make_cluster(alice, wants(1), lease_hours=48)
    short = make_cluster(alice, wants(1), lease_hours=1)
    endless = make_cluster(alice, wants(1))
    settings.SCHEDULER_QUEUE_ORDER = "fifo"
    assert queue_order() == [long.id, short.id, endless.id]
    settings.SCHEDULER_QUEUE_ORDER = "sjf"
    assert queue_order() == [short.id, long.id, endless.id]


def test_strict_order_stops_at_the_first_misfit_unless_backfilling(alice, settings):
    make_node(disks={"hdd": 3})
    running = make_cluster(alice, wants(1, disks=1), lease_hours=2)
    reserve(running.id)  # holds one disk: the big one below fits the pool, but not now
    big = make_cluster(alice, wants(1, disks=3))
    small = make_cluster(alice, wants(1, disks=1), lease_hours=1)  # back before big can start
    settings.SCHEDULER_QUEUE_BACKFILL = False
    assert admit_queued() == []
    settings.SCHEDULER_QUEUE_BACKFILL = True
    assert admit_queued() == [small.id]
    assert Cluster.objects.get(id=big.id).state == "queued"


def test_a_queued_cluster_the_pool_can_no_longer_take_does_not_hold_the_queue(alice, settings):
    node = make_node(disks={"hdd": 3})
    big = make_cluster(alice, wants(1, disks=3))
    small = make_cluster(alice, wants(1, disks=1))
    node.disks.filter(mount_path="/data/hdd0").update(state="failed")  # after big's launch
    settings.SCHEDULER_QUEUE_BACKFILL = False
    assert admit_queued() == [small.id]
    big.refresh_from_db()
    assert big.state == "queued"
    assert big.reason == (
        "could not run on the pool as it is now (an instance asks for 3 HDD disks; no node "
        "has more than 2); waits for the pool to change"
    )


def test_a_new_cluster_reuses_a_destroyed_clusters_node_and_disks(alice):
    for _ in range(3):
        make_node()
    old = make_cluster(alice, wants(2, disks=3))
    reserve(old.id)
    before = {(i.role, i.index): (i.node_id, held_disks_of(i)) for i in old.instances.all()}
    destroy_now(old.id, keep_data=True)
    make_cluster(alice, wants(3, disks=3))  # someone else's launch must not take that data
    reserve(Cluster.objects.filter(state="queued").get().id)
    new = make_cluster(alice, wants(2, disks=3), reuse_data_of=old)
    assert isinstance(reserve(new.id), Reservation)
    after = {(i.role, i.index): (i.node_id, held_disks_of(i)) for i in new.instances.all()}
    assert after == before


def held_disks_of(instance):
    return sorted(instance.allocations.filter(active=True).values_list("disk_id", flat=True))


def test_reuse_is_refused_when_a_disk_failed(alice):
    make_node()
    old = make_cluster(alice, wants(1, disks=2))
    reserve(old.id)
    disks = held_disks(old)
    destroy_now(old.id)
    Disk.objects.filter(id=disks[0]).update(state="failed")
    new = make_cluster(alice, wants(1, disks=2), reuse_data_of=old)
    outcome = reserve(new.id)
    assert outcome.cause == "reuse"
    assert "is failed" in outcome.message


def test_reuse_is_refused_when_the_kept_disks_are_of_another_kind(alice):
    make_node(disks={"hdd": 2, "ssd": 2})
    old = make_cluster(alice, wants(1, disks=2, kind="ssd"))
    reserve(old.id)
    destroy_now(old.id)
    outcome = reserve(make_cluster(alice, wants(1, disks=2, kind="hdd"), reuse_data_of=old).id)
    assert outcome.cause == "reuse"
    assert "is SSD; asked for HDD" in outcome.message


def test_reuse_is_refused_when_the_node_is_down(alice):
    node = make_node()
    old = make_cluster(alice, wants(1, disks=2))
    reserve(old.id)
    destroy_now(old.id)
    Node.objects.filter(id=node.id).update(state="down")
    outcome = reserve(make_cluster(alice, wants(1, disks=2), reuse_data_of=old).id)
    assert f"node {node.name}" in outcome.message
    assert "is down" in outcome.message


def test_reuse_is_refused_after_a_wipe(alice):
    make_node()
    old = make_cluster(alice, wants(1, disks=2))
    reserve(old.id)
    destroy_now(old.id, keep_data=False)
    outcome = reserve(make_cluster(alice, wants(1, disks=2), reuse_data_of=old).id)
    assert "wiped" in outcome.message
    assert not DiskAllocation.objects.filter(data_kept=True).exists()


def test_an_expired_lease_destroys_the_cluster_keeping_data(alice):
    make_node()
    cluster = make_cluster(alice, wants(1, disks=2), lease_hours=1)
    reserve(cluster.id)
    assert expire_leases(timezone.now()) == []
    assert expire_leases(timezone.now() + timedelta(hours=2)) == [cluster.id]
    cluster.refresh_from_db()
    assert cluster.state == "destroying"  # a worker removes the containers, then:
    finish_destroy(cluster.id, keep_data=True)
    cluster.refresh_from_db()
    assert cluster.state == "destroyed"
    assert DiskAllocation.objects.filter(data_kept=True).count() == 2
    assert not Instance.objects.filter(active=True).exists()


def test_a_lease_can_be_extended_within_the_cap(alice, settings):
    settings.SCHEDULER_MAX_LEASE_HOURS = 10
    cluster = make_cluster(alice, wants(1), lease_hours=2)
    end = extend_lease(cluster.id, 3)
    assert timedelta(hours=4.9) < end - timezone.now() <= timedelta(hours=5)
    with pytest.raises(LeaseError, match="at most 10 hours"):
        extend_lease(cluster.id, 6)
    with pytest.raises(LeaseError, match="at most 10 hours"):
        make_cluster(alice, wants(1), lease_hours=11)


@pytest.mark.parametrize("hours", [float("nan"), float("inf"), 0, -1])
def test_an_extension_must_be_a_positive_number_of_hours(alice, hours):
    cluster = make_cluster(alice, wants(1), lease_hours=2)
    with pytest.raises(LeaseError, match="positive number of hours"):
        extend_lease(cluster.id, hours)


def test_a_lease_without_an_end_is_never_shortened_by_an_extension(alice):
    cluster = make_cluster(alice, wants(1))
    with pytest.raises(LeaseError, match="has no end: nothing to extend"):
        extend_lease(cluster.id, 4)
    cluster.refresh_from_db()
    assert cluster.expires_at is None


def test_release_twice_frees_nothing_more(alice):
    make_node()
    cluster = make_cluster(alice, wants(1, disks=2))
    reserve(cluster.id)
    assert release(cluster.id) == 2
    assert release(cluster.id) == 0


def test_destroying_a_queued_cluster_cancels_it_at_once(alice):
    cluster = make_cluster(alice, wants(1))
    assert request_destroy(cluster.id) == "destroyed"
    assert request_destroy(cluster.id) == "destroyed"  # asking again is harmless


def test_stop_and_start_follow_the_state_machine(alice):
    make_node()
    cluster = make_cluster(alice, wants(1))
    reserve(cluster.id)
    with pytest.raises(StateConflict, match="is placing; only running clusters stop"):
        request_stop(cluster.id)
    Cluster.objects.filter(id=cluster.id).update(state="running")
    assert request_stop(cluster.id) == "stopping"
    assert request_stop(cluster.id) == "stopping"
    with pytest.raises(StateConflict, match="only stopped clusters start"):
        request_start(cluster.id)
    Cluster.objects.filter(id=cluster.id).update(state="stopped")
    assert request_start(cluster.id) == "configuring"
    assert Instance.objects.filter(cluster=cluster, active=True).count() == 1  # still held


def test_a_destroyed_cluster_cannot_be_stopped(alice):
    cluster = make_cluster(alice, wants(1))
    request_destroy(cluster.id)
    with pytest.raises(StateConflict, match="is destroyed"):
        request_stop(cluster.id)


def test_tasks_go_out_only_after_commit(alice, settings, django_capture_on_commit_callbacks):
    settings.DISPATCH_CLUSTER_TASKS = True
    with django_capture_on_commit_callbacks() as callbacks:
        make_cluster(alice, wants(1))
    assert len(callbacks) == 1  # the launch, sent once the request's transaction commits
