"""bench/reservation empties its tables for each inventory with TRUNCATE ... CASCADE, which also
empties the networks (a segment's holder refers to a cluster), and between runs removes the
last run's clusters: the claims must still find the network they take addresses from, or every
Python claim is refused."""

import pytest

from apps.clusters.reservation import Reservation, reserve
from apps.clusters.tests.factories import make_cluster, make_node, wants
from apps.inventory.models import Network

pytestmark = pytest.mark.django_db(transaction=True)  # TRUNCATE wants no pending triggers


@pytest.fixture
def bench():
    from bench import reservation

    return reservation


def test_a_reset_leaves_the_network_and_a_claim_succeeds(bench, alice):
    bench.build_inventory(2)  # TRUNCATE ... CASCADE, as for each inventory size
    bench.reset_allocations()  # as between the bench's runs
    assert Network.objects.filter(name="bench").exists()
    make_node()
    cluster = make_cluster(alice, wants(1, cores=1, memory_mb=1024, disks=1))
    assert isinstance(reserve(cluster.id), Reservation)


def test_a_reset_removes_the_last_runs_clusters_and_gives_back_what_they_held(bench, alice):
    from apps.clusters.models import Cluster
    from apps.inventory.models import Address, Disk

    bench.ensure_network()
    make_node()
    history = make_cluster(alice, wants(1, cores=1, memory_mb=1024, disks=1))
    Cluster.objects.filter(id=history.id).update(state=Cluster.State.DESTROYED)
    ran = make_cluster(alice, wants(1, cores=1, memory_mb=1024, disks=1))
    assert isinstance(reserve(ran.id), Reservation)
    bench.reset_allocations()
    assert list(Cluster.objects.values_list("id", flat=True)) == [history.id]  # history stays
    assert not Disk.objects.exclude(state=Disk.State.AVAILABLE).exists()
    assert not Address.objects.filter(held=True).exists()
