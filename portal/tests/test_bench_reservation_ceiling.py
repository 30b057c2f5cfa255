"""bench/reservation_ceiling builds its one-call function from the reservation's own SQL: it
must still compile and claim a disk after the reservation's statements change."""

import importlib.util
from types import ModuleType

import pytest
from django.conf import settings
from django.db import connection

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import (
    held_disks,
    make_cluster,
    make_network,
    make_node,
    wants,
)


def bench_ceiling() -> ModuleType:
    """bench/reservation_ceiling.py, which is a script (bench/ is no package)."""
    path = settings.BASE_DIR / "bench/reservation_ceiling.py"
    spec = importlib.util.spec_from_file_location("bench_reservation_ceiling", path)
    assert spec is not None and spec.loader is not None, "bench/ has the script"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.django_db
def test_the_one_call_function_claims_a_disk_as_the_reservation_would(alice):
    ceiling = bench_ceiling()
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
