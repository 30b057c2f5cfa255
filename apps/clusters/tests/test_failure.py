"""One way to fail a cluster: reservation.fail, used by the reservation, the admission queue,
the operations runner and (through it) the reconciler."""

import ast
from pathlib import Path

import pytest

from apps.clusters import reservation
from apps.clusters.models import Cluster, DiskAllocation, Instance

from .factories import make_cluster, make_network, make_node, wants

S = Cluster.State
BASE_DIR = Path(__file__).resolve().parents[3]


def moves_to_failed(call: ast.Call) -> bool:
    target = call.args[2] if len(call.args) > 2 else None
    text = ast.unparse(target) if target is not None else ""
    return "FAILED" in text or "'failed'" in text


def test_no_code_but_reservation_fail_moves_a_cluster_to_failed():
    found = []
    for path in [*BASE_DIR.glob("apps/**/*.py"), *BASE_DIR.glob("workers/**/*.py")]:
        if "tests" in path.parts or "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            for call in ast.walk(function):
                name = getattr(getattr(call, "func", None), "id", None)
                called = isinstance(call, ast.Call) and name in ("transition", "transition_ctes")
                if called and moves_to_failed(call):
                    found.append(f"{path.relative_to(BASE_DIR)}:{function.name}")
    assert found == ["apps/clusters/reservation.py:fail"]


@pytest.mark.django_db
def test_it_fails_once_gives_back_what_the_cluster_held_and_keeps_its_data(alice):
    make_network()
    make_node(cores=8, memory_mb=16384, disks={"hdd": 4})
    cluster = make_cluster(alice, wants(2, cores=1, memory_mb=1024, disks=1))
    assert isinstance(reservation.reserve(cluster.id), reservation.Reservation)
    Instance.objects.filter(cluster=cluster).update(container_id="c0ffee")

    assert reservation.fail(cluster.id, (S.PLACING, S.CONFIGURING), "it broke")
    assert not reservation.fail(cluster.id, (S.PLACING, S.CONFIGURING), "again")

    cluster.refresh_from_db()
    assert (cluster.state, cluster.reason) == (S.FAILED, "it broke")
    assert cluster.events.filter(message="failed: it broke").count() == 1
    assert not Instance.objects.filter(cluster=cluster, active=True).exists()
    assert set(Instance.objects.filter(cluster=cluster).values_list("container_id", flat=True)) == {
        ""
    }
    allocations = DiskAllocation.objects.filter(instance__cluster=cluster)
    assert allocations.count() == 2 and all(a.data_kept and not a.active for a in allocations)


@pytest.mark.django_db
def test_a_cluster_that_left_the_states_is_left_alone(alice):
    cluster = make_cluster(alice, wants(1))  # queued
    assert not reservation.fail(cluster.id, S.PLACING, "too late")
    cluster.refresh_from_db()
    assert cluster.state == S.QUEUED
