"""bench/reservation empties its tables between runs with TRUNCATE ... CASCADE, which also
empties the networks (a segment's holder refers to a cluster): the claims must still find the
network they take addresses from, or every Python claim is refused."""

import pytest

from apps.clusters.reservation import Reservation, reserve
from apps.clusters.tests.factories import make_cluster, make_node, wants
from apps.inventory.models import Network

pytestmark = pytest.mark.django_db(transaction=True)  # TRUNCATE wants no pending triggers


@pytest.fixture
def bench(monkeypatch, settings):
    monkeypatch.syspath_prepend(str(settings.BASE_DIR / "bench"))
    import reservation  # type: ignore[import-not-found]  # bench/reservation.py, on the path now

    return reservation


def test_a_reset_leaves_the_network_and_a_claim_succeeds(bench, alice):
    bench.ensure_network()
    bench.reset_allocations()  # TRUNCATE ... CASCADE, as between the bench's runs
    assert Network.objects.filter(name="bench").exists()
    make_node()
    cluster = make_cluster(alice, wants(1, cores=1, memory_mb=1024, disks=1))
    assert isinstance(reserve(cluster.id), Reservation)
