"""A request through the UI proxy counts as use of the cluster for idle stop, written at most
once a minute however busy the UI."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.clusters import idle
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_cluster, make_version, wants

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(alice) -> Cluster:
    make_version()
    cluster = make_cluster(alice, wants(1))
    Cluster.objects.filter(id=cluster.id).update(state="running", running_at=timezone.now())
    return cluster


def test_a_request_is_use_once_a_minute(running):
    idle.record_request(running.id, "its web UI master-0:8080 was opened")
    first = Cluster.objects.get(id=running.id)
    assert first.active_signal == "its web UI master-0:8080 was opened"
    idle.record_request(running.id, "its web UI master-0:4040 was opened")
    assert Cluster.objects.get(id=running.id).active_at == first.active_at  # not written again
    Cluster.objects.filter(id=running.id).update(active_at=timezone.now() - timedelta(minutes=2))
    idle.record_request(running.id, "its web UI master-0:4040 was opened")
    assert Cluster.objects.get(id=running.id).active_signal.endswith("4040 was opened")
