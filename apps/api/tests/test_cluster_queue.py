"""A queued cluster's `queue` in the API detail: its place in the admission queue (in the
order the admission tries them) and why it waits."""

import pytest

from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.services import launch
from apps.clusters.tests.factories import make_network, make_node

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


def queue_of(api, cluster: Cluster) -> dict | None:
    return api("owner").get(f"/api/v1/clusters/{cluster.id}").json()["queue"]


def test_the_second_of_two_queued_clusters_is_2_of_2_and_waits_for_the_first(api, alice, demo):
    first = make_cluster(alice, demo, name="first", size=1)
    second = make_cluster(alice, demo, name="second", size=1)
    assert queue_of(api, second) == {
        "position": 2,
        "length": 2,
        "order": "fifo",
        "reason": "waits its turn: 1 cluster ahead of it goes first",
    }
    assert queue_of(api, first) == {
        "position": 1,
        "length": 2,
        "order": "fifo",
        "reason": "not tried yet: the scheduler tries it shortly",
    }


def test_the_reason_is_what_the_last_reservation_attempt_found(api, alice, demo):
    make_network()
    make_node(cores=16, memory_mb=16384, disks={"hdd": 1})  # too few disks for 2 instances
    first = make_cluster(alice, demo, name="first", size=1)
    second = make_cluster(alice, demo, name="second", size=1)
    reserve(first.id)
    reserve(second.id)
    first.refresh_from_db()
    assert first.state == Cluster.State.QUEUED and "disk" in first.reason
    assert queue_of(api, first)["reason"] == first.reason
    second_reason = queue_of(api, second)["reason"]
    assert second_reason.startswith("waits its turn: 1 cluster ahead of it goes first; last try: ")


def test_with_backfill_a_cluster_waits_for_capacity_not_its_turn(api, alice, demo, settings):
    settings.SCHEDULER_QUEUE_BACKFILL = True
    make_cluster(alice, demo, name="first", size=1)
    second = make_cluster(alice, demo, name="second", size=1)
    assert queue_of(api, second)["reason"] == "not tried yet: the scheduler tries it shortly"


def test_shortest_lease_first_puts_the_shorter_lease_ahead(api, alice, demo, settings):
    settings.SCHEDULER_QUEUE_ORDER = "sjf"
    long = launch(alice, demo, "long", {"size": 1}, lease_hours=48)
    short = launch(alice, demo, "short", {"size": 1}, lease_hours=1)
    assert queue_of(api, short)["position"] == 1
    assert queue_of(api, long)["position"] == 2
    assert queue_of(api, long)["order"] == "sjf"


def test_a_cluster_that_is_not_queued_has_no_queue(api, alice, demo):
    cluster = make_cluster(alice, demo, name="up", state="running", size=1)
    assert queue_of(api, cluster) is None
    listed = api("owner").get("/api/v1/clusters").json()["results"][0]
    assert "queue" not in listed  # the detail only: the list stays one query
