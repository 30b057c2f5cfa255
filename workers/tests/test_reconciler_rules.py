"""How the reconciler settles a cluster from its instances' states (database only)."""

import pytest

from apps.clusters.models import Cluster, Instance
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants
from workers.reconciler import _settle

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(alice):
    make_network()
    for _ in range(2):
        make_node()
    cluster = make_cluster(alice, wants(2))
    reserve(cluster.id)
    Cluster.objects.filter(id=cluster.id).update(state="running")
    Instance.objects.filter(cluster=cluster).update(state="running")
    return cluster


@pytest.mark.parametrize(("lost", "state"), [(0, "running"), (1, "degraded"), (2, "failed")])
def test_a_cluster_is_degraded_while_some_instance_is_lost_and_failed_when_all_are(
    running, lost, state
):
    ids = list(running.instances.order_by("id").values_list("id", flat=True))[:lost]
    Instance.objects.filter(id__in=ids).update(state="lost")
    _settle(running.id)
    running.refresh_from_db()
    assert running.state == state


def test_a_degraded_cluster_runs_again_when_its_instances_are_back(running):
    Cluster.objects.filter(id=running.id).update(state="degraded")
    _settle(running.id)
    running.refresh_from_db()
    assert running.state == "running"
    assert running.events.filter(message="running: every instance runs again").exists()
