"""A cluster's provisioning time, from its state events: launch → running and each phase."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.clusters.models import Cluster, ClusterEvent
from apps.clusters.provisioning import launch_provisioning

from .factories import make_cluster, wants

pytestmark = pytest.mark.django_db
T0 = timezone.now().replace(microsecond=0)


def with_events(cluster: Cluster, *timeline: tuple[float, str]) -> Cluster:
    cluster.events.all().delete()
    for seconds, message in timeline:
        event = ClusterEvent.objects.create(cluster=cluster, message=message)
        ClusterEvent.objects.filter(id=event.id).update(at=T0 + timedelta(seconds=seconds))
    return cluster


def test_every_phase_before_the_first_running_counts_also_a_return_to_the_queue(alice):
    cluster = with_events(
        make_cluster(alice, wants(1)),
        (0, "queued"),
        (1, "placing"),
        (1.2, "reserved 1 disk on 1 node"),
        (2, "queued: lab-2 did not answer; placing again"),
        (5, "placing"),
        (6, "configuring"),
        (16, "running"),
        (100, "stopping"),
        (101, "stopped"),
    )
    found = launch_provisioning(cluster)
    assert found.done and found.total == 16
    assert found.phases == {"queued": 4, "placing": 2, "configuring": 10}
    assert found.as_dict() == {
        "seconds": 16.0,
        "running": True,
        "phases": {"queued": 4.0, "placing": 2.0, "configuring": 10.0},
    }


def test_a_launch_under_way_counts_up_to_now_and_a_failed_one_stops_at_the_failure(alice):
    cluster = with_events(make_cluster(alice, wants(1)), (0, "queued"), (2, "placing"))
    going = launch_provisioning(cluster, now=T0 + timedelta(seconds=5))
    assert not going.done and going.total == 5 and going.phases["placing"] == 3

    with_events(cluster, (0, "queued"), (2, "placing"), (3, "failed: no node answered"))
    failed = launch_provisioning(cluster, now=T0 + timedelta(seconds=50))
    assert not failed.done and failed.total == 3
    assert failed.phases == {"queued": 2, "placing": 1, "configuring": 0}


def test_a_cluster_without_state_events_has_none(alice):
    assert launch_provisioning(with_events(make_cluster(alice, wants(1)))) is None
