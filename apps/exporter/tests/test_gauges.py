"""Gauges computed from the database (and the broker) at scrape time."""

import pytest
import redis

from apps.clusters.models import Cluster
from apps.clusters.reservation import Reservation, reserve
from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants
from apps.inventory.models import Disk
from portal import queues
from portal.celery import app

from .conftest import value

pytestmark = pytest.mark.django_db
MB = 2**20


@pytest.fixture
def inventory():
    make_network()
    open_node = make_node(cores=12, memory_mb=65536, disks={"hdd": 4, "ssd": 2})
    draining = make_node(cores=8, memory_mb=32768, disks={"hdd": 3}, state="draining")
    return open_node, draining


def test_it_counts_clusters_by_state_every_state_included(scrape, inventory, alice):
    placed = make_cluster(alice, wants(1, cores=2, memory_mb=4096, disks=2))
    assert isinstance(reserve(placed.id), Reservation)
    make_cluster(alice, wants(1))  # stays queued: nothing reserved it yet
    make_cluster(alice, wants(1))
    failed = make_cluster(alice, wants(1))
    Cluster.objects.filter(id=failed.id).update(state=Cluster.State.FAILED)

    samples = scrape()
    expected = {"placing": 1, "queued": 2, "failed": 1}
    for state in Cluster.State.values:
        assert value(samples, "platter_clusters", state=state) == expected.get(state, 0)
    assert value(samples, "platter_admission_queue_length") == 2
    assert value(samples, "platter_admission_queue_oldest_seconds") > 0


def test_it_counts_disks_by_kind_and_state(scrape, inventory, alice):
    open_node, _ = inventory
    cluster = make_cluster(alice, wants(1, disks=2))
    assert isinstance(reserve(cluster.id), Reservation)
    broken = Disk.objects.filter(node=open_node, kind="hdd", state="available").first()
    Disk.objects.filter(id=broken.id).update(state=Disk.State.FAILED)

    samples = scrape()
    # open node: 4 HDDs, 2 reserved, 1 failed; draining node: 3 HDDs; 2 SSDs free.
    assert value(samples, "platter_disks", kind="hdd", state="available") == 1 + 3
    assert value(samples, "platter_disks", kind="hdd", state="allocated") == 2
    assert value(samples, "platter_disks", kind="hdd", state="failed") == 1
    assert value(samples, "platter_disks", kind="ssd", state="available") == 2
    assert value(samples, "platter_disks", kind="nvme", state="available") == 0
    for kind, state in (("ssd", "allocated"), ("ssd", "failed"), ("hdd", "retired")):
        assert value(samples, "platter_disks", kind=kind, state=state) == 0
    assert value(samples, "platter_disks_keeping_data", kind="hdd") == 0


def test_it_shows_each_nodes_free_capacity_with_its_state(scrape, inventory, alice):
    open_node, draining = inventory
    cluster = make_cluster(alice, wants(1, cores=3, memory_mb=4096, disks=2, kind="ssd"))
    assert isinstance(reserve(cluster.id), Reservation)

    samples = scrape()
    node = {"node": open_node.name, "state": "active"}
    assert value(samples, "platter_node_cores", **node) == 12
    assert value(samples, "platter_node_free_cores", **node) == 12 - 3
    assert value(samples, "platter_node_memory_bytes", **node) == 65536 * MB
    assert value(samples, "platter_node_free_memory_bytes", **node) == (65536 - 4096) * MB
    assert value(samples, "platter_node_free_disks", **node, kind="hdd") == 4
    assert value(samples, "platter_node_free_disks", **node, kind="ssd") == 0
    other = {"node": draining.name, "state": "draining"}
    assert value(samples, "platter_node_free_cores", **other) == 8
    assert value(samples, "platter_node_free_disks", **other, kind="hdd") == 3
    assert value(samples, "platter_node_free_disks", **other, kind="nvme") == 0


def test_it_counts_data_kept_for_a_reuse(scrape, inventory, alice):
    from apps.clusters.tests.factories import destroy_now

    cluster = make_cluster(alice, wants(1, disks=2, kind="ssd"))
    assert isinstance(reserve(cluster.id), Reservation)
    destroy_now(cluster.id, keep_data=True)
    samples = scrape()
    assert value(samples, "platter_disks_keeping_data", kind="ssd") == 2
    assert value(samples, "platter_disks", kind="ssd", state="available") == 2


@pytest.fixture
def unattended_queue(monkeypatch):
    """A queue of ALL_QUEUES that no worker consumes, so what is sent there stays."""
    name = "metrics-test"
    monkeypatch.setattr(queues, "ALL_QUEUES", [*queues.ALL_QUEUES, name])
    yield name
    with app.connection_for_write() as connection:
        connection.default_channel.client.delete(name, f"_kombu.binding.{name}")


def test_it_shows_how_many_tasks_wait_in_each_queue(scrape, unattended_queue):
    for _ in range(3):
        app.send_task("platter.ping", queue=unattended_queue)
    samples = scrape()
    assert value(samples, "platter_celery_queue_length", queue=unattended_queue) == 3
    for queue in queues.ALL_QUEUES:
        assert ("platter_celery_queue_length", (("queue", queue),)) in samples
    assert value(samples, "platter_metrics_redis_up") == 1


def test_it_still_serves_the_database_figures_when_redis_is_away(scrape, settings, inventory):
    nowhere = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": nowhere}}
    settings.CELERY_BROKER_URL = nowhere
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(nowhere).ping()
    samples = scrape()
    assert value(samples, "platter_metrics_redis_up") == 0
    assert value(samples, "platter_disks", kind="hdd", state="available") == 4 + 3
    assert not any(name.startswith("platter_celery_queue") for name, _ in samples)
