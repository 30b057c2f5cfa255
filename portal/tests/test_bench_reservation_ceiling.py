"""bench/reservation_ceiling builds its one-call function from the reservation's own SQL: it
must still compile and claim a disk after the reservation's statements change."""

import pytest
from django.db import connection

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import (
    held_disks,
    make_cluster,
    make_network,
    make_node,
    wants,
)
from portal.tests.bench_scripts import load_bench


@pytest.mark.django_db
def test_the_one_call_function_claims_a_disk_as_the_reservation_would(alice):
    ceiling = load_bench("reservation_ceiling")
    make_network()
    node = make_node(disks={"hdd": 2})
    cluster = make_cluster(alice, wants(1, cores=1, memory_mb=1024, disks=1))

    with connection.cursor() as cursor:
        cursor.execute(ceiling.one_call_function())
        cursor.execute(f"SELECT {ceiling.FUNCTION}(%s, '', 16)", [cluster.id])
        claimed = cursor.fetchone()[0]

    cluster.refresh_from_db()
    assert claimed == 1
    assert cluster.state == Cluster.State.PLACING
    (disk,) = held_disks(cluster)
    assert disk in set(node.disks.values_list("id", flat=True))
    instance = cluster.instances.get()
    assert (instance.node_id, instance.active) == (node.id, True)
    assert instance.address_id is not None
