"""A fault while admitting one cluster fails that cluster alone: the queue goes on, and the
destroy that freed the capacity (and so ran the admission) still finishes."""

import pytest
from django.test import override_settings

from apps.clusters import admission, reservation
from apps.clusters.models import Cluster
from apps.inventory.models import Address, Disk

from .factories import destroy_now, make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


@pytest.fixture
def broken_for(monkeypatch):
    """Make reserve() raise, as a planner bug would, for the cluster ids put in the set."""
    broken: set[int] = set()
    real = reservation.reserve

    def reserve(cluster_id):
        if cluster_id in broken:
            raise KeyError(12345)
        return real(cluster_id)

    monkeypatch.setattr(admission, "reserve", reserve)
    return broken


def test_it_fails_the_broken_cluster_and_admits_the_next(alice, broken_for):
    make_network()
    make_node()
    first = make_cluster(alice, wants(1, disks=1))
    second = make_cluster(alice, wants(1, disks=1))
    broken_for.add(first.id)

    assert admission.admit_queued() == [second.id]

    first.refresh_from_db()
    assert first.state == Cluster.State.FAILED
    assert "could not place this cluster (KeyError: 12345)" in first.reason
    assert first.events.filter(level="error", message__contains="KeyError").exists()
    assert not first.instances.filter(active=True).exists()
    second.refresh_from_db()
    assert second.state == Cluster.State.PLACING


@override_settings(SCHEDULER_ADMIT_ON_RELEASE=True)
def test_a_destroy_that_admits_a_broken_cluster_still_finishes(
    alice, broken_for, django_capture_on_commit_callbacks
):
    make_network()
    make_node(disks={"hdd": 1})
    running = make_cluster(alice, wants(1, disks=1))
    admission.admit_queued()
    waiting = make_cluster(alice, wants(1, disks=1))
    assert admission.admit_queued() == []  # the only disk is taken
    broken_for.add(waiting.id)

    with django_capture_on_commit_callbacks(execute=True):
        destroy_now(running.id)

    running.refresh_from_db()
    waiting.refresh_from_db()
    assert running.state == Cluster.State.DESTROYED
    assert waiting.state == Cluster.State.FAILED
    assert Disk.objects.get().state == Disk.State.AVAILABLE
    assert not Address.objects.filter(held=True).exists()
