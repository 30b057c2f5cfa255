"""Periodic tasks run by beat, executed here by a real worker process on the test database."""

import datetime as dt

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.catalog.models import ProductVersion
from apps.clusters import reservation, services
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node
from workers import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_version():
    call_command("load_catalog", verbosity=0)
    return ProductVersion.objects.get(product__name="demo")


def test_beat_destroys_a_cluster_whose_lease_ended_and_keeps_its_data(
    celery_worker_process, alice, demo_version
):
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 6, "ssd": 2})
    cluster = services.launch(alice, demo_version, "short-lived", {"size": 2}, lease_hours=1)
    assert isinstance(reservation.reserve(cluster.id), reservation.Reservation)
    Cluster.objects.filter(id=cluster.id).update(expires_at=timezone.now() - dt.timedelta(1))

    expired = tasks.expire_leases.delay().get(timeout=30)

    assert expired == [cluster.id]
    cluster.refresh_from_db()
    # No destroy task goes out here (DISPATCH_CLUSTER_TASKS is off): the state and the event
    # show beat asked for it; workers/tests/test_lifecycle.py destroys for real on the lab.
    assert cluster.state == Cluster.State.DESTROYING
    assert cluster.events.filter(message="lease expired").exists()
    assert cluster.events.filter(message="destroying: data kept").exists()


def test_beat_places_a_queued_cluster_once_capacity_exists(
    celery_worker_process, alice, demo_version
):
    make_network()
    busy = make_node(disks={"hdd": 2})  # the first cluster fills it
    first = services.launch(alice, demo_version, "first", {"size": 1})
    assert isinstance(reservation.reserve(first.id), reservation.Reservation)
    cluster = services.launch(alice, demo_version, "waits", {"size": 1})
    rejection = reservation.reserve(cluster.id)
    assert isinstance(rejection, reservation.Rejection)
    assert Cluster.objects.get(id=cluster.id).state == Cluster.State.QUEUED

    for _ in range(2):
        make_node(disks={"hdd": 4})
    admitted = tasks.admit_queued.delay().get(timeout=30)
    assert busy.id not in Cluster.objects.get(id=cluster.id).instances.values_list(
        "node_id", flat=True
    )

    assert admitted == [cluster.id]
    assert Cluster.objects.get(id=cluster.id).state == Cluster.State.PLACING
