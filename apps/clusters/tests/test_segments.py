"""Isolated cluster networks (segments): each cluster holds one of its own, even when many
reservations run at the same instant, and gives it back with everything else."""

import ipaddress

import pytest
from django.contrib.auth import get_user_model

from apps.clusters.models import Cluster, Instance
from apps.clusters.reservation import Rejection, Reservation, release, reserve
from apps.inventory.models import Network

from .factories import make_cluster, make_network, make_node, wants
from .parallel import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def make_segments(count: int) -> list[Network]:
    return [
        Network.objects.create(
            name=f"seg{n}",
            subnet=f"10.77.{n}.0/24",
            gateway=f"10.77.{n}.1",
            first_address=f"10.77.{n}.10",
            last_address=f"10.77.{n}.250",
            isolated=True,
            parent=f"br{n}",
        )
        for n in range(count)
    ]


def subnet_of(instance: Instance) -> str:
    assert instance.address is not None, "placed on a node"
    return instance.address.network.subnet


def test_parallel_reservations_each_take_a_segment_of_their_own_and_the_rest_wait():
    for _ in range(4):
        make_node(cores=64, memory_mb=10**6)
    make_segments(6)
    make_network()  # a shared network exists too: isolated ones come first, never mixed
    users = [get_user_model().objects.create_user(f"u{n}", password="pw-12345") for n in range(10)]
    clusters = [make_cluster(users[n], wants(2, disks=1)) for n in range(10)]

    results = run_together([lambda c=c: reserve(c.id) for c in clusters])

    reserved = [r for r in results if isinstance(r, Reservation)]
    waiting = [r for r in results if isinstance(r, Rejection)]
    assert not [r for r in results if isinstance(r, Exception)], results
    # Six segments, and the shared network holds the other four: every cluster got one.
    holders = dict(Network.objects.filter(isolated=True).values_list("name", "holder_id"))
    assert sorted(h for h in holders.values() if h) == sorted(
        r.cluster_id for r in reserved if Network.objects.filter(holder_id=r.cluster_id).exists()
    )
    assert len([h for h in holders.values() if h]) == 6 and len(reserved) == 10 and not waiting
    for cluster in clusters:
        members = Instance.objects.filter(cluster=cluster).select_related("address__network")
        instances = list(members)
        networks = {i.address.network_id for i in instances}
        assert len(networks) == 1, "a cluster's addresses all come from one network"
        network = instances[0].address.network
        for instance in instances:
            assert ipaddress.ip_address(instance.address.ip) in ipaddress.ip_network(network.subnet)
        if network.isolated:
            assert network.holder_id == cluster.id
            others = Instance.objects.filter(address__network=network).exclude(cluster=cluster)
            assert not others.exists(), "a segment is never shared"


def test_without_a_shared_network_a_cluster_waits_for_a_segment_and_gets_the_freed_one():
    make_node(cores=64, memory_mb=10**6)
    (segment,) = make_segments(1)
    alice = get_user_model().objects.create_user("alice", password="pw-12345")
    first, second = make_cluster(alice, wants(1, disks=1)), make_cluster(alice, wants(1, disks=1))

    assert isinstance(reserve(first.id), Reservation)
    waiting = reserve(second.id)
    assert isinstance(waiting, Rejection) and waiting.cause == "capacity"
    assert "all 1 cluster networks are in use" in waiting.message
    assert Cluster.objects.get(id=second.id).state == Cluster.State.QUEUED

    release(first.id)  # ...and the admission queue, on commit, places the waiting one
    segment.refresh_from_db()
    assert segment.holder_id == second.id
    assert Cluster.objects.get(id=second.id).state == Cluster.State.PLACING
    release(second.id)
    segment.refresh_from_db()
    assert segment.holder_id is None


def test_a_cluster_larger_than_a_segment_is_told_so():
    make_node(cores=64, memory_mb=10**6)
    Network.objects.create(
        name="tiny",
        subnet="10.78.0.0/29",
        gateway="10.78.0.1",
        first_address="10.78.0.2",
        last_address="10.78.0.3",
        isolated=True,
        parent="brt",
    )
    alice = get_user_model().objects.create_user("alice", password="pw-12345")
    big = make_cluster(alice, wants(3, disks=1))
    rejected = reserve(big.id)
    assert isinstance(rejected, Rejection)
    assert "needs 3 addresses; network tiny has 2" in rejected.message
    assert Network.objects.get(name="tiny").holder_id is None  # rolled back with the rest
